//! API Priority and Fairness configuration through the API: upstream's
//! mandatory and suggested FlowSchemas and PriorityLevelConfigurations are
//! there from the first request with kubectl's columns; bad objects are
//! refused at their fields; and across a restart the server restores the
//! mandatory objects and what it manages, while an admin's
//! `autoupdate-spec: "false"` edit and own objects are kept.

use std::time::Duration;

use axum::body::Body;
use http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use skiff_apiserver::ApiServerConfig;
use skiff_apiserver::authn::UserInfo;
use skiff_common::metrics::exposition;
use tower::ServiceExt;

use super::harness::{
    Client, Expect, KeptStore, TestServer, assert_refused, columns, exchange, forbidden,
    item_names, json_request, row, strings,
};
use super::metrics::scrape;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

const SCHEMAS: &str = "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas";
const LEVELS: &str = "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations";

/// The list's item names, sorted.
fn names(list: &Value) -> Vec<String> {
    let mut names = item_names(list);
    names.sort();
    names
}

/// GETs `path` as `user` in a task of its own, so a test can hold seats
/// while it sends more: the task gives the code and how long it took.
fn spawn_get_as(
    s: &TestServer,
    user: &UserInfo,
    path: &'static str,
) -> tokio::task::JoinHandle<(StatusCode, Duration)> {
    let server = s.server.clone();
    let user = user.clone();
    tokio::spawn(async move {
        let mut request = Request::builder().uri(path).body(Body::empty()).unwrap();
        request.extensions_mut().insert(user);
        let started = std::time::Instant::now();
        let response = server.router().oneshot(request).await.unwrap();
        (response.status(), started.elapsed())
    })
}

#[tokio::test]
async fn bootstrap_objects_are_served_with_kubectl_columns() {
    let s = TestServer::new().await;
    let levels = s.get_ok(LEVELS).await;
    assert_eq!(
        names(&levels),
        [
            "catch-all",
            "exempt",
            "global-default",
            "leader-election",
            "node-high",
            "system",
            "workload-high",
            "workload-low"
        ]
    );
    let (_, schemas) = s.get(SCHEMAS).await;
    assert_eq!(
        names(&schemas),
        [
            "catch-all",
            "endpoint-controller",
            "exempt",
            "global-default",
            "kube-controller-manager",
            "kube-scheduler",
            "kube-system-service-accounts",
            "probes",
            "service-accounts",
            "system-leader-election",
            "system-node-high",
            "system-nodes",
            "workload-leader-election"
        ]
    );
    for item in schemas["items"].as_array().unwrap() {
        assert_eq!(
            item["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"],
            "true"
        );
    }

    let levels = s.get_table(LEVELS).await;
    assert_eq!(
        columns(&levels),
        [
            "Name",
            "Type",
            "NominalConcurrencyShares",
            "Queues",
            "HandSize",
            "QueueLengthLimit",
            "Age"
        ]
    );
    let cells = |cells: &Value| cells.as_array().unwrap()[..6].to_vec();
    assert_eq!(
        cells(row(&levels, "workload-low")),
        [
            json!("workload-low"),
            json!("Limited"),
            json!(100),
            json!(128),
            json!(6),
            json!(50)
        ]
    );
    assert_eq!(
        cells(row(&levels, "exempt")),
        [
            json!("exempt"),
            json!("Exempt"),
            json!("<none>"),
            json!("<none>"),
            json!("<none>"),
            json!("<none>")
        ]
    );
    assert_eq!(
        cells(row(&levels, "catch-all")),
        [
            json!("catch-all"),
            json!("Limited"),
            json!(5),
            json!("<none>"),
            json!("<none>"),
            json!("<none>")
        ]
    );

    let schemas = s.get_table(SCHEMAS).await;
    assert_eq!(
        columns(&schemas),
        [
            "Name",
            "PriorityLevel",
            "MatchingPrecedence",
            "DistinguisherMethod",
            "Age",
            "MissingPL"
        ]
    );
    let nodes = row(&schemas, "system-node-high").as_array().unwrap();
    assert_eq!(
        nodes[..4],
        [
            json!("system-node-high"),
            json!("node-high"),
            json!(400),
            json!("ByUser")
        ]
    );
    let exempt = row(&schemas, "exempt").as_array().unwrap();
    assert_eq!(exempt[3], "<none>");
}

