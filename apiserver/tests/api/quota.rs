//! ResourceQuota and LimitRange through the API: a count quota refuses the
//! write past its limit in upstream's words and stores nothing, compute
//! quotas demand what they constrain and count only live pods, scopes pick
//! the pods a quota counts, concurrent creates never pass the limit,
//! updates that grow usage are checked, and LimitRanges default and bound
//! containers.

use std::time::Duration;

use http::StatusCode;
use serde_json::{Value, json};

use crate::harness::{Client, Expect, TestServer, assert_status, columns, forbidden, message_of};

async fn quota(server: &TestServer, ns: &str, name: &str, spec: Value) {
    server
        .created(
            &format!("/api/v1/namespaces/{ns}/resourcequotas"),
            json!({"apiVersion": "v1", "kind": "ResourceQuota",
                   "metadata": {"name": name}, "spec": spec}),
        )
        .await;
}

async fn limit_range(server: &TestServer, ns: &str, limits: Value) {
    server
        .created(
            &format!("/api/v1/namespaces/{ns}/limitranges"),
            json!({"apiVersion": "v1", "kind": "LimitRange",
                   "metadata": {"name": "limits"}, "spec": {"limits": limits}}),
        )
        .await;
}

/// A server whose namespace `x` holds quota `name`: where most tests start.
async fn with_quota(name: &str, spec: Value) -> TestServer {
    let server = TestServer::new().await;
    server.namespace("x").await;
    quota(&server, "x", name, spec).await;
    server
}

/// A server whose namespace `x` has a LimitRange of `limits`.
async fn with_limit_range(limits: Value) -> TestServer {
    let server = TestServer::new().await;
    server.namespace("x").await;
    limit_range(&server, "x", limits).await;
    server
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
}

/// Where the pod tests create their pods: namespace `x`, the one
/// `with_quota` and `with_limit_range` make.
const PODS: &str = "/api/v1/namespaces/x/pods";

fn pod(name: &str, resources: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "busybox", "resources": resources}]}})
}

/// Creates configmaps `cm-0`..`cm-{count}` in `ns` all at once, each through
/// `server_for(i)`, and returns how many were created: the race every
/// concurrency test runs. Every refusal must be the quota's 403 and carry a
/// message that `refusal` accepts.
async fn create_at_once<'a>(
    count: usize,
    ns: &str,
    server_for: impl Fn(usize) -> &'a TestServer,
    refusal: impl Fn(&str) -> bool,
) -> usize {
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    let creates = (0..count).map(|i| {
        let (server, path) = (server_for(i), &path);
        async move { server.post(path, configmap(&format!("cm-{i}"))).await }
    });
    let results = futures::future::join_all(creates).await;
    for (code, body) in results
        .iter()
        .filter(|(code, _)| *code != StatusCode::CREATED)
    {
        assert_status(*code, body, 403, "Forbidden");
        assert!(refusal(message_of(body)), "{body}");
    }
    results
        .iter()
        .filter(|(code, _)| *code == StatusCode::CREATED)
        .count()
}

#[tokio::test]
async fn a_count_quota_refuses_the_object_past_its_limit_and_stores_nothing() {
    let server = with_quota("q", json!({"hard": {"configmaps": "1"}})).await;
    let cms = "/api/v1/namespaces/x/configmaps";
    server.created(cms, configmap("a")).await;
    let body = forbidden(
        server.post(cms, configmap("b")).await,
        "configmaps \"b\" is forbidden: exceeded quota: q, requested: configmaps=1, used: configmaps=1, limited: configmaps=1",
    );
    assert_eq!(body["details"]["name"], "b");
    assert_eq!(body["details"]["kind"], "configmaps");
    assert!(
        !server
            .keys()
            .await
            .iter()
            .any(|k| k.ends_with("/configmaps/x/b"))
    );
    assert_eq!(server.list_names(cms).await, vec!["a"]);

    // Deleting the first frees its slot; other kinds and namespaces are free.
    server.delete_ok(&format!("{cms}/a")).await;
    server.created(cms, configmap("b")).await;
    server
        .created("/api/v1/namespaces/default/configmaps", configmap("c"))
        .await;
    server
        .created(
            "/api/v1/namespaces/x/secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
        )
        .await;
}

