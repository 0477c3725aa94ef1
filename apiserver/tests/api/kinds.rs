//! Per-kind rules that only some kinds follow, checked through the API: each
//! reaches its kind (and only its kind) through the registry's strategy.

use http::StatusCode;
use serde_json::{Value, json};

use crate::harness::{Client, Expect, TestServer, forbidden, refused};

/// Checks that `answer` is upstream's 422 `Invalid` with `message`.
fn invalid(answer: (StatusCode, Value), message: &str) {
    refused(answer, 422, "Invalid", message);
}

#[tokio::test]
async fn rbac_and_event_names_are_path_segments_others_subdomains() {
    let s = TestServer::new().await;
    let role = json!({"metadata": {"name": "system:controller:x"}, "rules": []});
    s.created("/apis/rbac.authorization.k8s.io/v1/clusterroles", role)
        .await;

    let role = json!({"metadata": {"name": "50%"}, "rules": []});
    s.post("/apis/rbac.authorization.k8s.io/v1/clusterroles", role)
        .await
        .expect_mentions(422, "Invalid", &["may not contain '%'"]);

    let event = json!({"metadata": {"name": "Pod.p:1"}, "involvedObject": {"kind": "Pod"}});
    s.created("/api/v1/namespaces/default/events", event).await;

    let cm = json!({"metadata": {"name": "system:x"}});
    s.post("/api/v1/namespaces/default/configmaps", cm)
        .await
        .expect_mentions(422, "Invalid", &["RFC 1123 subdomain"]);
}

/// Names and label values get upstream's errors: a too-long name is only
/// too long, a subdomain name's parts are not bounded one by one, and a bad
/// label value is reported at the labels map.
#[tokio::test]
async fn names_and_label_values_are_refused_in_upstreams_words() {
    let s = TestServer::new().await;
    let long_part = "a".repeat(100);
    s.created(
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": long_part}}),
    )
    .await;

    let name = "a".repeat(254);
    let pod = json!({"metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    invalid(
        s.post("/api/v1/namespaces/default/pods", pod).await,
        &format!(
            "Pod \"{name}\" is invalid: metadata.name: Invalid value: \"{name}\": must be no more than 253 characters"
        ),
    );
    let name = "a".repeat(64);
    let svc = json!({"metadata": {"name": name}, "spec": {"ports": [{"port": 80}]}});
    invalid(
        s.post("/api/v1/namespaces/default/services", svc).await,
        &format!(
            "Service \"{name}\" is invalid: metadata.name: Invalid value: \"{name}\": must be no more than 63 characters"
        ),
    );

    let value = "b".repeat(64);
    let cm = json!({"metadata": {"name": "c", "labels": {"a": value}}});
    invalid(
        s.post("/api/v1/namespaces/default/configmaps", cm).await,
        &format!(
            "ConfigMap \"c\" is invalid: metadata.labels: Invalid value: \"{value}\": must be no more than 63 characters"
        ),
    );
    let cm = json!({"metadata": {"name": "c", "labels": {"a": "x y"}}});
    let body = s
        .post("/api/v1/namespaces/default/configmaps", cm)
        .await
        .expect_mentions(
            422,
            "Invalid",
            &["ConfigMap \"c\" is invalid: metadata.labels: Invalid value: \"x y\": a valid label must be"],
        );
    assert_eq!(body["details"]["causes"][0]["field"], "metadata.labels");
}

#[tokio::test]
async fn system_namespaces_cannot_be_deleted_others_terminate() {
    let s = TestServer::new().await;
    for name in ["default", "kube-system", "kube-public"] {
        forbidden(
            s.delete(&format!("/api/v1/namespaces/{name}")).await,
            &format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
        );
        let ns = s.get_ok(&format!("/api/v1/namespaces/{name}")).await;
        assert_eq!(ns["status"]["phase"], "Active");
    }
    s.namespace("team").await;
    let ns = s.delete_ok("/api/v1/namespaces/team").await;
    assert_eq!(ns["status"]["phase"], "Terminating");
}

#[tokio::test]
async fn new_nodes_keep_their_status_other_kinds_start_over() {
    let s = TestServer::new().await;
    let node = json!({"metadata": {"name": "n1"},
        "status": {"capacity": {"cpu": "4"}, "phase": "Running"}});
    let body = s.created("/api/v1/nodes", node).await;
    assert_eq!(body["status"]["capacity"]["cpu"], "4");

    let pv = json!({"metadata": {"name": "pv1"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/tmp/pv1"}},
        "status": {"phase": "Bound"}});
    let body = s.created("/api/v1/persistentvolumes", pv).await;
    assert_eq!(body["status"], json!({"phase": "Pending"}));

    let svc = json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}});
    let body = s.created("/api/v1/namespaces/default/services", svc).await;
    assert_eq!(body["status"], json!({"loadBalancer": {}}), "{body}");
}

#[tokio::test]
async fn a_replication_controllers_scale_selector_is_its_map() {
    let s = TestServer::new().await;
    let rc = json!({"metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"app": "web", "tier": "front"},
            "template": {"metadata": {"labels": {"app": "web", "tier": "front"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    s.created("/api/v1/namespaces/default/replicationcontrollers", rc)
        .await;
    let scale = s
        .get_ok("/api/v1/namespaces/default/replicationcontrollers/web/scale")
        .await;
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(scale["status"]["selector"], "app=web,tier=front");
}

/// A claim's spec is fixed once made, as upstream's: only a bound claim's
/// storage request (never below what it has) and its volume attributes
/// class change; a volume name may be set once and a class given to a
/// claim that had none (retroactive default class assignment).
#[tokio::test]
async fn a_claims_spec_is_immutable_but_for_what_upstream_allows() {
    let s = TestServer::new().await;
    let claim = json!({"metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}});
    let created = s
        .created("/api/v1/namespaces/default/persistentvolumeclaims", claim)
        .await;
    let path = "/api/v1/namespaces/default/persistentvolumeclaims/data";
    let immutable = "PersistentVolumeClaim \"data\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims";

    let mut modes = created.clone();
    modes["spec"]["accessModes"] = json!(["ReadOnlyMany"]);
    let body = s.put(path, modes).await.expect_failure(422, "Invalid");
    assert!(
        crate::harness::message_of(&body).starts_with(immutable),
        "{body}"
    );
    assert_eq!(body["details"]["causes"][0]["field"], "spec", "{body}");

    // Not bound yet: its size is fixed too.
    let mut bigger = created.clone();
    bigger["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
    s.put(path, bigger)
        .await
        .expect_mentions(422, "Invalid", &[immutable]);

    // What the binder and default-class assignment write.
    let mut bound = created.clone();
    bound["spec"]["volumeName"] = json!("pv-1");
    bound["spec"]["storageClassName"] = json!("local-path");
    let bound = s.put_ok(path, bound).await;
    let mut renamed = bound.clone();
    renamed["spec"]["volumeName"] = json!("pv-2");
    s.put(path, renamed)
        .await
        .expect_mentions(422, "Invalid", &[immutable]);
    let mut reclassed = bound.clone();
    reclassed["spec"]["storageClassName"] = json!("other");
    s.put(path, reclassed)
        .await
        .expect_mentions(422, "Invalid", &[immutable]);

    let mut status = bound.clone();
    status["status"] = json!({"phase": "Bound", "capacity": {"storage": "1Gi"}});
    let bound = s.put_ok(&format!("{path}/status"), status).await;
    let mut grown = bound.clone();
    grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
    let grown = s.put_ok(path, grown).await;
    let mut shrunk = grown.clone();
    shrunk["spec"]["resources"]["requests"]["storage"] = json!("1Gi");
    invalid(
        s.put(path, shrunk).await,
        "PersistentVolumeClaim \"data\" is invalid: spec.resources.requests.storage: Forbidden: field can not be less than status.capacity",
    );
    let mut relabelled = grown.clone();
    relabelled["metadata"]["labels"] = json!({"a": "b"});
    s.put_ok(path, relabelled).await;
}

/// ConfigMaps and Secrets marked immutable keep their data and the mark;
/// a Secret's type never changes.
#[tokio::test]
async fn immutable_configmaps_and_secrets_keep_their_data() {
    let s = TestServer::new().await;
    let cm = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"a": "1"}});
    let cm = s.created("/api/v1/namespaces/default/configmaps", cm).await;
    let path = "/api/v1/namespaces/default/configmaps/c";
    let mut changed = cm.clone();
    changed["data"]["a"] = json!("2");
    invalid(
        s.put(path, changed).await,
        "ConfigMap \"c\" is invalid: data: Forbidden: field is immutable when `immutable` is set",
    );
    let mut unmarked = cm.clone();
    unmarked["immutable"] = json!(false);
    invalid(
        s.put(path, unmarked).await,
        "ConfigMap \"c\" is invalid: immutable: Forbidden: field is immutable when `immutable` is set",
    );
    let mut binary = cm.clone();
    binary["binaryData"] = json!({"b": "AA=="});
    invalid(
        s.put(path, binary).await,
        "ConfigMap \"c\" is invalid: binaryData: Forbidden: field is immutable when `immutable` is set",
    );
    s.merge_patch_ok(path, json!({"metadata": {"labels": {"ok": "yes"}}}))
        .await;

    let secret = json!({"metadata": {"name": "s"}, "immutable": true, "data": {"a": "MQ=="}});
    let secret = s
        .created("/api/v1/namespaces/default/secrets", secret)
        .await;
    let path = "/api/v1/namespaces/default/secrets/s";
    let mut changed = secret.clone();
    changed["data"]["a"] = json!("Mg==");
    invalid(
        s.put(path, changed).await,
        "Secret \"s\" is invalid: data: Forbidden: field is immutable when `immutable` is set",
    );
    let mut retyped = secret.clone();
    retyped["type"] = json!("example.com/other");
    invalid(
        s.put(path, retyped).await,
        "Secret \"s\" is invalid: type: Invalid value: \"example.com/other\": field is immutable",
    );
}

/// A StatefulSet's spec changes only in what upstream lets change. Its
/// containers mount the claim templates' volumes, which the template does
/// not declare; a mount of any other undeclared volume is still refused.
#[tokio::test]
async fn a_statefulsets_spec_changes_only_where_upstream_allows() {
    let s = TestServer::new().await;
    let set = json!({"metadata": {"name": "db"},
        "spec": {"serviceName": "db", "replicas": 1,
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "c", "image": "i",
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}}}]}});
    let mut undeclared = set.clone();
    undeclared["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["name"] =
        json!("logs");
    refused(
        s.post("/apis/apps/v1/namespaces/default/statefulsets", undeclared)
            .await,
        422,
        "Invalid",
        "StatefulSet.apps \"db\" is invalid: spec.template.spec.containers[0].volumeMounts[0].name: Not found: \"logs\"",
    );
    let created = s
        .created("/apis/apps/v1/namespaces/default/statefulsets", set)
        .await;
    let path = "/apis/apps/v1/namespaces/default/statefulsets/db";
    let forbidden = "StatefulSet.apps \"db\" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";
    for (field, value) in [
        ("serviceName", json!("other")),
        ("podManagementPolicy", json!("Parallel")),
        ("revisionHistoryLimit", json!(3)),
    ] {
        let mut changed = created.clone();
        changed["spec"][field] = value;
        refused(s.put(path, changed).await, 422, "Invalid", forbidden);
    }
    let mut bigger = created.clone();
    bigger["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] =
        json!("2Gi");
    refused(s.put(path, bigger).await, 422, "Invalid", forbidden);
    let mut selector = created.clone();
    selector["spec"]["selector"]["matchLabels"]["tier"] = json!("x");
    selector["spec"]["template"]["metadata"]["labels"]["tier"] = json!("x");
    refused(s.put(path, selector).await, 422, "Invalid", forbidden);

    // What `kubectl diff` and `apply` send when the claim templates are
    // restated as written: they lack the `apiVersion` and `kind` the stored
    // ones read back with, and the defaults.
    assert_eq!(
        created["spec"]["volumeClaimTemplates"][0]["kind"],
        "PersistentVolumeClaim"
    );
    let restated = json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}]}});
    let (status, body) = s
        .patch(
            &format!("{path}?dryRun=All"),
            "application/strategic-merge-patch+json",
            restated,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["metadata"]["generation"], 1, "no spec change: {body}");

    let mut allowed = created.clone();
    allowed["spec"]["replicas"] = json!(3);
    allowed["spec"]["minReadySeconds"] = json!(5);
    allowed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("j");
    allowed["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    allowed["spec"]["persistentVolumeClaimRetentionPolicy"] =
        json!({"whenDeleted": "Delete", "whenScaled": "Retain"});
    allowed["spec"]["ordinals"] = json!({"start": 2});
    s.put_ok(path, allowed).await;
}

