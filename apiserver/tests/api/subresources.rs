use http::StatusCode;
use serde_json::json;
use skiff_apiserver::authn::UserInfo;

use crate::harness::{Client, Expect, TestServer, assert_mentions, columns, find_by, pod, row};

const DEPLOY: &str = "/apis/apps/v1/namespaces/default/deployments/web";

async fn deployment(s: &TestServer) -> serde_json::Value {
    let d = json!({"metadata": {"name": "web"}, "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
        "status": {"replicas": 99}});

    s.created("/apis/apps/v1/namespaces/default/deployments", d)
        .await
}

#[tokio::test]
async fn status_and_spec_are_written_separately() {
    let s = TestServer::new().await;
    let d = deployment(&s).await;
    assert!(
        d.get("status").is_none(),
        "client-set status is dropped on create"
    );
    let status_path = format!("{DEPLOY}/status");
    let mut with_status = d.clone();
    with_status["status"] = json!({"replicas": 2, "observedGeneration": 1});
    with_status["spec"]["replicas"] = json!(7);
    let body = s.put_ok(&status_path, with_status).await;
    assert_eq!(body["status"]["replicas"], 2);
    assert_eq!(body["spec"]["replicas"], 2, "spec ignored through status");

    let mut main = body.clone();
    main["status"]["replicas"] = json!(0);
    main["spec"]["replicas"] = json!(3);
    let (_, body) = s.put(DEPLOY, main).await;
    assert_eq!(
        body["status"]["replicas"], 2,
        "status ignored through the main resource"
    );
    assert_eq!(body["spec"]["replicas"], 3);

    let body = s
        .merge_patch_ok(&status_path, json!({"status": {"readyReplicas": 1}}))
        .await;
    assert_eq!(body["status"]["readyReplicas"], 1);
    let got = s.get_ok(&status_path).await;
    assert_eq!(got["status"]["readyReplicas"], 1);
}

#[tokio::test]
async fn scale_reads_and_writes_replicas() {
    let s = TestServer::new().await;
    deployment(&s).await;
    let scale = s.get_ok(&format!("{DEPLOY}/scale")).await;
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(scale["status"]["selector"], "app=web");
    let mut up = scale.clone();
    up["spec"]["replicas"] = json!(5);
    let body = s.put_ok(&format!("{DEPLOY}/scale"), up.clone()).await;
    assert_eq!(body["spec"]["replicas"], 5);
    s.put(&format!("{DEPLOY}/scale"), up)
        .await
        .expect_failure(409, "Conflict");
    s.merge_patch_ok(&format!("{DEPLOY}/scale"), json!({"spec": {"replicas": 1}}))
        .await;
    let (_, d) = s.get(DEPLOY).await;
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(d["metadata"]["generation"], 3);
}

/// The Binding of pod `pod` to node `node`, as the scheduler posts it.
fn binding(pod: &str, node: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
}