#[tokio::test]
async fn count_names_cover_any_resource_and_a_dry_run_takes_no_slot() {
    let server = with_quota(
        "objects",
        json!({"hard": {"count/deployments.apps": "1", "count/secrets": "1"}}),
    )
    .await;
    let deployment = |name: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
               "spec": {"selector": {"matchLabels": {"a": "b"}},
                        "template": {"metadata": {"labels": {"a": "b"}},
                                     "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    };
    let deployments = "/apis/apps/v1/namespaces/x/deployments";
    server
        .created(&format!("{deployments}?dryRun=All"), deployment("d0"))
        .await;
    server.created(deployments, deployment("d1")).await;
    forbidden(
        server.post(deployments, deployment("d2")).await,
        "deployments.apps \"d2\" is forbidden: exceeded quota: objects, requested: count/deployments.apps=1, used: count/deployments.apps=1, limited: count/deployments.apps=1",
    );
}

#[tokio::test]
async fn a_compute_quota_demands_what_it_constrains_and_counts_live_pods() {
    let server = with_quota(
        "compute",
        json!({"hard": {"requests.cpu": "1", "limits.memory": "1Gi", "pods": "5"}}),
    )
    .await;
    forbidden(
        server.post(PODS, pod("bare", json!({}))).await,
        "pods \"bare\" is forbidden: failed quota: compute: must specify limits.memory for: c; requests.cpu for: c",
    );
    let sized = |name: &str, cpu: &str| {
        pod(
            name,
            json!({"requests": {"cpu": cpu}, "limits": {"memory": "512Mi"}}),
        )
    };
    server.created(PODS, sized("p1", "600m")).await;
    forbidden(
        server.post(PODS, sized("p2", "600m")).await,
        "pods \"p2\" is forbidden: exceeded quota: compute, requested: requests.cpu=600m, used: requests.cpu=600m, limited: requests.cpu=1",
    );
    server.created(PODS, sized("p3", "0.4")).await;
    forbidden(
        server.post(PODS, sized("p4", "100m")).await,
        "pods \"p4\" is forbidden: exceeded quota: compute, requested: limits.memory=512Mi,requests.cpu=100m, used: limits.memory=1Gi,requests.cpu=1, limited: limits.memory=1Gi,requests.cpu=1",
    );

    // A finished pod no longer counts.
    let mut p1 = server.get_ok("/api/v1/namespaces/x/pods/p1").await;
    p1["status"] = json!({"phase": "Succeeded"});
    server
        .put_ok("/api/v1/namespaces/x/pods/p1/status", p1)
        .await;
    server.created(PODS, sized("p5", "600m")).await;
}

#[tokio::test]
async fn scopes_choose_the_pods_a_quota_counts() {
    let server = with_quota(
        "best-effort",
        json!({"hard": {"pods": "1"}, "scopes": ["BestEffort"]}),
    )
    .await;
    server
        .created(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                   "metadata": {"name": "high"}, "value": 1000}),
        )
        .await;
    quota(
        &server,
        "x",
        "high",
        json!({"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}),
    )
    .await;

    server.created(PODS, pod("free-1", json!({}))).await;
    forbidden(
        server.post(PODS, pod("free-2", json!({}))).await,
        "pods \"free-2\" is forbidden: exceeded quota: best-effort, requested: pods=1, used: pods=1, limited: pods=1",
    );
    let sized = json!({"requests": {"cpu": "10m"}});
    let (code, body) = server.post(PODS, pod("sized-1", sized.clone())).await;
    assert_eq!(code, StatusCode::CREATED, "not BestEffort: {body}");

    let mut high = pod("high-1", sized.clone());
    high["spec"]["priorityClassName"] = json!("high");
    server.created(PODS, high.clone()).await;
    high["metadata"]["name"] = json!("high-2");
    forbidden(
        server.post(PODS, high).await,
        "pods \"high-2\" is forbidden: exceeded quota: high, requested: pods=1, used: pods=1, limited: pods=1",
    );
    let (code, body) = server.post(PODS, pod("sized-2", sized)).await;
    assert_eq!(code, StatusCode::CREATED, "no class, not counted: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_never_pass_the_hard_limit() {
    let server = with_quota("q", json!({"hard": {"configmaps": "5"}})).await;
    let created = create_at_once(
        24,
        "x",
        |_| &server,
        |message| {
            message.ends_with(
            "exceeded quota: q, requested: configmaps=1, used: configmaps=5, limited: configmaps=5",
        )
        },
    )
    .await;
    assert_eq!(created, 5);
    assert_eq!(
        server
            .list_names("/api/v1/namespaces/x/configmaps")
            .await
            .len(),
        5
    );
}

#[tokio::test]
async fn updates_that_grow_usage_are_checked() {
    let server = with_quota(
        "svc",
        json!({"hard": {"services.nodeports": "1", "services": "5"}}),
    )
    .await;
    let services = "/api/v1/namespaces/x/services";
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}});
    server.created(services, svc).await;
    forbidden(
        server
            .merge_patch(
                &format!("{services}/web"),
                json!({"spec": {"type": "NodePort"}}),
            )
            .await,
        "services \"web\" is forbidden: exceeded quota: svc, requested: services.nodeports=2, used: services.nodeports=0, limited: services.nodeports=1",
    );
    let (_, stored) = server.get(&format!("{services}/web")).await;
    assert_eq!(stored["spec"]["type"], "ClusterIP", "nothing changed");
    // Changes that use nothing more pass.
    server
        .merge_patch_ok(
            &format!("{services}/web"),
            json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .await;
}

#[tokio::test]
async fn claims_are_charged_their_storage_per_class() {
    let server = with_quota(
        "storage",
        json!({"hard": {"gold.storageclass.storage.k8s.io/requests.storage": "1Gi"}}),
    )
    .await;
    let claim = |name: &str, class: &str, size: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
               "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": size}}}})
    };
    let claims = "/api/v1/namespaces/x/persistentvolumeclaims";
    server.created(claims, claim("a", "gold", "768Mi")).await;
    forbidden(
        server.post(claims, claim("b", "gold", "512Mi")).await,
        "persistentvolumeclaims \"b\" is forbidden: exceeded quota: storage, requested: gold.storageclass.storage.k8s.io/requests.storage=512Mi, used: gold.storageclass.storage.k8s.io/requests.storage=768Mi, limited: gold.storageclass.storage.k8s.io/requests.storage=1Gi",
    );
    let (code, body) = server.post(claims, claim("c", "silver", "5Gi")).await;
    assert_eq!(code, StatusCode::CREATED, "another class: {body}");
}