/// The Dangling condition of the schema `name` once it reads `status`.
async fn dangling_until(s: &TestServer, name: &str, status: &str) -> Value {
    let schema = s
        .get_until(&format!("{SCHEMAS}/{name}"), |fs| {
            fs["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Dangling" && c["status"] == status)
        })
        .await;
    schema["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Dangling")
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_schema_says_whether_its_priority_level_exists() {
    let s = TestServer::new().await;
    // The bootstrap schemas name levels that exist: MISSINGPL False.
    let found = dangling_until(&s, "catch-all", "False").await;
    assert_eq!(found["reason"], "Found");
    assert_eq!(
        found["message"],
        "This FlowSchema references the PriorityLevelConfiguration object named \"catch-all\" and it exists"
    );
    let table = s.get_table(SCHEMAS).await;
    let row = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["cells"][0] == "catch-all")
        .cloned()
        .unwrap();
    assert_eq!(row["cells"][5], "False", "{row}");

    // A schema naming a level that is not there dangles until it comes.
    s.created(
        SCHEMAS,
        json!({"metadata": {"name": "later"}, "spec": {
            "priorityLevelConfiguration": {"name": "later"},
            "rules": [{"subjects": [{"kind": "Group", "group": {"name": "g"}}],
                       "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/version"]}]}]}}),
    )
    .await;
    let missing = dangling_until(&s, "later", "True").await;
    assert_eq!(missing["reason"], "NotFound");
    s.created(
        LEVELS,
        json!({"metadata": {"name": "later"}, "spec": {"type": "Limited",
            "limited": {"limitResponse": {"type": "Reject"}}}}),
    )
    .await;
    dangling_until(&s, "later", "False").await;
}

