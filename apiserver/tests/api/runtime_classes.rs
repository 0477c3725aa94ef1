//! RuntimeClasses (`node.k8s.io/v1`): the class's own rules, and what it
//! adds to, or refuses of, a pod that names it (upstream's RuntimeClass
//! admission).

use serde_json::{Value, json};
use skiff_apiserver::authn::UserInfo;

use crate::harness::{Client, Expect, TestServer, columns, pod, refused};

const CLASSES: &str = "/apis/node.k8s.io/v1/runtimeclasses";
const PODS: &str = "/api/v1/namespaces/default/pods";

fn class(name: &str, handler: &str) -> Value {
    json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
           "metadata": {"name": name}, "handler": handler})
}

fn pod_with_class(name: &str, class: &str) -> Value {
    let mut p = pod(name, None);
    p["spec"]["runtimeClassName"] = json!(class);
    p
}

#[tokio::test]
async fn the_handler_is_a_dns_label_that_never_changes() {
    let s = TestServer::new().await;
    s.created(CLASSES, class("gvisor", "runsc")).await;
    // Cluster-scoped and granted to no one by default: an authenticated
    // user without a binding may not create one.
    let user = UserInfo {
        name: "jane".into(),
        groups: vec!["system:authenticated".into()],
        ..Default::default()
    };
    s.post_as(&user, CLASSES, class("sneaky", "runc"))
        .await
        .expect_failure(403, "Forbidden");
    refused(
        s.post(CLASSES, class("bad", "Not_A_Label")).await,
        422,
        "Invalid",
        "RuntimeClass.node.k8s.io \"bad\" is invalid: handler: Invalid value: \"Not_A_Label\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
    );
    let mut bad_overhead = class("heavy", "kata");
    bad_overhead["overhead"] = json!({"podFixed": {"cpu": "-1"}});
    let body = s
        .post(CLASSES, bad_overhead)
        .await
        .expect_failure(422, "Invalid");
    assert!(
        body["message"].as_str().is_some_and(|m| m.contains(
            "overhead.podFixed[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"
        )),
        "{body}"
    );
    let mut changed = s.get_ok(&format!("{CLASSES}/gvisor")).await;
    changed["handler"] = json!("runc");
    refused(
        s.put(&format!("{CLASSES}/gvisor"), changed).await,
        422,
        "Invalid",
        "RuntimeClass.node.k8s.io \"gvisor\" is invalid: handler: Invalid value: \"runc\": field is immutable",
    );
    let table = s.get_table(CLASSES).await;
    assert_eq!(columns(&table), ["Name", "Handler", "Age"]);
    assert_eq!(table["rows"][0]["cells"][1], "runsc");
}

#[tokio::test]
async fn a_pod_gets_its_classs_overhead_node_selector_and_tolerations() {
    let s = TestServer::new().await;
    let mut kata = class("kata", "kata-qemu");
    kata["overhead"] = json!({"podFixed": {"cpu": "250m", "memory": "120Mi"}});
    kata["scheduling"] = json!({
        "nodeSelector": {"runtime": "kata"},
        "tolerations": [{"key": "kata", "operator": "Exists", "effect": "NoSchedule"}]
    });
    s.created(CLASSES, kata).await;

    let mut p = pod_with_class("p", "kata");
    p["spec"]["nodeSelector"] = json!({"disk": "ssd"});
    let created = s.created(PODS, p).await;
    assert_eq!(
        created["spec"]["overhead"],
        json!({"cpu": "250m", "memory": "120Mi"})
    );
    assert_eq!(
        created["spec"]["nodeSelector"],
        json!({"disk": "ssd", "runtime": "kata"})
    );
    let tolerations = created["spec"]["tolerations"].as_array().unwrap();
    assert!(
        tolerations.iter().any(|t| t["key"] == "kata"),
        "{tolerations:?}"
    );

    // The same overhead, however written, is accepted.
    let mut same = pod_with_class("same", "kata");
    same["spec"]["overhead"] = json!({"cpu": "0.25", "memory": "120Mi"});
    s.created(PODS, same).await;
}

#[tokio::test]
async fn pods_that_do_not_fit_their_class_are_refused() {
    let s = TestServer::new().await;
    let mut kata = class("kata", "kata-qemu");
    kata["overhead"] = json!({"podFixed": {"cpu": "250m"}});
    kata["scheduling"] = json!({"nodeSelector": {"runtime": "kata"}});
    s.created(CLASSES, kata).await;

    // Each pod with what it adds to the plain pod, and upstream's refusal.
    let cases = [
        (
            pod_with_class("missing", "nope"),
            json!({}),
            "pods \"missing\" is forbidden: pod rejected: RuntimeClass \"nope\" not found",
        ),
        (
            pod_with_class("other-overhead", "kata"),
            json!({"overhead": {"cpu": "1"}}),
            "pods \"other-overhead\" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead",
        ),
        (
            pod_with_class("conflict", "kata"),
            json!({"nodeSelector": {"runtime": "runc"}}),
            "pods \"conflict\" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[runtime] = kata; pod.spec.nodeSelector[runtime] = runc",
        ),
        (
            pod("classless", None),
            json!({"overhead": {"cpu": "1"}}),
            "pods \"classless\" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead",
        ),
    ];
    for (mut refused_pod, extra, message) in cases {
        for (field, value) in extra.as_object().unwrap() {
            refused_pod["spec"][field] = value.clone();
        }
        refused(s.post(PODS, refused_pod).await, 403, "Forbidden", message);
    }
    // Nothing refused was stored.
    let pods = s.get_ok(PODS).await;
    assert_eq!(pods["items"], json!([]));
}