#[tokio::test]
async fn a_limit_range_defaults_containers_and_the_stored_pod_shows_it() {
    let server = with_limit_range(
        json!([{"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"},
                "defaultRequest": {"cpu": "100m"}}]),
    )
    .await;
    let range = server
        .get_ok("/api/v1/namespaces/x/limitranges/limits")
        .await;
    assert_eq!(
        range["spec"]["limits"][0]["defaultRequest"],
        json!({"cpu": "100m", "memory": "256Mi"}),
        "defaultRequest takes what default has"
    );
    server.created(PODS, pod("p", json!({}))).await;
    let (_, stored) = server.get("/api/v1/namespaces/x/pods/p").await;
    assert_eq!(
        stored["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "500m", "memory": "256Mi"},
               "requests": {"cpu": "100m", "memory": "256Mi"}})
    );
    assert_eq!(
        stored["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container c; cpu, memory limit for container c"
    );
    // A container that limits without requesting requests its limit.
    let created = server
        .created(PODS, pod("limited", json!({"limits": {"cpu": "200m"}})))
        .await;
    assert_eq!(
        created["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "200m", "memory": "256Mi"},
               "requests": {"cpu": "200m", "memory": "256Mi"}})
    );
}

#[tokio::test]
async fn a_limit_range_refuses_containers_outside_its_bounds() {
    let server = with_limit_range(
        json!([{"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "1"}},
               {"type": "PersistentVolumeClaim", "max": {"storage": "1Gi"}}]),
    )
    .await;
    forbidden(
        server
            .post(PODS, pod("x", json!({"requests": {"cpu": "50m"}})))
            .await,
        "pods \"x\" is forbidden: minimum cpu usage per Container is 100m, but request is 50m",
    );
    forbidden(
        server
            .post(
                PODS,
                pod(
                    "y",
                    json!({"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}),
                ),
            )
            .await,
        "pods \"y\" is forbidden: maximum cpu usage per Container is 1, but limit is 2",
    );
    let two = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "two"},
        "spec": {"containers": [
            {"name": "a", "image": "i", "resources": {"requests": {"cpu": "10m"}}},
            {"name": "b", "image": "i", "resources": {"requests": {"cpu": "20m"}}}]}});
    forbidden(
        server.post(PODS, two).await,
        "pods \"two\" is forbidden: [minimum cpu usage per Container is 100m, but request is 10m, minimum cpu usage per Container is 100m, but request is 20m]",
    );
    assert!(server.list_names(PODS).await.is_empty());
    // Within bounds, and defaulted to the maximum as limit.
    let (code, body) = server
        .post(PODS, pod("z", json!({"requests": {"cpu": "200m"}})))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(
        body["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "1"
    );

    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "big"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}});
    forbidden(
        server
            .post("/api/v1/namespaces/x/persistentvolumeclaims", claim)
            .await,
        "persistentvolumeclaims \"big\" is forbidden: maximum storage usage per PersistentVolumeClaim is 1Gi, but request is 2Gi",
    );
}