/// A Job's selector and pod template are fixed once made (but for the
/// scheduling directives of a suspended job that never started), and so
/// is a non-indexed job's completion count.
#[tokio::test]
async fn a_jobs_template_selector_and_completions_are_immutable() {
    let s = TestServer::new().await;
    let job = json!({"metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "i"}]}}}});
    let created = s
        .created("/apis/batch/v1/namespaces/default/jobs", job)
        .await;
    let path = "/apis/batch/v1/namespaces/default/jobs/j";
    let mut image = created.clone();
    image["spec"]["template"]["spec"]["containers"][0]["image"] = json!("other");
    let body = s.put(path, image).await.expect_failure(422, "Invalid");
    let message = crate::harness::message_of(&body);
    assert!(
        message.starts_with("Job.batch \"j\" is invalid: spec.template: Invalid value: ")
            && message.ends_with(": field is immutable"),
        "{body}"
    );
    let mut selector = created.clone();
    selector["spec"]["selector"]["matchLabels"]["x"] = json!("y");
    selector["spec"]["template"]["metadata"]["labels"]["x"] = json!("y");
    s.put(path, selector).await.expect_mentions(
        422,
        "Invalid",
        &[
            "spec.selector: Invalid value: ",
            "spec.template: Invalid value: ",
        ],
    );
    let mut completions = created.clone();
    completions["spec"]["completions"] = json!(3);
    invalid(
        s.put(path, completions).await,
        "Job.batch \"j\" is invalid: spec.completions: Invalid value: 3: field is immutable",
    );
    let mut parallel = created.clone();
    parallel["spec"]["parallelism"] = json!(4);
    parallel["spec"]["activeDeadlineSeconds"] = json!(60);
    s.put_ok(path, parallel).await;

    let suspended = json!({"metadata": {"name": "later"},
        "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "i"}]}}}});
    let created = s
        .created("/apis/batch/v1/namespaces/default/jobs", suspended)
        .await;
    let path = "/apis/batch/v1/namespaces/default/jobs/later";
    let mut placed = created.clone();
    placed["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"});
    placed["spec"]["template"]["metadata"]["labels"]["zone"] = json!("a");
    let placed = s.put_ok(path, placed).await;
    let mut image = placed.clone();
    image["spec"]["template"]["spec"]["containers"][0]["image"] = json!("other");
    s.put(path, image)
        .await
        .expect_mentions(422, "Invalid", &["spec.template: Invalid value: "]);
}

/// A workload's selector is checked part by part, as upstream's
/// ValidateLabelSelector, and each apps kind words the whole as its own.
#[tokio::test]
async fn workload_selectors_are_checked_in_upstreams_words() {
    let s = TestServer::new().await;
    let workload = |name: &str, selector: serde_json::Value| {
        json!({"metadata": {"name": name},
            "spec": {"selector": selector,
                "template": {"metadata": {"labels": {"a": "x"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    };
    let bad_operator =
        json!({"matchExpressions": [{"key": "a", "operator": "Foo", "values": ["x"]}]});
    // Upstream shows the selector as Go prints a metav1.LabelSelector.
    let shown = "v1.LabelSelector{MatchLabels:map[string]string(nil), \
                 MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{\
                 Key:\"a\", Operator:\"Foo\", Values:[]string{\"x\"}}}}";
    invalid(
        s.post(
            "/apis/apps/v1/namespaces/default/deployments",
            workload("d", bad_operator.clone()),
        )
        .await,
        &format!(
            "Deployment.apps \"d\" is invalid: [spec.selector.matchExpressions[0].operator: Invalid value: \"Foo\": not a valid selector operator, spec.selector: Invalid value: {shown}: invalid label selector]"
        ),
    );
    invalid(
        s.post(
            "/apis/apps/v1/namespaces/default/statefulsets",
            workload("s", bad_operator.clone()),
        )
        .await,
        &format!(
            "StatefulSet.apps \"s\" is invalid: [spec.selector.matchExpressions[0].operator: Invalid value: \"Foo\": not a valid selector operator, spec.selector: Invalid value: {shown}]"
        ),
    );
    invalid(
        s.post(
            "/apis/apps/v1/namespaces/default/daemonsets",
            workload("ds", bad_operator),
        )
        .await,
        "DaemonSet.apps \"ds\" is invalid: spec.selector.matchExpressions[0].operator: Invalid value: \"Foo\": not a valid selector operator",
    );

    let no_values = json!({"matchExpressions": [{"key": "a", "operator": "In"}]});
    s.post(
        "/apis/apps/v1/namespaces/default/replicasets",
        workload("rs", no_values),
    )
    .await
    .expect_mentions(
        422,
        "Invalid",
        &["spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"],
    );
    let bad_value = json!({"matchLabels": {"a": "x y"}});
    s.post(
        "/apis/apps/v1/namespaces/default/deployments",
        workload("v", bad_value),
    )
    .await
    .expect_mentions(
        422,
        "Invalid",
        &["spec.selector.matchLabels: Invalid value: \"x y\": a valid label must be"],
    );
    for (resource, kind, noun) in [
        ("statefulsets", "StatefulSet", "statefulset"),
        ("daemonsets", "DaemonSet", "daemonset"),
        ("replicasets", "ReplicaSet", "deployment"),
    ] {
        invalid(
            s.post(
                &format!("/apis/apps/v1/namespaces/default/{resource}"),
                workload("empty", json!({})),
            )
            .await,
            &format!(
                "{kind}.apps \"empty\" is invalid: spec.selector: Invalid value: \
                 v1.LabelSelector{{MatchLabels:map[string]string(nil), \
                 MatchExpressions:[]v1.LabelSelectorRequirement(nil)}}: empty selector is invalid for {noun}"
            ),
        );
    }
}

/// A container's resources are checked as upstream's: known names, no
/// negative quantities, requests within limits.
#[tokio::test]
async fn container_resources_are_refused_in_upstreams_words() {
    let s = TestServer::new().await;
    let pod = |name: &str, resources: serde_json::Value| {
        json!({"metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": resources}]}})
    };
    let cases = [
        (
            json!({"requests": {"cpu": "-1"}}),
            "spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
        ),
        (
            json!({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
            "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
        ),
        // Numbers, as kubectl sends YAML's `cpu: 2`, are quantities too.
        (
            json!({"requests": {"cpu": 2}, "limits": {"cpu": 0.5}}),
            "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 500m",
        ),
        (
            json!({"requests": {"memory": -1}}),
            "spec.containers[0].resources.requests[memory]: Invalid value: \"-1\": must be greater than or equal to 0",
        ),
        (
            json!({"limits": {"foo": "1"}}),
            // The request defaults to the limit, so is refused too.
            "[spec.containers[0].resources.limits[foo]: Invalid value: \"foo\": must be a standard resource type or fully qualified, spec.containers[0].resources.limits[foo]: Invalid value: \"foo\": must be a standard resource for containers, spec.containers[0].resources.requests[foo]: Invalid value: \"foo\": must be a standard resource type or fully qualified, spec.containers[0].resources.requests[foo]: Invalid value: \"foo\": must be a standard resource for containers]",
        ),
        (
            json!({"limits": {"pods": "1"}}),
            "[spec.containers[0].resources.limits[pods]: Invalid value: \"pods\": must be a standard resource for containers, spec.containers[0].resources.requests[pods]: Invalid value: \"pods\": must be a standard resource for containers]",
        ),
        (
            json!({"requests": {"example.com/gpu": "1"}}),
            "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources",
        ),
        (
            json!({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}}),
            "spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to example.com/gpu limit of 2",
        ),
    ];
    for (i, (resources, message)) in cases.into_iter().enumerate() {
        let name = format!("p{i}");
        invalid(
            s.post("/api/v1/namespaces/default/pods", pod(&name, resources))
                .await,
            &format!("Pod \"{name}\" is invalid: {message}"),
        );
    }
    s.created(
        "/api/v1/namespaces/default/pods",
        pod(
            "fine",
            json!({"requests": {"cpu": "500m", "memory": "1Gi", "example.com/gpu": "1"},
                "limits": {"cpu": "1", "memory": "1Gi", "example.com/gpu": "1"}}),
        ),
    )
    .await;
}

/// A Job's pods run to completion: its template may not keep the pod
/// default `Always` restart policy, nor may a CronJob's.
#[tokio::test]
async fn job_templates_must_not_restart_always() {
    let s = TestServer::new().await;
    let template = json!({"spec": {"containers": [{"name": "c", "image": "i"}]}});
    invalid(
        s.post(
            "/apis/batch/v1/namespaces/default/jobs",
            json!({"metadata": {"name": "j"}, "spec": {"template": template}}),
        )
        .await,
        "Job.batch \"j\" is invalid: spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\"",
    );
    invalid(
        s.post(
            "/apis/batch/v1/namespaces/default/cronjobs",
            json!({"metadata": {"name": "cj"}, "spec": {"schedule": "* * * * *",
                "jobTemplate": {"spec": {"template": template}}}}),
        )
        .await,
        "CronJob.batch \"cj\" is invalid: spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\"",
    );
}

/// The policies a Job runs by are checked when it is written: a failure
/// policy needs pods that are never restarted in place, FailIndex needs a
/// per-index limit, and the index rules need an Indexed Job.
#[tokio::test]
async fn job_policies_are_refused_in_upstreams_words() {
    let s = TestServer::new().await;
    let template = json!({"spec": {"restartPolicy": "OnFailure",
        "containers": [{"name": "c", "image": "i"}]}});
    invalid(
        s.post(
            "/apis/batch/v1/namespaces/default/jobs",
            json!({"metadata": {"name": "j"}, "spec": {"template": template,
                "successPolicy": {"rules": [{"succeededCount": 1}]},
                "podFailurePolicy": {"rules": [
                    {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [0]}}]}}}),
        )
        .await,
        "Job.batch \"j\" is invalid: [spec.successPolicy: Invalid value: {\"rules\":[{\"succeededCount\":1}]}: requires indexed completion mode, spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified, spec.podFailurePolicy.rules[0].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set, spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator]",
    );
    // A CronJob's jobs are held to the same rules, at their place in it.
    invalid(
        s.post(
            "/apis/batch/v1/namespaces/default/cronjobs",
            json!({"metadata": {"name": "cj"}, "spec": {"schedule": "* * * * *",
                "jobTemplate": {"spec": {"template": template, "backoffLimitPerIndex": 1}}}}),
        )
        .await,
        "CronJob.batch \"cj\" is invalid: spec.jobTemplate.spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode",
    );
}

/// A claim must ask for access and for some storage, as upstream says.
#[tokio::test]
async fn a_claim_needs_access_modes_and_a_storage_request() {
    let s = TestServer::new().await;
    let claims = "/api/v1/namespaces/default/persistentvolumeclaims";
    invalid(
        s.post(claims, json!({"metadata": {"name": "a"}, "spec": {}}))
            .await,
        "PersistentVolumeClaim \"a\" is invalid: [spec.accessModes: Required value: at least 1 access mode is required, spec.resources[storage]: Required value]",
    );
    invalid(
        s.post(
            claims,
            json!({"metadata": {"name": "b"}, "spec": {"accessModes": ["ReadWriteSometimes"],
                "resources": {"requests": {"storage": "0"}}}}),
        )
        .await,
        "PersistentVolumeClaim \"b\" is invalid: [spec.accessModes: Unsupported value: \"ReadWriteSometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\", spec.resources[storage]: Invalid value: \"0\": must be greater than zero]",
    );
    invalid(
        s.post(
            claims,
            json!({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOncePod", "ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}),
        )
        .await,
        "PersistentVolumeClaim \"c\" is invalid: spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
    );
}

/// The well-known Secret types require their keys, as upstream's.
#[tokio::test]
async fn typed_secrets_need_their_keys() {
    let s = TestServer::new().await;
    let secrets = "/api/v1/namespaces/default/secrets";
    let secret = |name: &str, kind: &str| json!({"metadata": {"name": name}, "type": kind, "data": {"other": "eA=="}});
    for (kind, message) in [
        (
            "kubernetes.io/tls",
            "[data[tls.crt]: Required value, data[tls.key]: Required value]",
        ),
        (
            "kubernetes.io/dockerconfigjson",
            "data[.dockerconfigjson]: Required value",
        ),
        (
            "kubernetes.io/basic-auth",
            "[data[username]: Required value, data[password]: Required value]",
        ),
        (
            "kubernetes.io/ssh-auth",
            "data[ssh-privatekey]: Required value",
        ),
        (
            "kubernetes.io/service-account-token",
            "metadata.annotations[kubernetes.io/service-account.name]: Required value",
        ),
    ] {
        invalid(
            s.post(secrets, secret("s", kind)).await,
            &format!("Secret \"s\" is invalid: {message}"),
        );
    }
    let tls = json!({"metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": "c", "tls.key": "k"}});
    s.created(secrets, tls).await;
    let auth = json!({"metadata": {"name": "auth"}, "type": "kubernetes.io/basic-auth",
        "data": {"username": ""}});
    s.created(secrets, auth).await;

    // Registry credentials are a JSON object, and the refusal keeps them
    // secret.
    let docker = |config: &str| {
        json!({"metadata": {"name": "pull"}, "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": config}})
    };
    for (config, why) in [
        (
            "{\"auths\": {\"r.example\": {\"auth\": \"x\"}}",
            "unexpected end of JSON input",
        ),
        (
            "{auths: {}}",
            "invalid character 'a' looking for beginning of object key string",
        ),
        (
            "[\"r.example\"]",
            "json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
    ] {
        invalid(
            s.post(secrets, docker(config)).await,
            &format!(
                "Secret \"pull\" is invalid: data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": {why}"
            ),
        );
    }
    s.created(secrets, docker("{\"auths\": {}}")).await;
}

/// An ExternalName Service names a host, as upstream requires.
#[tokio::test]
async fn an_external_name_service_names_a_host() {
    let s = TestServer::new().await;
    let services = "/api/v1/namespaces/default/services";
    let service = |name: &str, external: Option<&str>| {
        let mut svc = json!({"metadata": {"name": name}, "spec": {"type": "ExternalName"}});
        if let Some(external) = external {
            svc["spec"]["externalName"] = json!(external);
        }
        svc
    };
    invalid(
        s.post(services, service("a", None)).await,
        "Service \"a\" is invalid: spec.externalName: Required value",
    );
    s.post(services, service("b", Some("Not_A_Host")))
        .await
        .expect_mentions(
            422,
            "Invalid",
            &["Service \"b\" is invalid: spec.externalName: Invalid value: \"Not_A_Host\": a lowercase RFC 1123 subdomain"],
        );
    s.created(services, service("c", Some("db.example.com.")))
        .await;
    // An alias has no cluster address, and so no families to give one in.
    let mut addressed = service("d", Some("db.example.com"));
    addressed["spec"]["clusterIP"] = json!("10.43.0.99");
    addressed["spec"]["ipFamilies"] = json!(["IPv4"]);
    addressed["spec"]["ipFamilyPolicy"] = json!("SingleStack");
    invalid(
        s.post(services, addressed).await,
        "Service \"d\" is invalid: [spec.clusterIPs: Forbidden: may not be set for ExternalName services, \
         spec.ipFamilies: Forbidden: may not be set for ExternalName services, \
         spec.ipFamilyPolicy: Forbidden: may not be set for ExternalName services]",
    );
}

/// A change of a Service's type drops what only the old type had (its node
/// ports, its cluster address when it becomes ExternalName), as upstream's
/// update strategy; a ClusterIP Service may not ask for a node port.
#[tokio::test]
async fn a_services_type_change_drops_what_the_old_type_had() {
    let s = TestServer::new().await;
    let services = "/api/v1/namespaces/default/services";
    let path = "/api/v1/namespaces/default/services/web";
    let created = s
        .created(
            services,
            json!({"metadata": {"name": "web"},
                "spec": {"type": "NodePort", "ports": [{"port": 80}]}}),
        )
        .await;
    let node_port = created["spec"]["ports"][0]["nodePort"].clone();
    assert!(node_port.is_i64(), "{created}");

    let mut cluster_ip = created.clone();
    cluster_ip["spec"]["type"] = json!("ClusterIP");
    let now = s.put_ok(path, cluster_ip).await;
    assert!(now["spec"]["ports"][0].get("nodePort").is_none(), "{now}");
    assert!(now["spec"].get("externalTrafficPolicy").is_none(), "{now}");
    assert_eq!(now["spec"]["clusterIP"], created["spec"]["clusterIP"]);

    let mut asked = now.clone();
    asked["spec"]["ports"][0]["nodePort"] = node_port;
    invalid(
        s.put(path, asked).await,
        "Service \"web\" is invalid: spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'",
    );

    let mut external = now.clone();
    external["spec"]["type"] = json!("ExternalName");
    external["spec"]["externalName"] = json!("db.example.com");
    let now = s.put_ok(path, external).await;
    for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        assert!(now["spec"].get(field).is_none(), "{field}: {now}");
    }

    let mut back = now.clone();
    back["spec"]["type"] = json!("ClusterIP");
    back["spec"]["ports"] = json!([{"port": 80}]);
    let now = s.put_ok(path, back).await;
    assert!(now["spec"]["clusterIP"].is_string(), "{now}");
}

/// What is too long is refused without being shown, as upstream: too many
/// annotation bytes, a ConfigMap or Secret holding over 1 MiB; and a
/// ConfigMap key may not be in both its maps.
#[tokio::test]
async fn too_long_and_duplicated_data_are_refused_in_upstreams_words() {
    let s = TestServer::new().await;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let big = "x".repeat(300 * 1024);
    invalid(
        s.post(
            configmaps,
            json!({"metadata": {"name": "a", "annotations": {"note": big}}}),
        )
        .await,
        "ConfigMap \"a\" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes",
    );
    let data = "x".repeat(1024 * 1024 + 1);
    invalid(
        s.post(
            configmaps,
            json!({"metadata": {"name": "b"}, "data": {"k": data}}),
        )
        .await,
        "ConfigMap \"b\" is invalid: : Too long: may not be more than 1048576 bytes",
    );
    invalid(
        s.post(
            "/api/v1/namespaces/default/secrets",
            json!({"metadata": {"name": "c"}, "stringData": {"k": data}}),
        )
        .await,
        "Secret \"c\" is invalid: data: Too long: may not be more than 1048576 bytes",
    );
    invalid(
        s.post(
            configmaps,
            json!({"metadata": {"name": "d"}, "data": {"k": "v"}, "binaryData": {"k": "dg=="}}),
        )
        .await,
        "ConfigMap \"d\" is invalid: [data[k]: Invalid value: \"k\": duplicate of key present in binaryData, binaryData[k]: Invalid value: \"k\": duplicate of key present in data]",
    );
}

/// A CronJob's schedule and time zone are refused as upstream refuses them:
/// the cron library's own words, a zone only in `timeZone`, and the spec's
/// policy and limits.
#[tokio::test]
async fn cron_job_schedules_and_zones_are_refused_in_upstreams_words() {
    let s = TestServer::new().await;
    let path = "/apis/batch/v1/namespaces/default/cronjobs";
    let cron_job = |schedule: &str, extra: Value| {
        let mut spec = json!({"schedule": schedule, "jobTemplate": {"spec": {"template":
            {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}});
        for (k, v) in extra.as_object().into_iter().flatten() {
            spec[k] = v.clone();
        }
        json!({"metadata": {"name": "cj"}, "spec": spec})
    };
    let cases = [
        (
            "0 0 * * * *",
            json!({}),
            "spec.schedule: Invalid value: \"0 0 * * * *\": expected exactly 5 fields, found 6: [0 0 * * * *]",
        ),
        (
            "0 0 * * 7",
            json!({}),
            "spec.schedule: Invalid value: \"0 0 * * 7\": end of range (7) above maximum (6): 7",
        ),
        (
            "*/x * * * *",
            json!({}),
            "spec.schedule: Invalid value: \"*/x * * * *\": failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
        ),
        ("", json!({}), "spec.schedule: Required value"),
        (
            "@every 5x",
            json!({}),
            "spec.schedule: Invalid value: \"@every 5x\": failed to parse duration @every 5x: time: unknown unit \"x\" in duration \"5x\"",
        ),
        (
            "TZ=UTC 0 0 * * *",
            json!({}),
            "spec.schedule: Invalid value: \"TZ=UTC 0 0 * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        ),
        (
            "0 0 * * *",
            json!({"timeZone": "Mars/Base"}),
            "spec.timeZone: Invalid value: \"Mars/Base\": unknown time zone Mars/Base",
        ),
        (
            "0 0 * * *",
            json!({"timeZone": "local"}),
            "spec.timeZone: Invalid value: \"local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ),
        (
            "0 0 * * *",
            json!({"concurrencyPolicy": "Sometimes"}),
            "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"",
        ),
        (
            "0 0 * * *",
            json!({"startingDeadlineSeconds": -1}),
            "spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
        ),
    ];
    for (schedule, extra, cause) in cases {
        invalid(
            s.post(path, cron_job(schedule, extra)).await,
            &format!("CronJob.batch \"cj\" is invalid: {cause}"),
        );
    }
    // What upstream's parser reads: names in any case, ranges, steps,
    // shorthands, and an IANA zone.
    for (schedule, extra) in [
        ("*/15 9-17 * jan-MAR Mon-Fri", json!({})),
        ("@hourly", json!({"timeZone": "Europe/Berlin"})),
        ("@every 1h30m", json!({})),
    ] {
        s.created(path, cron_job(schedule, extra)).await;
        s.delete_ok(&format!("{path}/cj")).await;
    }
}

/// A selector or template labels in a refusal are shown as upstream's Go
/// prints them (`kubectl apply` of a changed selector says this).
#[tokio::test]
async fn selectors_in_refusals_are_shown_as_upstream_prints_them() {
    let s = TestServer::new().await;
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let deployment = |app: &str, labels: Value| {
        json!({"metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": app}},
                "template": {"metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    };
    invalid(
        s.post(
            deployments,
            deployment("web", json!({"app": "other", "tier": "x"})),
        )
        .await,
        "Deployment.apps \"web\" is invalid: spec.template.metadata.labels: Invalid value: \
         map[string]string{\"app\":\"other\", \"tier\":\"x\"}: `selector` does not match template `labels`",
    );
    let created = s
        .created(deployments, deployment("web", json!({"app": "web"})))
        .await;
    let mut changed = deployment("web2", json!({"app": "web2"}));
    changed["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"].clone();
    invalid(
        s.put(&format!("{deployments}/web"), changed).await,
        "Deployment.apps \"web\" is invalid: spec.selector: Invalid value: \
         v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web2\"}, \
         MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable",
    );
}

/// How a workload rolls out is checked as upstream's apps validation: a
/// Deployment that may neither surge nor drop a pod could never progress,
/// and a DaemonSet does one or the other (its defaults fill the rest).
#[tokio::test]
async fn rollout_strategies_that_cannot_progress_are_refused() {
    let s = TestServer::new().await;
    let template = json!({"metadata": {"labels": {"app": "a"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let workload = |name: &str, strategy_field: &str, strategy: Value| {
        let mut object = json!({"metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template.clone()}});
        object["spec"][strategy_field] = strategy;
        object
    };
    invalid(
        s.post(
            "/apis/apps/v1/namespaces/default/deployments",
            workload(
                "stuck",
                "strategy",
                json!({"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}),
            ),
        )
        .await,
        "Deployment.apps \"stuck\" is invalid: spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0",
    );
    invalid(
        s.post(
            "/apis/apps/v1/namespaces/default/daemonsets",
            workload(
                "both",
                "updateStrategy",
                json!({"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1}}),
            ),
        )
        .await,
        "DaemonSet.apps \"both\" is invalid: spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:0, IntVal:1, StrVal:\"\"}: may not be set when maxUnavailable is non-zero",
    );
    // Surging alone is what a DaemonSet may do; its defaults keep the rest.
    let created = s
        .created(
            "/apis/apps/v1/namespaces/default/daemonsets",
            workload(
                "surge",
                "updateStrategy",
                json!({"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "10%", "maxUnavailable": 0}}),
            ),
        )
        .await;
    assert_eq!(
        created["spec"]["updateStrategy"]["rollingUpdate"],
        json!({"maxSurge": "10%", "maxUnavailable": 0})
    );
    let defaulted = s
        .created(
            "/apis/apps/v1/namespaces/default/daemonsets",
            workload(
                "partial",
                "updateStrategy",
                json!({"type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 2}}),
            ),
        )
        .await;
    assert_eq!(
        defaulted["spec"]["updateStrategy"]["rollingUpdate"],
        json!({"maxSurge": 0, "maxUnavailable": 2})
    );
}

/// A Deployment stored before its rollout was checked (here written to the
/// store directly) still takes status writes, as upstream's status strategy
/// validates the status alone; a change of its spec must fix the rollout.
#[tokio::test]
async fn a_stored_workload_that_breaks_a_rollout_rule_still_reports_status() {
    use skiff_store::Store as _;
    let s = TestServer::new().await;
    let legacy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "legacy", "namespace": "default", "uid": "0b0e7c5c-0000-4000-8000-000000000001",
            "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "a"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}},
            "template": {"metadata": {"labels": {"app": "a"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    s.store
        .create(
            "/registry/apps/deployments/default/legacy",
            serde_json::to_vec(&legacy).unwrap().into(),
        )
        .await
        .unwrap();
    let path = "/apis/apps/v1/namespaces/default/deployments/legacy";
    let stored = s
        .get_until(path, |d| d["metadata"]["name"] == "legacy")
        .await;
    let mut status = stored.clone();
    status["status"] = json!({"observedGeneration": 1, "replicas": 0});
    s.put_ok(&format!("{path}/status"), status).await;
    let mut spec = s.get_ok(path).await;
    spec["spec"]["replicas"] = json!(2);
    invalid(
        s.put(path, spec).await,
        "Deployment.apps \"legacy\" is invalid: spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0",
    );

    // The same for a pod spec that breaks a rule: the pod's kubelet and a
    // Job's controller still write their status.
    let container = json!([{"name": "Old_Name", "image": "i"}]);
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "legacy", "namespace": "default", "uid": "0b0e7c5c-0000-4000-8000-000000000002",
            "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": container.clone()}});
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "legacy", "namespace": "default", "uid": "0b0e7c5c-0000-4000-8000-000000000003",
            "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1},
        "spec": {"selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "0b0e7c5c-0000-4000-8000-000000000003"}},
            "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "0b0e7c5c-0000-4000-8000-000000000003"}},
                "spec": {"restartPolicy": "Never", "containers": container}}}});
    for (key, path, object, status) in [
        (
            "/registry/core/pods/default/legacy",
            "/api/v1/namespaces/default/pods/legacy",
            pod,
            json!({"phase": "Running"}),
        ),
        (
            "/registry/batch/jobs/default/legacy",
            "/apis/batch/v1/namespaces/default/jobs/legacy",
            job,
            json!({"active": 1}),
        ),
    ] {
        s.store
            .create(key, serde_json::to_vec(&object).unwrap().into())
            .await
            .unwrap();
        let mut stored = s
            .get_until(path, |o| o["metadata"]["name"] == "legacy")
            .await;
        stored["status"] = status.clone();
        let written = s.put_ok(&format!("{path}/status"), stored).await;
        assert_eq!(written["status"], status, "{path}");
        let mut labelled = s.get_ok(path).await;
        labelled["metadata"]["labels"] = json!({"changed": "yes"});
        let body = s.put(path, labelled).await.expect_failure(422, "Invalid");
        assert!(
            crate::harness::message_of(&body).contains("Old_Name"),
            "{path}: {body}"
        );
    }
}

/// Port names are IANA service names wherever they appear (a container's
/// ports, a probe's target, a Service's targetPort), and a disruption
/// budget is a count or a percentage of one kind, as upstream checks them.
#[tokio::test]
async fn port_names_and_disruption_budgets_are_checked_as_upstream() {
    let s = TestServer::new().await;
    let pod = json!({"metadata": {"name": "ports"},
        "spec": {"containers": [{"name": "c", "image": "i",
            "ports": [{"name": "Web_Port", "containerPort": 80}],
            "readinessProbe": {"httpGet": {"port": "8080"}}}]}});
    invalid(
        s.post("/api/v1/namespaces/default/pods", pod).await,
        "Pod \"ports\" is invalid: [spec.containers[0].ports[0].name: Invalid value: \"Web_Port\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-), spec.containers[0].readinessProbe.httpGet.port: Invalid value: \"8080\": must contain at least one letter (a-z)]",
    );
    let service = |name: &str, target: Value| {
        json!({"metadata": {"name": name},
            "spec": {"selector": {"app": "a"}, "ports": [{"port": 80, "targetPort": target}]}})
    };
    invalid(
        s.post(
            "/api/v1/namespaces/default/services",
            service("far", json!(70000)),
        )
        .await,
        "Service \"far\" is invalid: spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
    );
    // Zero means the port itself, as upstream defaults it.
    let zero = s
        .created(
            "/api/v1/namespaces/default/services",
            service("zero", json!(0)),
        )
        .await;
    assert_eq!(zero["spec"]["ports"][0]["targetPort"], 80);
    let named = s
        .created(
            "/api/v1/namespaces/default/services",
            service("named", json!("http")),
        )
        .await;
    assert_eq!(named["spec"]["ports"][0]["targetPort"], "http");

    const PDBS: &str = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
    let pdb = |name: &str, spec: Value| json!({"metadata": {"name": name}, "spec": spec});
    let (code, body) = s
        .post(
            PDBS,
            pdb("both", json!({"minAvailable": 1, "maxUnavailable": 1})),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("minAvailable and maxUnavailable cannot be both set")),
        "{body}"
    );
    invalid(
        s.post(PDBS, pdb("most", json!({"minAvailable": "150%"})))
            .await,
        "PodDisruptionBudget.policy \"most\" is invalid: spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%",
    );
    s.created(
        PDBS,
        pdb(
            "half",
            json!({"minAvailable": "50%", "selector": {"matchLabels": {"app": "a"}}}),
        ),
    )
    .await;
}

/// Fields users get wrong by hand, refused as upstream refuses them rather
/// than stored: a pod's pull policy, DNS policy, host name and deadline, an
/// environment variable with two sources or a field the downward API does
/// not give, an Ingress host that is an IP or a path without its type, and
/// a Job's negative counts.
#[tokio::test]
async fn hand_written_mistakes_are_refused_in_upstreams_words() {
    let s = TestServer::new().await;
    let pod = json!({"metadata": {"name": "p"}, "spec": {
        "dnsPolicy": "Whatever", "hostname": "Bad_Host", "activeDeadlineSeconds": 0,
        "containers": [{"name": "c", "image": "i", "imagePullPolicy": "Sometimes",
            "env": [{"name": "A", "value": "x",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}]}});
    let (code, body) = s.post("/api/v1/namespaces/default/pods", pod).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let fields: Vec<&str> = body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["field"].as_str())
        .collect();
    for field in [
        "spec.containers[0].env[0].valueFrom",
        "spec.containers[0].imagePullPolicy",
        "spec.dnsPolicy",
        "spec.hostname",
        "spec.activeDeadlineSeconds",
    ] {
        assert!(fields.contains(&field), "{field} not in {body}");
    }

    let ingress = json!({"metadata": {"name": "ing"}, "spec": {"rules": [{"host": "10.0.0.1",
        "http": {"paths": [{"path": "/x",
            "backend": {"service": {"name": "s", "port": {"number": 80}}}}]}}]}});
    invalid(
        s.post(
            "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
            ingress,
        )
        .await,
        "Ingress.networking.k8s.io \"ing\" is invalid: [spec.rules[0].host: Invalid value: \"10.0.0.1\": must be a DNS name, not an IP address, spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified]",
    );
    let fine = json!({"metadata": {"name": "ok"}, "spec": {"rules": [{"host": "*.example.com",
        "http": {"paths": [{"path": "/x", "pathType": "Prefix",
            "backend": {"service": {"name": "s", "port": {"name": "http"}}}}]}}]}});
    s.created(
        "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
        fine,
    )
    .await;

    let job = json!({"metadata": {"name": "j"}, "spec": {"parallelism": -1, "backoffLimit": -1,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}});
    invalid(
        s.post("/apis/batch/v1/namespaces/default/jobs", job).await,
        "Job.batch \"j\" is invalid: [spec.parallelism: Invalid value: -1: must be greater than or equal to 0, spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0]",
    );
}

/// Where a pod may run, how it resolves names and what it may do are held to
/// upstream's rules on a pod and on a workload's template alike, in
/// upstream's words; a pod that keeps them is stored as written.
#[tokio::test]
async fn placement_dns_and_privileges_are_checked_as_upstream() {
    let s = TestServer::new().await;
    let before = s.keys().await;
    let spec = json!({
        "dnsPolicy": "None",
        "tolerations": [{"key": "dedicated", "operator": "Exists", "value": "gpu"}],
        "securityContext": {"runAsUser": -1},
        "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "-1Gi"}}],
        "containers": [{"name": "c", "image": "i",
            "securityContext": {"privileged": true, "allowPrivilegeEscalation": false}}],
    });
    invalid(
        s.post(
            "/api/v1/namespaces/default/pods",
            json!({"metadata": {"name": "p"}, "spec": spec.clone()}),
        )
        .await,
        "Pod \"p\" is invalid: [spec.volumes[0].emptyDir.sizeLimit: Forbidden: SizeLimit field must be a valid resource quantity, \
         spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive, \
         spec.containers[0].securityContext: Invalid value: {\"allowPrivilegeEscalation\":false,\"privileged\":true}: cannot set `allowPrivilegeEscalation` to false and `privileged` to true, \
         spec.tolerations[0].operator: Invalid value: \"gpu\": value must be empty when `operator` is 'Exists', \
         spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None]",
    );
    let deployment = json!({"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "a"}},
        "template": {"metadata": {"labels": {"app": "a"}}, "spec": {
            "containers": [{"name": "c", "image": "i"}],
            "topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}}}});
    invalid(
        s.post("/apis/apps/v1/namespaces/default/deployments", deployment)
            .await,
        "Deployment.apps \"d\" is invalid: spec.template.spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
    );
    assert_eq!(s.keys().await, before, "refused writes store nothing");

    let kept = json!({
        "dnsPolicy": "None",
        "dnsConfig": {"nameservers": ["10.0.0.10"], "searches": ["svc.cluster.local."]},
        "hostAliases": [{"ip": "127.0.0.1", "hostnames": ["db.local"]}],
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
        "securityContext": {"runAsUser": 1000, "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]},
        "containers": [{"name": "c", "image": "i", "terminationMessagePolicy": "FallbackToLogsOnError"}],
    });
    let created = s
        .created(
            "/api/v1/namespaces/default/pods",
            json!({"metadata": {"name": "kept"}, "spec": kept.clone()}),
        )
        .await;
    for field in ["dnsConfig", "hostAliases", "securityContext"] {
        assert_eq!(created["spec"][field], kept[field], "{field}");
    }
}

/// Services, Endpoints, Leases, NetworkPolicies, PriorityClasses, RBAC
/// objects and StorageClasses are held to upstream's rules, in its words,
/// and nothing refused is stored.
#[tokio::test]
async fn cluster_kinds_are_checked_as_upstream() {
    let s = TestServer::new().await;
    let before = s.keys().await;
    let cases = [
        (
            "/api/v1/namespaces/default/services",
            json!({"metadata": {"name": "s"}, "spec": {"sessionAffinity": "Sticky",
                "externalTrafficPolicy": "Local",
                "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 80}]}}),
            "Service \"s\" is invalid: [spec.sessionAffinity: Unsupported value: \"Sticky\": supported values: \"ClientIP\", \"None\", \
             spec.externalTrafficPolicy: Invalid value: \"Local\": may only be set for externally-accessible services, \
             spec.ports[1]: Duplicate value: core.ServicePort{Name:\"\", Protocol:\"TCP\", AppProtocol:(*string)(nil), Port:80, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}]",
        ),
        (
            "/api/v1/namespaces/default/endpoints",
            json!({"metadata": {"name": "e"}, "subsets": [{"addresses": [{"ip": "notip"}], "ports": [{"port": 80}]}]}),
            "Endpoints \"e\" is invalid: [subsets[0].addresses[0].ip: Invalid value: \"notip\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff), \
             subsets[0].addresses[0].ip: Invalid value: \"notip\": must be a valid IP address]",
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            json!({"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 0}}),
            "Lease.coordination.k8s.io \"l\" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
        ),
        (
            "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies",
            json!({"metadata": {"name": "np"}, "spec": {"podSelector": {}, "policyTypes": ["Sideways"],
                "ingress": [{"ports": [{"port": 70000}], "from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["192.168.0.0/16"]}}]}]}}),
            "NetworkPolicy.networking.k8s.io \"np\" is invalid: [spec.policyTypes[0]: Unsupported value: \"Sideways\": supported values: \"Ingress\", \"Egress\", \
             spec.ingress[0].ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive, \
             spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: \"192.168.0.0/16\": must be a strict subset of `cidr`]",
        ),
        (
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            json!({"metadata": {"name": "too-high"}, "value": 2000000000}),
            "PriorityClass.scheduling.k8s.io \"too-high\" is invalid: value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
            json!({"metadata": {"name": "r"}, "rules": [{"verbs": [], "apiGroups": [""], "resources": ["pods"]},
                {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}),
            "Role.rbac.authorization.k8s.io \"r\" is invalid: [rules[0].verbs: Required value: verbs must contain at least one value, \
             rules[1].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs]",
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            json!({"metadata": {"name": "rb"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Pod", "name": "x"},
                "subjects": [{"kind": "Robot", "name": "r2"}]}),
            "RoleBinding.rbac.authorization.k8s.io \"rb\" is invalid: [roleRef.kind: Unsupported value: \"Pod\": supported values: \"Role\", \"ClusterRole\", \
             subjects[0].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"]",
        ),
        (
            "/apis/storage.k8s.io/v1/storageclasses",
            json!({"metadata": {"name": "sc"}, "provisioner": "example.com/disk", "reclaimPolicy": "Keep"}),
            "StorageClass.storage.k8s.io \"sc\" is invalid: reclaimPolicy: Unsupported value: \"Keep\": supported values: \"Delete\", \"Retain\"",
        ),
    ];
    for (path, object, message) in cases {
        invalid(s.post(path, object).await, message);
    }
    assert_eq!(s.keys().await, before, "refused writes store nothing");

    // What keeps the rules is stored.
    s.created(
        "/api/v1/namespaces/default/services",
        json!({"metadata": {"name": "ok"}, "spec": {"type": "NodePort", "externalTrafficPolicy": "Local",
            "sessionAffinity": "ClientIP", "ports": [{"name": "tcp", "port": 53}, {"name": "udp", "port": 53, "protocol": "UDP"}]}}),
    )
    .await;
    s.created(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"metadata": {"name": "urls"}, "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}),
    )
    .await;
}

/// Workloads that keep their pods running restart them always; a Job names
/// a known completion mode, and an Indexed one with a parallelism its
/// completions (with neither, both default to 1); a
/// StatefulSet a known claim retention; a PersistentVolume its access
/// modes, capacity, reclaim policy and one source — as upstream rules.
#[tokio::test]
async fn workload_and_volume_rules_are_checked_as_upstream() {
    let s = TestServer::new().await;
    let before = s.keys().await;
    let template = |restart: &str| {
        json!({"metadata": {"labels": {"app": "a"}}, "spec": {"restartPolicy": restart,
            "containers": [{"name": "c", "image": "i"}]}})
    };
    let cases = [
        (
            "/apis/apps/v1/namespaces/default/deployments",
            json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
                "template": template("OnFailure")}}),
            "Deployment.apps \"d\" is invalid: spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
        ),
        (
            "/apis/batch/v1/namespaces/default/jobs",
            json!({"metadata": {"name": "j"}, "spec": {"completionMode": "Sometimes", "template": template("Never")}}),
            "Job.batch \"j\" is invalid: spec.completionMode: Unsupported value: \"Sometimes\": supported values: \"NonIndexed\", \"Indexed\"",
        ),
        (
            "/apis/batch/v1/namespaces/default/jobs",
            json!({"metadata": {"name": "j"}, "spec": {"completionMode": "Indexed", "parallelism": 2,
                "template": template("Never")}}),
            "Job.batch \"j\" is invalid: spec.completions: Required value: when completion mode is Indexed",
        ),
        (
            "/apis/apps/v1/namespaces/default/statefulsets",
            json!({"metadata": {"name": "ss"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Keep"}, "template": template("Always")}}),
            "StatefulSet.apps \"ss\" is invalid: spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: \"Keep\": supported values: \"Delete\", \"Retain\"",
        ),
        (
            "/api/v1/persistentvolumes",
            json!({"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Keep"}}),
            "PersistentVolume \"pv\" is invalid: [spec.persistentVolumeReclaimPolicy: Unsupported value: \"Keep\": supported values: \"Delete\", \"Recycle\", \"Retain\", \
             spec: Required value: must specify a volume type]",
        ),
    ];
    for (path, object, message) in cases {
        invalid(s.post(path, object).await, message);
    }
    assert_eq!(s.keys().await, before, "refused writes store nothing");
    s.created(
        "/api/v1/persistentvolumes",
        json!({"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"}}}),
    )
    .await;
}

/// Events agree with their object's namespace and (through
/// `events.k8s.io/v1`) carry what the new API requires; autoscalers name a
/// target value for each metric and bounded scaling policies; a pod on the
/// host's network listens on its container ports; an IngressClass names a
/// domain-prefixed controller — as upstream rules.
#[tokio::test]
async fn events_autoscalers_host_ports_and_ingress_classes_are_checked_as_upstream() {
    let s = TestServer::new().await;
    let before = s.keys().await;
    let v1_event = |changes: &[(&str, Value)]| {
        let mut event = json!({"metadata": {"name": "e1"}, "eventTime": "2026-12-07T08:00:00.000000Z",
            "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Started", "action": "Start", "type": "Normal",
            "reportingController": "example.com/ctl", "reportingInstance": "ctl-1"});
        for (field, value) in changes {
            event[*field] = value.clone();
        }
        event
    };
    let cases = [
        (
            "/api/v1/namespaces/default/events",
            json!({"metadata": {"name": "e0"}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": "other"},
                "reason": "Started"}),
            "Event \"e0\" is invalid: involvedObject.namespace: Invalid value: \"other\": does not match event.namespace",
        ),
        (
            "/apis/events.k8s.io/v1/namespaces/default/events",
            v1_event(&[
                ("type", json!("Info")),
                ("deprecatedCount", json!(3)),
                ("action", Value::Null),
            ]),
            "Event.events.k8s.io \"e1\" is invalid: [action: Required value, \
             type: Invalid value: \"\": has invalid value: Info, count: Invalid value: \"\": needs to be unset]",
        ),
        (
            "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
            json!({"metadata": {"name": "h"}, "spec": {"maxReplicas": 3,
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                "metrics": [{"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue"}}}],
                "behavior": {"scaleDown": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 3600}]}}}}),
            "HorizontalPodAutoscaler.autoscaling \"h\" is invalid: [spec.metrics[0].resource.target.averageUtilization: Required value: must set either a target raw value or a target utilization, \
             spec.behavior.scaleDown.policies[0].periodSeconds: Invalid value: 3600: must be less than or equal to 1800]",
        ),
        (
            "/api/v1/namespaces/default/pods",
            json!({"metadata": {"name": "hn"}, "spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "i",
                "ports": [{"containerPort": 80, "hostPort": 8080}]}]}}),
            "Pod \"hn\" is invalid: spec.containers[0].ports[0].hostPort: Invalid value: 8080: must match `containerPort` when `hostNetwork` is true",
        ),
        (
            "/apis/networking.k8s.io/v1/ingressclasses",
            json!({"metadata": {"name": "ic"}, "spec": {"controller": "nginx",
                "parameters": {"kind": "Params", "name": "p", "scope": "Namespace"}}}),
            "IngressClass.networking.k8s.io \"ic\" is invalid: [spec.controller: Invalid value: \"nginx\": must be a domain-prefixed path (such as \"acme.io/foo\"), \
             spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace']",
        ),
    ];
    for (path, object, message) in cases {
        invalid(s.post(path, object).await, message);
    }
    assert_eq!(s.keys().await, before, "refused writes store nothing");

    // What keeps the rules is stored: a cluster-scoped object's event in
    // `default`, a new-API event, an unset host port defaulted on the host's
    // network, and a template that leaves it to its pods.
    s.created(
        "/api/v1/namespaces/default/events",
        json!({"metadata": {"name": "node-event"}, "involvedObject": {"kind": "Node", "name": "n"}, "reason": "Ready"}),
    )
    .await;
    s.created(
        "/apis/events.k8s.io/v1/namespaces/default/events",
        v1_event(&[]),
    )
    .await;
    let pod = s
        .created(
            "/api/v1/namespaces/default/pods",
            json!({"metadata": {"name": "hn"}, "spec": {"hostNetwork": true,
                "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}}),
        )
        .await;
    assert_eq!(pod["spec"]["containers"][0]["ports"][0]["hostPort"], 80);
    s.created(
        "/apis/apps/v1/namespaces/default/deployments",
        json!({"metadata": {"name": "hn"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"hostNetwork": true,
                "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}}}}),
    )
    .await;

    // A new-API event changes only its series; the controller stays.
    let series = json!({"series": {"count": 2, "lastObservedTime": "2026-12-07T08:01:00.000000Z"}});
    s.merge_patch_ok(
        "/apis/events.k8s.io/v1/namespaces/default/events/e1",
        series,
    )
    .await;
    invalid(
        s.merge_patch(
            "/apis/events.k8s.io/v1/namespaces/default/events/e1",
            json!({"note": "changed"}),
        )
        .await,
        "Event.events.k8s.io \"e1\" is invalid: message: Invalid value: \"changed\": field is immutable",
    );
    s.created(
        "/apis/networking.k8s.io/v1/ingressclasses",
        json!({"metadata": {"name": "ic"}, "spec": {"controller": "example.com/ingress"}}),
    )
    .await;
    invalid(
        s.merge_patch(
            "/apis/networking.k8s.io/v1/ingressclasses/ic",
            json!({"spec": {"controller": "example.com/other"}}),
        )
        .await,
        "IngressClass.networking.k8s.io \"ic\" is invalid: spec.controller: Invalid value: \"example.com/other\": field is immutable",
    );
}

/// A Service's external IPs must be addresses traffic comes to from
/// outside — never this host's loopback or link-local ones, which the
/// proxy would take over — and a load balancer IP must be an address; a
/// range or address written in a form other parsers read differently is
/// stored with upstream's warning.
#[tokio::test]
async fn service_addresses_are_checked_and_odd_forms_warned_of() {
    use crate::harness::created_answer;
    let s = TestServer::new().await;
    let services = "/api/v1/namespaces/default/services";
    let before = s.keys().await;
    invalid(
        s.post(
            services,
            json!({"metadata": {"name": "hijack"}, "spec": {"type": "LoadBalancer",
                "ports": [{"port": 6443}], "externalIPs": ["127.0.0.1", "169.254.169.254"],
                "loadBalancerIP": "nope"}}),
        )
        .await,
        "Service \"hijack\" is invalid: [spec.externalIPs[0]: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128), \
         spec.externalIPs[1]: Invalid value: \"169.254.169.254\": may not be in the link-local range (169.254.0.0/16, fe80::/10), \
         spec.loadBalancerIP: Invalid value: \"nope\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)]",
    );
    assert_eq!(s.keys().await, before, "refused writes store nothing");
    let created = created_answer(
        &s,
        services,
        json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}],
            "externalIPs": ["192.0.2.10"], "loadBalancerSourceRanges": ["10.1.2.3/16"]}}),
    )
    .await;
    assert_eq!(
        created.warnings,
        [
            "spec.loadBalancerSourceRanges[0]: CIDR value \"10.1.2.3/16\" is ambiguous in this context (should be \"10.1.0.0/16\" or \"10.1.2.3/32\"?)"
        ]
    );
    assert_eq!(created.body["spec"]["externalIPs"], json!(["192.0.2.10"]));
}

/// A name its pods take (a pod's hostname, a Deployment's or Job's pod
/// names) that is a valid subdomain but not a DNS label is warned of on
/// create, as is a StatefulSet's fractional claim template storage and
/// negative history limit.
#[tokio::test]
async fn names_pods_take_and_stateful_set_specs_are_warned_of() {
    use crate::harness::created_answer;
    let s = TestServer::new().await;
    let label_rule = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    let pod = created_answer(
        &s,
        "/api/v1/namespaces/default/pods",
        json!({"metadata": {"name": "web.v1"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    )
    .await;
    assert_eq!(
        pod.warnings,
        [format!(
            "metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: [{label_rule}]"
        )]
    );
    let template = json!({"metadata": {"labels": {"app": "a"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let deployment = created_answer(
        &s,
        "/apis/apps/v1/namespaces/default/deployments",
        json!({"metadata": {"name": "web.v1"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
            "template": template.clone()}}),
    )
    .await;
    assert_eq!(
        deployment.warnings,
        [format!(
            "metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [{label_rule}]"
        )]
    );
    let job = created_answer(
        &s,
        "/apis/batch/v1/namespaces/default/jobs",
        json!({"metadata": {"name": "run.1"}, "spec": {"completionMode": "Indexed",
            "completions": 200000, "parallelism": 20000,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}),
    )
    .await;
    assert_eq!(
        job.warnings,
        [
            format!(
                "metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [{label_rule}]"
            ),
            "spec: In Indexed Jobs with a number of completions higher than 10^5 and a parallelism higher than 10^4, Kubernetes might not be able to track completedIndexes when a big number of indexes fail".to_owned(),
        ]
    );
    let stateful = created_answer(
        &s,
        "/apis/apps/v1/namespaces/default/statefulsets",
        json!({"metadata": {"name": "db"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
            "serviceName": "db", "revisionHistoryLimit": -1, "template": template,
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1.5"}}}}]}}),
    )
    .await;
    assert_eq!(
        stateful.warnings,
        [
            "spec.volumeClaimTemplates[0].resources.requests[storage]: fractional byte value \"1500m\" is invalid, must be an integer",
            "spec.revisionHistoryLimit: a negative value retains all historical revisions; a value >= 0 is recommended",
        ]
    );
}

/// A pod or pod template that is valid but likely wrong is stored with
/// upstream's warnings (kubectl prints them); a pod's updates and a
/// workload's status writes give none, and a workload warns again only when
/// its template changes.
#[tokio::test]
async fn likely_mistakes_in_pods_and_templates_are_warned_of() {
    use crate::harness::{created_answer, put_answer};
    let s = TestServer::new().await;
    let pod = json!({"metadata": {"name": "p"}, "spec": {"terminationGracePeriodSeconds": -5,
        "nodeSelector": {"beta.kubernetes.io/arch": "amd64"},
        "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}, {"containerPort": 80}]}]}});
    let created = created_answer(&s, "/api/v1/namespaces/default/pods", pod).await;
    assert_eq!(
        created.warnings,
        [
            "spec.nodeSelector[beta.kubernetes.io/arch]: deprecated since v1.14; use \"kubernetes.io/arch\" instead",
            "spec.containers[0].ports[1]: duplicate port definition with spec.containers[0].ports[0]",
            "spec.terminationGracePeriodSeconds: must be >= 0; negative values are invalid and will be treated as 1",
        ]
    );
    let mut labelled = created.body.clone();
    labelled["metadata"]["labels"] = json!({"a": "b"});
    let updated = put_answer(&s, "/api/v1/namespaces/default/pods/p", labelled).await;
    assert_eq!(updated.code, StatusCode::OK, "{}", updated.body);
    assert!(updated.warnings.is_empty(), "{:?}", updated.warnings);

    let deployment = json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
        "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"limits": {"memory": "100.5"}}}]}}}});
    let created = created_answer(
        &s,
        "/apis/apps/v1/namespaces/default/deployments",
        deployment,
    )
    .await;
    let fractional = "spec.template.spec.containers[0].resources.limits[memory]: fractional byte value \"100500m\" is invalid, must be an integer";
    assert_eq!(created.warnings, [fractional]);
    let path = "/apis/apps/v1/namespaces/default/deployments/d";
    let mut scaled = created.body.clone();
    scaled["spec"]["replicas"] = json!(3);
    let answer = put_answer(&s, path, scaled).await;
    assert_eq!(answer.code, StatusCode::OK, "{}", answer.body);
    assert!(
        answer.warnings.is_empty(),
        "template unchanged: {:?}",
        answer.warnings
    );
    let mut status = answer.body.clone();
    status["status"] = json!({"replicas": 0});
    let answer = put_answer(&s, &format!("{path}/status"), status).await;
    assert!(
        answer.warnings.is_empty(),
        "status only: {:?}",
        answer.warnings
    );
    let mut changed = answer.body.clone();
    changed["spec"]["template"]["metadata"]["annotations"] = json!({"x": "y"});
    let answer = put_answer(&s, path, changed).await;
    assert_eq!(answer.warnings, [fractional]);
}

/// A quota counts only names upstream knows for quota (a misspelt
/// `request.cpu` would limit nothing), and object counts in whole units; a
/// PersistentVolume's capacity is its storage alone, more than nothing.
#[tokio::test]
async fn quota_names_and_volume_capacity_are_checked_as_upstream() {
    let s = TestServer::new().await;
    let before = s.keys().await;
    invalid(
        s.post(
            "/api/v1/namespaces/default/resourcequotas",
            json!({"metadata": {"name": "q"}, "spec": {"hard": {"request.cpu": "1"}}}),
        )
        .await,
        "ResourceQuota \"q\" is invalid: [spec.hard[request.cpu]: Invalid value: \"request.cpu\": must be a standard resource type or fully qualified, \
         spec.hard[request.cpu]: Invalid value: \"request.cpu\": must be a standard resource for quota]",
    );
    invalid(
        s.post(
            "/api/v1/persistentvolumes",
            json!({"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "0", "cpu": "1"},
                "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"}}}),
        )
        .await,
        "PersistentVolume \"pv\" is invalid: [spec.capacity: Unsupported value: {\"cpu\":\"1\",\"storage\":\"0\"}: supported values: \"storage\", \
         spec.capacity[storage]: Invalid value: \"0\": must be greater than zero]",
    );
    assert_eq!(s.keys().await, before, "refused writes store nothing");
    s.created(
        "/api/v1/namespaces/default/resourcequotas",
        json!({"metadata": {"name": "q"}, "spec": {"hard": {"requests.cpu": "1", "count/deployments.apps": "2"}}}),
    )
    .await;
}

/// Probes count and wait in non-negative numbers, a liveness or startup
/// probe succeeds once, a readiness probe has no grace period of its own, a
/// `sleep` hook fits in the pod's grace period, and readiness and
/// scheduling gates are qualified names (each gate once) — as upstream
/// rules.
#[tokio::test]
async fn probes_hooks_and_gates_are_checked_as_upstream() {
    let s = TestServer::new().await;
    let before = s.keys().await;
    let pod = json!({"metadata": {"name": "p"}, "spec": {"terminationGracePeriodSeconds": 10,
        "readinessGates": [{"conditionType": "bad type!"}],
        "schedulingGates": [{"name": "example.com/wait"}, {"name": "example.com/wait"}],
        "containers": [{"name": "c", "image": "i",
            "livenessProbe": {"exec": {"command": ["true"]}, "successThreshold": 2},
            "readinessProbe": {"tcpSocket": {"port": 80}, "terminationGracePeriodSeconds": 5},
            "startupProbe": {"exec": {"command": ["true"]}, "failureThreshold": -1},
            "lifecycle": {"preStop": {"sleep": {"seconds": 20}}}}]}});
    let (code, body) = s.post("/api/v1/namespaces/default/pods", pod).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let causes: Vec<String> = body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            )
        })
        .collect();
    for cause in [
        "spec.containers[0].startupProbe.failureThreshold: Invalid value: -1: must be greater than or equal to 0",
        "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
        "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes",
        "spec.containers[0].lifecycle.preStop.sleep: Invalid value: 20: must be non-negative and less than terminationGracePeriodSeconds (10)",
        "spec.readinessGates[0].conditionType: Invalid value: \"bad type!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        "spec.schedulingGates[1]: Duplicate value: \"example.com/wait\"",
    ] {
        assert!(
            causes.iter().any(|c| c == cause),
            "{cause} not in {causes:#?}"
        );
    }
    assert_eq!(causes.len(), 6, "{causes:#?}");
    assert_eq!(s.keys().await, before, "refused writes store nothing");
    s.created(
        "/api/v1/namespaces/default/pods",
        json!({"metadata": {"name": "p"}, "spec": {"schedulingGates": [{"name": "example.com/wait"}],
            "containers": [{"name": "c", "image": "i",
                "readinessProbe": {"tcpSocket": {"port": 80}, "successThreshold": 3},
                "lifecycle": {"preStop": {"sleep": {"seconds": 0}}}}]}}),
    )
    .await;
}

/// An EndpointSlice's addresses are of its type, its ports speak a known
/// protocol under unique names, and its type never changes — as upstream
/// rules.
#[tokio::test]
async fn endpoint_slices_are_checked_as_upstream() {
    let s = TestServer::new().await;
    let slices = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";
    invalid(
        s.post(
            slices,
            json!({"metadata": {"name": "es"}, "addressType": "IPv4",
                "endpoints": [{"addresses": ["not-an-ip", "fd00::1"]}, {"addresses": []}],
                "ports": [{"name": "http", "port": 80, "protocol": "HTTP"}, {"name": "http", "port": 81}]}),
        )
        .await,
        "EndpointSlice.discovery.k8s.io \"es\" is invalid: [endpoints[0].addresses[0]: Invalid value: \"not-an-ip\": must be a valid IPv4 address, \
         endpoints[0].addresses[0]: Invalid value: \"not-an-ip\": must be a valid IP address, \
         endpoints[0].addresses[1]: Invalid value: \"fd00::1\": must be a valid IPv4 address, \
         endpoints[1].addresses: Required value: must contain at least 1 address, \
         ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\", \
         ports[1].name: Duplicate value: \"http\"]",
    );
    s.created(
        slices,
        json!({"metadata": {"name": "es"}, "addressType": "FQDN",
            "endpoints": [{"addresses": ["db.example.com"], "hostname": "db-0"}],
            "ports": [{"name": "pg", "port": 5432, "appProtocol": "postgresql"}]}),
    )
    .await;
    invalid(
        s.merge_patch(
            &format!("{slices}/es"),
            json!({"addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"]}]}),
        )
        .await,
        "EndpointSlice.discovery.k8s.io \"es\" is invalid: addressType: Invalid value: \"IPv4\": field is immutable",
    );
}

/// A certificate signing request holds a PEM request, asks for known key
/// usages once each and names its signer as `example.com/signer-name`, as
/// upstream rules; nothing refused is stored.
#[tokio::test]
async fn certificate_requests_are_checked_as_upstream() {
    let s = TestServer::new().await;
    let before = s.keys().await;
    invalid(
        s.post(
            "/apis/certificates.k8s.io/v1/certificatesigningrequests",
            json!({"metadata": {"name": "csr"}, "spec": {"request": "bm90",
                "signerName": "bad", "usages": ["flying", "client auth", "client auth"]}}),
        )
        .await,
        "CertificateSigningRequest.certificates.k8s.io \"csr\" is invalid: [spec.request: Invalid value: []byte{0x6e, 0x6f, 0x74}: PEM block type must be CERTIFICATE REQUEST, \
         spec.usages[0]: Unsupported value: \"flying\": supported values: \"any\", \"cert sign\", \"client auth\", \"code signing\", \"content commitment\", \"crl sign\", \"data encipherment\", \"decipher only\", \"digital signature\", \"email protection\", \"encipher only\", \"ipsec end system\", \"ipsec tunnel\", \"ipsec user\", \"key agreement\", \"key encipherment\", \"microsoft sgc\", \"netscape sgc\", \"ocsp signing\", \"s/mime\", \"server auth\", \"signing\", \"timestamping\", \
         spec.usages[2]: Duplicate value: \"client auth\", \
         spec.signerName: Invalid value: \"bad\": must be a fully qualified domain and path of the form 'example.com/signer-name']",
    );
    assert_eq!(s.keys().await, before, "refused writes store nothing");
}

/// A certificate request must be signed by the key it asks a certificate
/// for (proof the requester holds it), as upstream checks before storing
/// it: one whose signature does not verify is refused in Go's words.
#[tokio::test]
async fn certificate_requests_prove_their_key() {
    use base64::Engine;
    let s = TestServer::new().await;
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "alice");
    let der = params.serialize_request(&key).unwrap().der().to_vec();
    let pem = |der: &[u8]| {
        let body = base64::engine::general_purpose::STANDARD.encode(der);
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        let text = format!(
            "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
            lines.join("\n")
        );
        base64::engine::general_purpose::STANDARD.encode(text)
    };
    let csr = |name: &str, request: String| {
        json!({"metadata": {"name": name}, "spec": {"request": request,
            "signerName": "example.com/signer", "usages": ["client auth"]}})
    };
    let path = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    s.created(path, csr("signed", pem(&der))).await;
    // The signature's last byte changed: the request no longer proves the key.
    let mut forged = der.clone();
    *forged.last_mut().unwrap() ^= 0x01;
    let before = s.keys().await;
    let (code, body) = s.post(path, csr("forged", pem(&forged))).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "CertificateSigningRequest.certificates.k8s.io \"forged\" is invalid: spec.request: Invalid value: []byte{0x2d, 0x2d,"
        ) && message.ends_with("}: x509: ECDSA verification failure"),
        "{message}"
    );
    assert_eq!(s.keys().await, before, "refused writes store nothing");
}

/// A VolumeAttachment names its attacher, node and one source and never
/// changes its spec; a CSIDriver asks for known policies and for tokens
/// that live ten minutes or more — as upstream rules.
#[tokio::test]
async fn volume_attachments_and_csi_drivers_are_checked_as_upstream() {
    let s = TestServer::new().await;
    let attachments = "/apis/storage.k8s.io/v1/volumeattachments";
    invalid(
        s.post(
            attachments,
            json!({"metadata": {"name": "va"}, "spec": {"attacher": "", "nodeName": "n1", "source": {}}}),
        )
        .await,
        "VolumeAttachment.storage.k8s.io \"va\" is invalid: [spec.attacher: Required value, \
         spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName]",
    );
    s.created(
        attachments,
        json!({"metadata": {"name": "va"}, "spec": {"attacher": "csi.example.com", "nodeName": "n1",
            "source": {"persistentVolumeName": "pv-1"}}}),
    )
    .await;
    let (code, body) = s
        .merge_patch(
            &format!("{attachments}/va"),
            json!({"spec": {"nodeName": "n2"}}),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("field is immutable")),
        "{body}"
    );
    invalid(
        s.post(
            "/apis/storage.k8s.io/v1/csidrivers",
            json!({"metadata": {"name": "csi.example.com"}, "spec": {"fsGroupPolicy": "Always",
                "tokenRequests": [{"audience": "a", "expirationSeconds": 60}, {"audience": "a"}]}}),
        )
        .await,
        "CSIDriver.storage.k8s.io \"csi.example.com\" is invalid: [spec.fsGroupPolicy: Unsupported value: \"Always\": supported values: \"File\", \"None\", \"ReadWriteOnceWithFSType\", \
         spec.tokenRequests[0].expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes, \
         spec.tokenRequests[1].audience: Duplicate value: \"a\"]",
    );
}

/// A pod's scheduling gates come off one by one (what lets it be
/// scheduled) but none is added after it is made, as upstream rules.
#[tokio::test]
async fn scheduling_gates_may_only_be_removed() {
    let s = TestServer::new().await;
    let pods = "/api/v1/namespaces/default/pods";
    s.created(
        pods,
        json!({"metadata": {"name": "gated"}, "spec": {
            "schedulingGates": [{"name": "example.com/a"}, {"name": "example.com/b"}],
            "containers": [{"name": "c", "image": "i"}]}}),
    )
    .await;
    let path = format!("{pods}/gated");
    let patched = s
        .merge_patch_ok(
            &path,
            json!({"spec": {"schedulingGates": [{"name": "example.com/b"}]}}),
        )
        .await;
    assert_eq!(
        patched["spec"]["schedulingGates"],
        json!([{"name": "example.com/b"}])
    );
    invalid(
        s.merge_patch(
            &path,
            json!({"spec": {"schedulingGates": [{"name": "example.com/b"}, {"name": "example.com/c"}]}}),
        )
        .await,
        "Pod \"gated\" is invalid: spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new scheduling gate 'example.com/c'",
    );
    let cleared = s
        .merge_patch_ok(&path, json!({"spec": {"schedulingGates": null}}))
        .await;
    assert!(cleared["spec"]["schedulingGates"].is_null(), "{cleared}");
}

/// While a pod waits on scheduling gates, its placement may narrow (what
/// queueing controllers do before they lift a gate): node selector entries
/// added, required node affinity terms given more requirements. Nothing
/// may be changed or removed, and once the gates are gone nothing moves.
#[tokio::test]
async fn a_gated_pod_may_narrow_its_placement_and_nothing_else() {
    let s = TestServer::new().await;
    let pods = "/api/v1/namespaces/default/pods";
    let required = |expressions: Value| {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": expressions}]}}})
    };
    s.created(
        pods,
        json!({"metadata": {"name": "gated"}, "spec": {
            "schedulingGates": [{"name": "example.com/a"}],
            "nodeSelector": {"a": "b"},
            "affinity": required(json!([{"key": "k", "operator": "In", "values": ["v"]}])),
            "containers": [{"name": "c", "image": "i"}]}}),
    )
    .await;
    let path = format!("{pods}/gated");
    let narrowed = s
        .merge_patch_ok(
            &path,
            json!({"spec": {"nodeSelector": {"c": "d"}, "affinity": required(json!([
                {"key": "k", "operator": "In", "values": ["v"]},
                {"key": "z", "operator": "Exists"}]))}}),
        )
        .await;
    assert_eq!(
        narrowed["spec"]["nodeSelector"],
        json!({"a": "b", "c": "d"})
    );
    assert_eq!(
        narrowed["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"][0]["matchExpressions"][1]["key"],
        "z"
    );
    invalid(
        s.merge_patch(&path, json!({"spec": {"nodeSelector": {"a": "x"}}}))
            .await,
        "Pod \"gated\" is invalid: spec.nodeSelector: Invalid value: map[string]string{\"a\":\"x\", \"c\":\"d\"}: \
         only additions to spec.nodeSelector are allowed (no mutations or deletions)",
    );
    invalid(
        s.merge_patch(
            &path,
            json!({"spec": {"affinity": required(json!([{"key": "z", "operator": "Exists"}]))}}),
        )
        .await,
        "Pod \"gated\" is invalid: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]: \
         Invalid value: core.NodeSelectorTerm{MatchExpressions:[]core.NodeSelectorRequirement{core.NodeSelectorRequirement{\
         Key:\"z\", Operator:\"Exists\", Values:[]string(nil)}}, MatchFields:[]core.NodeSelectorRequirement(nil)}: \
         only additions are allowed (no mutations or deletions)",
    );
    let term = json!({"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]});
    invalid(
        s.merge_patch(
            &path,
            json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [term.clone(), term]}}}}}),
        )
        .await,
        "Pod \"gated\" is invalid: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: \
         Invalid value: []core.NodeSelectorTerm{core.NodeSelectorTerm{MatchExpressions:[]core.NodeSelectorRequirement{\
         core.NodeSelectorRequirement{Key:\"k\", Operator:\"In\", Values:[]string{\"v\"}}}, MatchFields:[]core.NodeSelectorRequirement(nil)}, \
         core.NodeSelectorTerm{MatchExpressions:[]core.NodeSelectorRequirement{core.NodeSelectorRequirement{Key:\"k\", Operator:\"In\", \
         Values:[]string{\"v\"}}}, MatchFields:[]core.NodeSelectorRequirement(nil)}}: \
         no additions/deletions to non-empty NodeSelectorTerms list are allowed",
    );
    // Pod affinity is not placement a gate holds open.
    let (forbidden_status, forbidden) = s
        .merge_patch(
            &path,
            json!({"spec": {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "zone", "labelSelector": {"matchLabels": {"a": "b"}}}]}}}}),
        )
        .await;
    assert_eq!(forbidden_status, 422, "{forbidden}");
    assert!(
        forbidden["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec: Forbidden: pod updates may not change fields")),
        "{forbidden}"
    );
    // Ungated, the placement is fixed.
    s.merge_patch_ok(&path, json!({"spec": {"schedulingGates": null}}))
        .await;
    let (fixed_status, fixed) = s
        .merge_patch(&path, json!({"spec": {"nodeSelector": {"e": "f"}}}))
        .await;
    assert_eq!(fixed_status, 422, "{fixed}");
    assert!(
        fixed["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec: Forbidden: pod updates may not change fields")),
        "{fixed}"
    );
    let stored = s.get_ok(&path).await;
    assert_eq!(stored["spec"]["nodeSelector"], json!({"a": "b", "c": "d"}));
}
