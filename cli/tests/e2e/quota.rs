//! ResourceQuota and LimitRange with real kubectl, as an administrator
//! tries them: `kubectl create quota` caps a namespace (the create past it
//! refused in upstream's words), `kubectl describe quota` and `get quota`
//! show the figures the controller reports, and a LimitRange's defaults are
//! visible on a pod that set none.

use std::time::Duration;

use serde_json::{Value, json};

use super::support::{Server, assert_contains, eventually};

const WAIT: Duration = Duration::from_secs(30);

/// Whether `text` has a line made of exactly these words.
fn has_row(text: &str, words: &[&str]) -> bool {
    text.lines()
        .any(|line| line.split_whitespace().eq(words.iter().copied()))
}

#[test]
fn kubectl_quota_refuses_past_the_limit_and_describe_shows_the_figures() {
    let server = Server::start();
    server.kubectl_ok(&["create", "namespace", "x"]);
    // The CA ConfigMap every namespace gets counts too; let it arrive first.
    eventually(WAIT, "the namespace's kube-root-ca.crt", || {
        server
            .kubectl(&["get", "configmap", "kube-root-ca.crt", "-n", "x"])
            .status
            .success()
            .then_some(())
    });
    let created = server.kubectl_ok(&[
        "create",
        "quota",
        "q",
        "--hard=configmaps=2,pods=1",
        "-n",
        "x",
    ]);
    assert_contains(&created, "resourcequota/q created");

    server.kubectl_ok(&["create", "configmap", "a", "-n", "x"]);
    let err = server.kubectl_err(&["create", "configmap", "b", "-n", "x"]);
    assert_contains(
        &err,
        r#"configmaps "b" is forbidden: exceeded quota: q, requested: configmaps=1, used: configmaps=2, limited: configmaps=2"#,
    );
    server.kubectl_ok(&["run", "p1", "--image=busybox", "-n", "x"]);
    let err = server.kubectl_err(&["run", "p2", "--image=busybox", "-n", "x"]);
    assert_contains(
        &err,
        r#"Error from server (Forbidden): pods "p2" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1"#,
    );
    let missing = server.kubectl_err(&["get", "configmap", "b", "-n", "x"]);
    assert_contains(&missing, "NotFound");

    let described = eventually(WAIT, "describe quota to show the usage", || {
        let out = server.kubectl_ok(&["describe", "quota", "q", "-n", "x"]);
        (has_row(&out, &["configmaps", "2", "2"]) && has_row(&out, &["pods", "1", "1"]))
            .then_some(out)
    });
    assert!(
        has_row(&described, &["Resource", "Used", "Hard"]),
        "{described}"
    );
    let listed = server.kubectl_ok(&["get", "quota", "-n", "x"]);
    assert!(
        listed.contains("configmaps: 2/2, pods: 1/1"),
        "REQUEST column: {listed}"
    );

    // Deleting makes room again, and describe follows.
    server.kubectl_ok(&["delete", "configmap", "a", "-n", "x"]);
    server.kubectl_ok(&["create", "configmap", "b", "-n", "x"]);
    eventually(WAIT, "describe quota after the swap", || {
        let out = server.kubectl_ok(&["describe", "quota", "q", "-n", "x"]);
        has_row(&out, &["configmaps", "2", "2"]).then_some(())
    });
}

#[test]
fn kubectl_limit_range_defaults_show_on_a_pod_and_bounds_refuse() {
    let server = Server::start();
    server.kubectl_ok(&["create", "namespace", "y"]);
    let range = json!({"apiVersion": "v1", "kind": "LimitRange",
        "metadata": {"name": "limits", "namespace": "y"},
        "spec": {"limits": [{"type": "Container",
            "default": {"cpu": "300m", "memory": "128Mi"},
            "defaultRequest": {"cpu": "100m"},
            "min": {"cpu": "50m"}}]}});
    server.kubectl_stdin_ok(&["create", "-f", "-"], &range.to_string());

    server.kubectl_ok(&["run", "p", "--image=busybox", "-n", "y"]);
    let pod_field = |path: &str| {
        server.kubectl_ok(&[
            "get",
            "pod",
            "p",
            "-n",
            "y",
            "-o",
            &format!("jsonpath={path}"),
        ])
    };
    let resources = pod_field("{.spec.containers[0].resources}");
    let resources: Value = serde_json::from_str(&resources).expect("resources JSON");
    assert_eq!(
        resources,
        json!({"limits": {"cpu": "300m", "memory": "128Mi"},
               "requests": {"cpu": "100m", "memory": "128Mi"}})
    );
    let annotation = pod_field(r"{.metadata.annotations.kubernetes\.io/limit-ranger}");
    assert_eq!(
        annotation,
        "LimitRanger plugin set: cpu, memory request for container p; cpu, memory limit for container p"
    );

    let err = server.kubectl_err(&[
        "run",
        "tiny",
        "--image=busybox",
        "-n",
        "y",
        "--overrides",
        r#"{"spec": {"containers": [{"name": "tiny", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}]}}"#,
    ]);
    assert_contains(
        &err,
        r#"pods "tiny" is forbidden: minimum cpu usage per Container is 50m, but request is 10m"#,
    );

    let described = server.kubectl_ok(&["describe", "limitrange", "limits", "-n", "y"]);
    assert!(
        has_row(
            &described,
            &["Container", "cpu", "50m", "-", "100m", "300m", "-"]
        ),
        "{described}"
    );
}