#[tokio::test]
async fn defaults_are_filled_and_bad_objects_refused() {
    let s = TestServer::new().await;
    let level = s
        .created(
            LEVELS,
            json!({"metadata": {"name": "tenants"}, "spec": {"type": "Limited",
                "limited": {"limitResponse": {"type": "Queue"}}}}),
        )
        .await;
    assert_eq!(level["spec"]["limited"]["nominalConcurrencyShares"], 30);
    assert_eq!(
        level["spec"]["limited"]["limitResponse"]["queuing"],
        json!({"queues": 64, "handSize": 8, "queueLengthLimit": 50})
    );
    let schema = s.created(
            SCHEMAS,
            json!({"metadata": {"name": "tenants"}, "spec": {
                "priorityLevelConfiguration": {"name": "tenants"},
                "rules": [{"subjects": [{"kind": "Group", "group": {"name": "tenants"}}],
                           "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/version"]}]}]}}),
        ).await;
    assert_eq!(schema["spec"]["matchingPrecedence"], 1000);

    let body = s
        .post(
            SCHEMAS,
            json!({"metadata": {"name": "bad"}, "spec": {
                "matchingPrecedence": 0,
                "priorityLevelConfiguration": {"name": "tenants"},
                "rules": [{"subjects": [{"kind": "Robot"}],
                           "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}]}}),
        )
        .await
        .expect_failure(422, "Invalid");
    let fields: Vec<&str> = strings(&body["details"]["causes"], "field");
    assert_eq!(
        fields,
        [
            "spec.matchingPrecedence",
            "spec.rules[0].subjects[0].kind",
            "spec.rules[0].resourceRules[0].namespaces"
        ]
    );
    let body = s
        .post(
            LEVELS,
            json!({"metadata": {"name": "bad"}, "spec": {"type": "Limited",
                "limited": {"limitResponse": {"type": "Queue", "queuing": {"queues": 2, "handSize": 3, "queueLengthLimit": 1}}}}}),
        )
        .await
        .expect_failure(422, "Invalid");
    assert_eq!(
        body["details"]["causes"][0]["field"],
        "spec.limited.limitResponse.queuing.handSize"
    );
}

#[tokio::test]
async fn a_restart_restores_what_the_server_manages_and_keeps_the_admins_edits() {
    let disk = KeptStore::new();
    {
        let s = disk.start().await;
        // The admin takes over a suggested level, ...
        let (_, mut low) = s.get(&format!("{LEVELS}/workload-low")).await;
        low["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"] = json!("false");
        low["spec"]["limited"]["nominalConcurrencyShares"] = json!(7);
        s.put_ok(&format!("{LEVELS}/workload-low"), low).await;
        // ... edits a managed one and a mandatory one without the annotation,
        for name in ["workload-high", "catch-all"] {
            let (_, mut level) = s.get(&format!("{LEVELS}/{name}")).await;
            level["spec"]["limited"]["nominalConcurrencyShares"] = json!(1);
            s.put_ok(&format!("{LEVELS}/{name}"), level).await;
        }
        // ... removes a schema, and adds one of its own marked as managed.
        s.delete_ok(&format!("{SCHEMAS}/probes")).await;
        s.created(
                SCHEMAS,
                json!({"metadata": {"name": "stale", "annotations": {"apf.kubernetes.io/autoupdate-spec": "true"}},
                    "spec": {"priorityLevelConfiguration": {"name": "global-default"},
                    "rules": [{"subjects": [{"kind": "User", "user": {"name": "x"}}],
                               "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}),
            ).await;
        s.stop().await;
    }
    let s = disk.start().await;
    let shares = |level: &Value| level["spec"]["limited"]["nominalConcurrencyShares"].clone();
    let (_, low) = s.get(&format!("{LEVELS}/workload-low")).await;
    assert_eq!(shares(&low), 7, "the admin's level was overwritten");
    let (_, high) = s.get(&format!("{LEVELS}/workload-high")).await;
    assert_eq!(shares(&high), 40, "a managed level was not restored");
    let (_, catch_all) = s.get(&format!("{LEVELS}/catch-all")).await;
    assert_eq!(
        shares(&catch_all),
        5,
        "the mandatory level was not restored"
    );
    let (code, _) = s.get(&format!("{SCHEMAS}/probes")).await;
    assert_eq!(
        code,
        StatusCode::OK,
        "a deleted suggested schema comes back"
    );
    let (code, _) = s.get(&format!("{SCHEMAS}/stale")).await;
    assert_eq!(
        code,
        StatusCode::NOT_FOUND,
        "an unknown managed schema stays"
    );
}

/// A request as `user`; the code, the headers and the JSON body.
async fn send_as(
    s: &TestServer,
    user: &UserInfo,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, http::HeaderMap, Value) {
    let mut request = json_request(method, path, "application/json", body);
    request.extensions_mut().insert(user.clone());
    exchange(s.server.router(), request).await
}

/// Creates configmap `name` as `user`, reading back the flow control
/// headers too.
async fn post_configmap_as(
    s: &TestServer,
    user: &UserInfo,
    name: &str,
) -> (StatusCode, http::HeaderMap, Value) {
    let configmap = json!({"metadata": {"name": name}});
    send_as(s, user, Method::POST, CMS, Some(configmap)).await
}

fn uid(s: &Value) -> String {
    s["metadata"]["uid"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_flooding_flow_gets_429_while_other_flows_and_admins_get_through() {
    // Two seats in all; `request_timeout` 4 s lets a request wait 1 s.
    let s = TestServer::with_config(ApiServerConfig {
        max_requests_inflight: 1,
        max_mutating_requests_inflight: 1,
        request_timeout: Duration::from_secs(4),
        ..ApiServerConfig::default()
    })
    .await;
    let level = s.created(
            LEVELS,
            json!({"metadata": {"name": "tiny"}, "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": 1,
                "limitResponse": {"type": "Queue", "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 1}}}}}),
        ).await;
    let schema = s.created(
            SCHEMAS,
            json!({"metadata": {"name": "flood"}, "spec": {
                "priorityLevelConfiguration": {"name": "tiny"}, "matchingPrecedence": 500,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [{"subjects": [{"kind": "User", "user": {"name": "flooder"}}],
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": true}]}]}}),
        ).await;
    // The flooder may do anything, so nothing but flow control stops it.
    let flooder = UserInfo::new("flooder", Vec::<String>::new());
    s.grant("flooder", "cluster-admin").await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    // A list from a revision the store has not reached waits 3 s for it:
    // a request that holds the level's one seat that long.
    let slow = "/api/v1/namespaces/default/configmaps?resourceVersion=99999999";
    let holder = spawn_get_as(&s, &flooder, slow);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The next one waits in the only queue, and gives up after 1 s ...
    let waiter = spawn_get_as(&s, &flooder, CMS);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // ... and one more finds the queue full: refused at once, in upstream's words.
    let (code, headers, body) = post_configmap_as(&s, &flooder, "flood").await;
    assert_refused(
        code,
        &body,
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
    );
    assert_eq!(body["details"]["retryAfterSeconds"], 1);
    assert_eq!(headers["retry-after"], "1");
    // The metrics show the held seat, the waiter and the refusal.
    let flood = [("flow_schema", "flood"), ("priority_level", "tiny")];
    let samples = scrape(&s).await;
    let gauge = |name: &str| exposition::value(&samples, name, &flood);
    assert_eq!(
        gauge("apiserver_flowcontrol_current_executing_requests"),
        Some(1.0)
    );
    assert_eq!(
        gauge("apiserver_flowcontrol_current_inqueue_requests"),
        Some(1.0)
    );
    let refused = |samples: &[exposition::Sample], reason: &str| {
        let mut labels = flood.to_vec();
        labels.push(("reason", reason));
        exposition::value(
            samples,
            "apiserver_flowcontrol_rejected_requests_total",
            &labels,
        )
    };
    assert_eq!(refused(&samples, "queue-full"), Some(1.0));
    assert_eq!(
        headers["x-kubernetes-pf-flowschema-uid"],
        uid(&schema).as_str()
    );
    assert_eq!(
        headers["x-kubernetes-pf-prioritylevel-uid"],
        uid(&level).as_str()
    );
    let (code, _) = s.get(&format!("{CMS}/flood")).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "a refused write was stored");

    // Meanwhile another user's flow and an admin are served at once.
    let alice = UserInfo::new("alice", Vec::<String>::new());
    let (code, headers, _) = send_as(&s, &alice, Method::GET, "/version", None).await;
    assert_eq!(code, StatusCode::OK);
    let (_, global_default) = s.get(&format!("{SCHEMAS}/global-default")).await;
    assert_eq!(
        headers["x-kubernetes-pf-flowschema-uid"],
        uid(&global_default).as_str()
    );
    let admin = UserInfo::new("root", ["system:masters".to_string()]);
    let (code, headers, body) = post_configmap_as(&s, &admin, "admin").await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let (_, exempt) = s.get(&format!("{SCHEMAS}/exempt")).await;
    assert_eq!(
        headers["x-kubernetes-pf-flowschema-uid"],
        uid(&exempt).as_str()
    );

    let (code, waited) = waiter.await.unwrap();
    assert_eq!(code, StatusCode::TOO_MANY_REQUESTS);
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_millis(2500),
        "{waited:?}"
    );
    assert_eq!(holder.await.unwrap().0, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(refused(&scrape(&s).await, "time-out"), Some(1.0));
    // With the seat free again the flooder is served.
    let (code, _, _) = send_as(&s, &flooder, Method::GET, CMS, None).await;
    assert_eq!(code, StatusCode::OK);
}

#[tokio::test]
async fn open_watches_do_not_hold_their_levels_seats() {
    let s = TestServer::with_config(ApiServerConfig {
        max_requests_inflight: 1,
        max_mutating_requests_inflight: 0,
        ..ApiServerConfig::default()
    })
    .await;
    // Without global-default, users fall to catch-all: one seat, no queue,
    // so a seat still held by a watch would refuse the list below.
    s.delete_ok(&format!("{SCHEMAS}/global-default")).await;
    s.grant("watcher", "view").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let watcher = UserInfo::new("watcher", Vec::<String>::new());
    // Five open watches at a level of one seat, then an ordinary list.
    let mut open = Vec::new();
    for _ in 0..5 {
        let mut request = Request::builder()
            .uri(format!("{CMS}?watch=true"))
            .body(Body::empty())
            .unwrap();
        request.extensions_mut().insert(watcher.clone());
        let response = s.server.router().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let (_, catch_all) = s.get(&format!("{SCHEMAS}/catch-all")).await;
        assert_eq!(
            response.headers()["x-kubernetes-pf-flowschema-uid"],
            uid(&catch_all).as_str()
        );
        open.push(response);
    }
    let (code, _, body) = send_as(&s, &watcher, Method::GET, CMS, None).await;
    assert_eq!(code, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_plain_user_can_neither_read_nor_change_the_configuration() {
    let s = TestServer::new().await;
    let user = UserInfo::new("mallory", ["system:authenticated".to_string()]);
    forbidden(
        s.get_as(&user, SCHEMAS).await,
        "flowschemas.flowcontrol.apiserver.k8s.io is forbidden: User \"mallory\" cannot list resource \"flowschemas\" in API group \"flowcontrol.apiserver.k8s.io\" at the cluster scope",
    );
    // Nor may it give itself a level that is never queued.
    s.call_as(
        &user,
        Method::PUT,
        &format!("{LEVELS}/exempt"),
        Some(json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                "kind": "PriorityLevelConfiguration", "metadata": {"name": "exempt"},
                "spec": {"type": "Exempt"}})),
    )
    .await
    .expect_failure(403, "Forbidden");
    s.call_as(
        &user,
        Method::DELETE,
        &format!("{LEVELS}/global-default"),
        None,
    )
    .await
    .expect_failure(403, "Forbidden");
    let (code, _) = s.get(&format!("{LEVELS}/global-default")).await;
    assert_eq!(code, StatusCode::OK, "the level is still there");
}