#[tokio::test]
async fn limit_range_defaults_satisfy_a_compute_quota() {
    let server = with_limit_range(json!([{"type": "Container", "default": {"cpu": "300m"}}])).await;
    quota(&server, "x", "cpu", json!({"hard": {"limits.cpu": "500m"}})).await;
    server.created(PODS, pod("a", json!({}))).await;
    forbidden(
        server.post(PODS, pod("b", json!({}))).await,
        "pods \"b\" is forbidden: exceeded quota: cpu, requested: limits.cpu=300m, used: limits.cpu=300m, limited: limits.cpu=500m",
    );
}

#[tokio::test]
async fn quotas_print_used_and_hard_in_request_and_limit_columns() {
    let server = TestServer::new().await;
    server.namespace("x").await;
    let body = server
        .created(
            "/api/v1/namespaces/x/resourcequotas",
            json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                   "spec": {"hard": {"pods": "2", "limits.cpu": "1", "requests.cpu": "500m"}}}),
        )
        .await;
    let mut with_status = body.clone();
    with_status["status"] = json!({"hard": {"pods": "2", "limits.cpu": "1", "requests.cpu": "500m"},
                                   "used": {"pods": "1", "limits.cpu": "250m", "requests.cpu": "0"}});
    server
        .put_ok("/api/v1/namespaces/x/resourcequotas/q/status", with_status)
        .await;
    let table = server
        .get_table("/api/v1/namespaces/x/resourcequotas")
        .await;
    assert_eq!(columns(&table), ["Name", "Age", "Request", "Limit"]);
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[2], "pods: 1/2, requests.cpu: 0/500m");
    assert_eq!(cells[3], "limits.cpu: 250m/1");
}

#[tokio::test]
async fn invalid_quotas_and_limit_ranges_are_refused() {
    let server = TestServer::new().await;
    server
        .post(
            "/api/v1/namespaces/default/resourcequotas",
            json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                   "spec": {"hard": {"pods": "-1"}}}),
        )
        .await
        .expect_mentions(422, "Invalid", &["spec.hard[pods]"]);
    server
        .post(
            "/api/v1/namespaces/default/limitranges",
            json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"},
                   "spec": {"limits": [{"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}]}}),
        )
        .await
        .expect_mentions(422, "Invalid", &["min value 2 is greater than max value 1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_store_never_pass_a_count_quota_together() {
    use skiff_apiserver::{ApiServer, ApiServerConfig};
    let dir = tempfile::tempdir().unwrap();
    let store = crate::harness::open_store(dir.path().join("store")).await;
    let config = || ApiServerConfig {
        shared_store: true,
        ..ApiServerConfig::default()
    };
    let a = TestServer::wrap(
        ApiServer::new(store.clone(), config()).await.unwrap(),
        store.clone(),
    );
    let b = TestServer::wrap(
        ApiServer::new(store.clone(), config()).await.unwrap(),
        store.clone(),
    );
    a.namespace("shared").await;
    quota(
        &a,
        "shared",
        "five",
        json!({"hard": {"count/configmaps": "5"}}),
    )
    .await;
    // Each server enforces the quotas it knows of; wait until the second
    // has seen this one.
    crate::harness::eventually(
        Duration::from_secs(10),
        Duration::from_millis(20),
        || async {
            let (_, list) = b.get("/api/v1/namespaces/shared/resourcequotas").await;
            match list["items"].as_array() {
                Some(items) if items.len() == 1 => Ok(()),
                _ => Err(list.to_string()),
            }
        },
    )
    .await;
    let created = create_at_once(
        12,
        "shared",
        |i| if i % 2 == 0 { &a } else { &b },
        |message| message.contains("exceeded quota: five"),
    )
    .await;
    assert_eq!(created, 5, "the two servers together passed the quota");
    // The charges are durable: the quota's status records them.
    let (_, five) = a.get("/api/v1/namespaces/shared/resourcequotas/five").await;
    assert_eq!(five["status"]["used"]["count/configmaps"], "5", "{five}");
    a.server.shutdown();
    b.server.shutdown();
}