#[tokio::test]
async fn binding_assigns_a_node_once() {
    let s = TestServer::new().await;
    let pod = pod("p", None);
    let (_, created) = s.post("/api/v1/namespaces/default/pods", pod).await;
    let to_n1 = binding("p", "n1");
    let body = s
        .created("/api/v1/namespaces/default/pods/p/binding", to_n1.clone())
        .await;
    assert_eq!(body["status"], "Success");
    let (_, p) = s.get("/api/v1/namespaces/default/pods/p").await;
    assert_eq!(p["spec"]["nodeName"], "n1");
    assert_eq!(p["status"]["conditions"][0]["type"], "PodScheduled");
    assert_eq!(p["status"]["conditions"][0]["status"], "True");
    // As upstream, a binding is a storage-level write: it adds no managed-fields entry.
    assert_eq!(
        p["metadata"]["managedFields"],
        created["metadata"]["managedFields"]
    );
    assert_ne!(
        p["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    s.post("/api/v1/namespaces/default/pods/p/binding", to_n1)
        .await
        .expect_mentions(409, "Conflict", &["is already assigned to node \"n1\""]);
    s.post(
        "/api/v1/namespaces/default/pods/gone/binding",
        binding("gone", "n1"),
    )
    .await
    .expect_failure(404, "NotFound");
}

/// The legacy `bindings` collection binds the pod the Binding names, as
/// upstream still serves it: create only, nothing stored under it.
#[tokio::test]
async fn the_bindings_collection_binds_the_pod_its_body_names() {
    let s = TestServer::new().await;
    s.post("/api/v1/namespaces/default/pods", pod("p", None))
        .await
        .expect_code(StatusCode::CREATED);
    let body = s
        .created("/api/v1/namespaces/default/bindings", binding("p", "n1"))
        .await;
    assert_eq!(body["status"], "Success");
    let p = s.get_ok("/api/v1/namespaces/default/pods/p").await;
    assert_eq!(p["spec"]["nodeName"], "n1");
    s.post("/api/v1/namespaces/default/bindings", binding("p", "n2"))
        .await
        .expect_mentions(409, "Conflict", &["is already assigned to node \"n1\""]);
    s.post("/api/v1/namespaces/default/bindings", binding("gone", "n1"))
        .await
        .expect_failure(404, "NotFound");
    let mut unnamed = binding("", "n1");
    unnamed["metadata"] = json!({});
    s.post("/api/v1/namespaces/default/bindings", unnamed)
        .await
        .expect_failure(400, "BadRequest");
    s.get("/api/v1/namespaces/default/bindings")
        .await
        .expect_failure(405, "MethodNotAllowed");
    let core = s.get_ok("/api/v1").await;
    let listed = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "bindings")
        .cloned()
        .unwrap();
    assert_eq!(listed["verbs"], json!(["create"]));
    assert_eq!(listed["kind"], "Binding");
    assert_eq!(listed["namespaced"], true);

    // The collection is its own resource to RBAC: leave to create
    // `pods/binding` does not cover it.
    s.post("/api/v1/namespaces/default/pods", pod("q", None))
        .await
        .expect_code(StatusCode::CREATED);
    s.created(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        json!({"metadata": {"name": "binder"},
               "rules": [{"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]}]}),
    )
    .await;
    s.created(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        json!({"metadata": {"name": "binder"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "binder"},
               "subjects": [{"kind": "User", "name": "binder"}]}),
    )
    .await;
    let binder = UserInfo {
        name: "binder".into(),
        groups: vec!["system:authenticated".into()],
        ..Default::default()
    };
    s.post_as(
        &binder,
        "/api/v1/namespaces/default/bindings",
        binding("q", "n1"),
    )
    .await
    .expect_failure(403, "Forbidden");
    let q = s.get_ok("/api/v1/namespaces/default/pods/q").await;
    assert!(q["spec"]["nodeName"].is_null(), "{q}");
    s.post_as(
        &binder,
        "/api/v1/namespaces/default/pods/q/binding",
        binding("q", "n1"),
    )
    .await
    .expect_code(StatusCode::CREATED);
}

#[tokio::test]
async fn binding_a_recreated_pod_binds_the_new_one() {
    let s = TestServer::new().await;
    let pod = pod("p", None);
    s.post("/api/v1/namespaces/default/pods", pod.clone()).await;
    s.created(
        "/api/v1/namespaces/default/pods/p/binding",
        binding("p", "n1"),
    )
    .await;
    let (code, _) = s
        .delete("/api/v1/namespaces/default/pods/p?gracePeriodSeconds=0")
        .await;
    assert!(code.is_success());
    s.post("/api/v1/namespaces/default/pods", pod).await;
    s.created(
        "/api/v1/namespaces/default/pods/p/binding",
        binding("p", "n2"),
    )
    .await;
    let (_, p) = s.get("/api/v1/namespaces/default/pods/p").await;
    assert_eq!(p["spec"]["nodeName"], "n2");
}

/// Creates pod `name` labelled `app=x`, Running and Ready.
async fn ready_pod(s: &TestServer, name: &str) {
    let pod = json!({"metadata": {"name": name, "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    s.post("/api/v1/namespaces/default/pods", pod).await;
    s.merge_patch(
        &format!("/api/v1/namespaces/default/pods/{name}/status"),
        json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}}),
    )
    .await;
}

const PDB: &str = "/apis/policy/v1/namespaces/default/poddisruptionbudgets/budget";

#[tokio::test]
async fn eviction_respects_disruption_budgets() {
    let s = TestServer::new().await;
    for name in ["p", "q", "r"] {
        ready_pod(&s, name).await;
    }
    let pdb = json!({"metadata": {"name": "budget"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "x"}}}});
    s.created(
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        pdb,
    )
    .await;
    let eviction = |name: &str| json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}});
    let evict = |name: &str| format!("/api/v1/namespaces/default/pods/{name}/eviction");
    // The disruption controller has not counted the budget yet.
    let refusal = s
        .post(&evict("p"), eviction("p"))
        .await
        .expect_failure(429, "TooManyRequests");
    assert_eq!(
        refusal["details"]["causes"][0]["message"],
        "The disruption budget budget is still being processed by the server."
    );
    // Counted: one of the three may go.
    let counted = json!({"status": {"observedGeneration": 1, "disruptionsAllowed": 1,
        "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}});
    s.merge_patch(&format!("{PDB}/status"), counted).await;
    // A dry run takes nothing.
    s.created(&format!("{}?dryRun=All", evict("p")), eviction("p"))
        .await;
    assert_eq!(s.get_ok(PDB).await["status"]["disruptionsAllowed"], 1);
    s.created(&evict("p"), eviction("p")).await;
    s.get_not_found("/api/v1/namespaces/default/pods/p").await;
    // The eviction took the one disruption and noted its pod, so the next
    // is refused though the controller has not counted again.
    let status = s.get_ok(PDB).await["status"].clone();
    assert_eq!(status["disruptionsAllowed"], 0, "{status}");
    assert!(status["disruptedPods"]["p"].is_string(), "{status}");
    let allowed = find_by(&status["conditions"], "type", "DisruptionAllowed");
    assert_eq!(allowed["status"], "False", "{status}");
    assert_eq!(allowed["reason"], "InsufficientPods", "{status}");
    let refusal = s
        .post(&evict("q"), eviction("q"))
        .await
        .expect_failure(429, "TooManyRequests");
    assert_eq!(
        refusal["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert_eq!(
        refusal["details"]["causes"][0],
        json!({"reason": "DisruptionBudget",
            "message": "The disruption budget budget needs 2 healthy pods and has 3 currently"})
    );
    s.get_ok("/api/v1/namespaces/default/pods/q").await;
    // A second budget over the same pods: upstream refuses to choose.
    let twin = json!({"metadata": {"name": "twin"}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "x"}}}});
    s.created(
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        twin,
    )
    .await;
    s.post(&evict("q"), eviction("q")).await.expect_mentions(
        500,
        "InternalError",
        &["more than one PodDisruptionBudget"],
    );
    s.get("/api/v1/namespaces/default/pods/q/eviction")
        .await
        .expect_code(StatusCode::METHOD_NOT_ALLOWED);
    // kubectl get pdb's columns.
    let table = s
        .get_table("/apis/policy/v1/namespaces/default/poddisruptionbudgets")
        .await;
    assert_eq!(
        columns(&table),
        [
            "Name",
            "Min Available",
            "Max Unavailable",
            "Allowed Disruptions",
            "Age"
        ]
    );
    assert_eq!(
        row(&table, "budget").as_array().unwrap()[..4],
        [json!("budget"), json!("2"), json!("N/A"), json!(0)]
    );
    assert_eq!(
        row(&table, "twin").as_array().unwrap()[..4],
        [json!("twin"), json!("N/A"), json!("1"), json!(0)]
    );
}

#[tokio::test]
async fn log_options_are_checked_before_the_node_is_asked() {
    let s = TestServer::new().await;
    let pod = pod("p", None);
    s.post("/api/v1/namespaces/default/pods", pod).await;
    let body = s
        .get("/api/v1/namespaces/default/pods/p/log?tailLines=-1&limitBytes=0")
        .await
        .expect_failure(422, "Invalid");
    assert_eq!(body["details"]["kind"], "PodLogOptions");
    assert_mentions(
        &body,
        &[
            "tailLines: Invalid value: -1: must be greater than or equal to 0",
            "limitBytes: Invalid value: 0",
        ],
    );
    s.get("/api/v1/namespaces/default/pods/p/log?tailLines=two")
        .await
        .expect_failure(400, "BadRequest");
    // Valid options reach the pod, which has no node yet.
    s.get("/api/v1/namespaces/default/pods/p/log?tailLines=2")
        .await
        .expect_mentions(400, "BadRequest", &["does not have a host assigned"]);
}

#[tokio::test]
async fn ephemeral_containers_are_only_added_through_their_subresource() {
    const SMP: &str = "application/strategic-merge-patch+json";
    let s = TestServer::new().await;
    let pods = "/api/v1/namespaces/default/pods";
    s.created(pods, pod("p", None)).await;
    let debugger = json!({"name": "debugger", "image": "busybox", "targetContainerName": "c",
                          "stdin": true, "tty": true});
    // What `kubectl debug` sends; nothing but the ephemeral containers changes.
    let patched = s
        .patch(
            &format!("{pods}/p/ephemeralcontainers"),
            SMP,
            json!({"metadata": {"labels": {"sneaky": "yes"}},
                   "spec": {"ephemeralContainers": [debugger],
                            "containers": [{"name": "c", "image": "other"}]}}),
        )
        .await
        .expect_code(StatusCode::OK);
    assert_eq!(
        patched["spec"]["ephemeralContainers"][0]["name"],
        "debugger"
    );
    assert_eq!(
        patched["spec"]["ephemeralContainers"][0]["terminationMessagePolicy"], "File",
        "defaulted like any container"
    );
    assert_eq!(patched["spec"]["containers"][0]["image"], "i");
    assert!(
        patched["metadata"]["labels"]["sneaky"].is_null(),
        "{patched}"
    );
    let read = s.get_ok(&format!("{pods}/p/ephemeralcontainers")).await;
    assert_eq!(read["kind"], "Pod");
    assert_eq!(read["spec"]["ephemeralContainers"][0]["image"], "busybox");

    // One added stays as it was.
    let mut changed = read.clone();
    changed["spec"]["ephemeralContainers"][0]["image"] = json!("alpine");
    let refused = s
        .put(&format!("{pods}/p/ephemeralcontainers"), changed)
        .await
        .expect_failure(422, "Invalid");
    assert_mentions(
        &refused,
        &[
            "spec.ephemeralContainers[0]: Forbidden: existing ephemeral containers \"debugger\" may not be changed",
        ],
    );
    let mut removed = read.clone();
    removed["spec"]["ephemeralContainers"] = json!([]);
    s.put(&format!("{pods}/p/ephemeralcontainers"), removed)
        .await
        .expect_mentions(422, "Invalid", &["may not be removed"]);

    // A new one may not do what only regular containers do.
    let refused = s
        .patch(
            &format!("{pods}/p/ephemeralcontainers"),
            SMP,
            json!({"spec": {"ephemeralContainers": [
                {"name": "probe", "image": "busybox", "ports": [{"containerPort": 80}],
                 "readinessProbe": {"exec": {"command": ["true"]}}},
                {"name": "c", "image": "busybox", "targetContainerName": "nosuch"}]}}),
        )
        .await
        .expect_failure(422, "Invalid");
    assert_mentions(
        &refused,
        &[
            "spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container",
            "spec.ephemeralContainers[1].readinessProbe: Forbidden",
            "spec.ephemeralContainers[2].name: Duplicate value: \"c\"",
            "spec.ephemeralContainers[2].targetContainerName: Not found: \"nosuch\"",
        ],
    );

    // Neither a create nor a main-resource update sets them.
    let mut with_debugger = pod("q", None);
    with_debugger["spec"]["ephemeralContainers"] = json!([{"name": "d", "image": "busybox"}]);
    s.post(pods, with_debugger).await.expect_mentions(
        422,
        "Invalid",
        &["spec.ephemeralContainers: Forbidden: cannot be set on create"],
    );
    let mut update = s.get_ok(&format!("{pods}/p")).await;
    update["spec"]["ephemeralContainers"] = json!([]);
    update["metadata"]["labels"] = json!({"kept": "yes"});
    let updated = s.put_ok(&format!("{pods}/p"), update).await;
    assert_eq!(updated["metadata"]["labels"]["kept"], "yes");
    assert_eq!(
        updated["spec"]["ephemeralContainers"][0]["name"],
        "debugger"
    );
}

#[tokio::test]
async fn pods_are_resized_in_place_through_their_subresource_only() {
    const SMP: &str = "application/strategic-merge-patch+json";
    let s = TestServer::new().await;
    let pods = "/api/v1/namespaces/default/pods";
    let mut burstable = pod("r", Some("n1"));
    burstable["spec"]["containers"][0]["resources"] = json!({
        "requests": {"cpu": "100m", "memory": "32Mi"},
        "limits": {"cpu": "200m", "memory": "64Mi"}});
    s.created(pods, burstable).await;
    let resize = format!("{pods}/r/resize");

    // What `kubectl patch --subresource resize` sends: the resources change,
    // nothing else the patch names does.
    let patched = s
        .patch(
            &resize,
            SMP,
            json!({"metadata": {"labels": {"sneaky": "yes"}},
                   "spec": {"containers": [{"name": "c", "image": "other",
                       "resources": {"requests": {"cpu": "300m"}, "limits": {"cpu": "1", "memory": "128Mi"}}}]}}),
        )
        .await
        .expect_code(StatusCode::OK);
    let resources = &patched["spec"]["containers"][0]["resources"];
    assert_eq!(
        *resources,
        json!({"requests": {"cpu": "300m", "memory": "32Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}})
    );
    assert_eq!(patched["spec"]["containers"][0]["image"], "i");
    assert!(
        patched["metadata"]["labels"]["sneaky"].is_null(),
        "{patched}"
    );
    let read = s.get_ok(&resize).await;
    assert_eq!(read["kind"], "Pod");
    assert_eq!(
        read["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "1"
    );

    // Upstream's rules, in its words; nothing written.
    let refusals = [
        (
            json!({"limits": {"memory": "64Mi"}}),
            "spec.containers[0].resources.limits[memory]: Forbidden: memory limits cannot be decreased unless resizePolicy is RestartContainer",
        ),
        (
            json!({"requests": {"cpu": "1", "memory": "128Mi"}}),
            "spec: Invalid value: \"Burstable\": Pod QOS Class may not change as a result of resizing",
        ),
        (
            json!({"requests": {"ephemeral-storage": "1Gi"}}),
            "spec: Forbidden: only cpu and memory resources are mutable",
        ),
    ];
    for (change, words) in refusals {
        let body = json!({"spec": {"containers": [{"name": "c", "resources": change}]}});
        s.patch(&resize, SMP, body)
            .await
            .expect_mentions(422, "Invalid", &[words]);
    }
    let stored = s.get_ok(&format!("{pods}/r")).await;
    assert_eq!(stored["spec"]["containers"][0]["resources"], *resources);

    // The main resource still refuses a change of resources.
    let mut update = stored.clone();
    update["spec"]["containers"][0]["resources"]["limits"]["cpu"] = json!("2");
    s.put(&format!("{pods}/r"), update).await.expect_mentions(
        422,
        "Invalid",
        &["Forbidden: pod updates may not change fields"],
    );

    // A user who may edit pods may not resize them (upstream keeps
    // `pods/resize` out of the edit role): a cluster admin grants it.
    s.grant("editor", "edit").await;
    let editor = s.as_user(UserInfo::new("editor", Vec::<String>::new()));
    let grown =
        json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2"}}}]}});
    editor.patch(&resize, SMP, grown).await.expect_mentions(
        403,
        "Forbidden",
        &["User \"editor\" cannot patch resource \"pods/resize\" in API group \"\" in the namespace \"default\""],
    );

    // A namespace's LimitRange and ResourceQuota hold for a resize as for
    // a create: no way around them by growing a running pod.
    s.created(
        "/api/v1/namespaces/default/limitranges",
        json!({"metadata": {"name": "lr"}, "spec": {"limits": [
            {"type": "Container", "max": {"cpu": "2"}}]}}),
    )
    .await;
    s.created(
        "/api/v1/namespaces/default/resourcequotas",
        json!({"metadata": {"name": "qq"}, "spec": {"hard": {"requests.cpu": "500m"}}}),
    )
    .await;
    let grow = |requests: &str, limits: &str| {
        json!({"spec": {"containers": [{"name": "c", "resources":
            {"requests": {"cpu": requests}, "limits": {"cpu": limits}}}]}})
    };
    s.patch(&resize, SMP, grow("300m", "3"))
        .await
        .expect_mentions(
            403,
            "Forbidden",
            &["pods \"r\" is forbidden: maximum cpu usage per Container is 2, but limit is 3"],
        );
    s.patch(&resize, SMP, grow("600m", "1"))
        .await
        .expect_mentions(
            403,
            "Forbidden",
            &["exceeded quota: qq, requested: requests.cpu="],
        );
    s.patch(&resize, SMP, grow("400m", "2"))
        .await
        .expect_code(StatusCode::OK);

    // A container's resize policy is checked as upstream checks it.
    let mut odd = pod("odd", None);
    odd["spec"]["restartPolicy"] = json!("Never");
    odd["spec"]["containers"][0]["resizePolicy"] = json!([
        {"resourceName": "cpu", "restartPolicy": "RestartContainer"},
        {"resourceName": "cpu", "restartPolicy": "NotRequired"},
        {"resourceName": "gpu", "restartPolicy": "Sometimes"}]);
    s.post(pods, odd).await.expect_mentions(
        422,
        "Invalid",
        &[
            "spec.containers[0].resizePolicy: Invalid value: \"RestartContainer\": must be 'NotRequired' when `restartPolicy` is 'Never'",
            "spec.containers[0].resizePolicy[1]: Duplicate value: \"cpu\"",
            "spec.containers[0].resizePolicy: Unsupported value: \"gpu\": supported values: \"cpu\", \"memory\"",
            "spec.containers[0].resizePolicy: Unsupported value: \"Sometimes\": supported values: \"NotRequired\", \"RestartContainer\"",
        ],
    );

    // Discovery lists it as upstream does.
    let core = s.get_ok("/api/v1").await;
    let listed = core["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "pods/resize"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(listed["kind"], "Pod");
    assert_eq!(listed["verbs"], json!(["get", "patch", "update"]));
}
