//! The kubectl suite: everyday commands against a control-plane-only server,
//! with the output and errors a user sees.

use std::time::Duration;

use super::support::{Server, assert_contains, eventually, json};

#[test]
fn version_and_discovery() {
    let server = Server::start();
    let version = server.kubectl_ok(&["version", "-o", "json"]);
    let version = json(&version);
    let git = version["serverVersion"]["gitVersion"]
        .as_str()
        .expect("server gitVersion");
    assert!(git.starts_with("v1.33."), "{git}");

    let resources = server.kubectl_ok(&["api-resources"]);
    for line in [
        "configmaps",
        "cm",
        "deployments",
        "deploy",
        "apps/v1",
        "namespaces",
        "ns",
        "leases",
        "customresourcedefinitions",
        "horizontalpodautoscalers",
    ] {
        assert!(
            resources.contains(line),
            "api-resources lacks {line}:\n{resources}"
        );
    }
    let versions = server.kubectl_ok(&["api-versions"]);
    for gv in [
        "v1",
        "apps/v1",
        "batch/v1",
        "rbac.authorization.k8s.io/v1",
        "autoscaling/v2",
    ] {
        assert!(
            versions.lines().any(|l| l == gv),
            "api-versions lacks {gv}:\n{versions}"
        );
    }
    for path in ["/healthz", "/livez", "/readyz"] {
        assert_eq!(
            server.kubectl_ok(&["get", "--raw", path]).trim(),
            "ok",
            "{path}"
        );
    }
    // `kubectl get cs`: the in-process components and the store, with
    // upstream's deprecation warning.
    let out = server.kubectl(&["get", "componentstatuses"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert_contains(&stderr, "v1 ComponentStatus is deprecated in v1.19+");
    let rows = super::support::rows(&stdout);
    assert_eq!(rows[0], ["NAME", "STATUS", "MESSAGE", "ERROR"]);
    let healthy: Vec<(&str, &str)> = rows[1..]
        .iter()
        .map(|r| (r[0].as_str(), r[1].as_str()))
        .collect();
    assert_eq!(
        healthy,
        [
            ("controller-manager", "Healthy"),
            ("scheduler", "Healthy"),
            ("etcd-0", "Healthy")
        ]
    );
    let apis = json(&server.kubectl_ok(&["get", "--raw", "/apis"]));
    assert_eq!(apis["kind"], "APIGroupList");
    let core = json(&server.kubectl_ok(&["get", "--raw", "/api/v1"]));
    assert_eq!(core["kind"], "APIResourceList");
}

#[test]
fn namespaces_configmaps_secrets_lifecycle() {
    let server = Server::start();
    server.kubectl_ok(&["create", "namespace", "team-a"]);
    let names = server.kubectl_ok(&["get", "namespaces", "-o", "name"]);
    for ns in [
        "namespace/default",
        "namespace/kube-system",
        "namespace/team-a",
    ] {
        assert!(names.lines().any(|l| l == ns), "{ns} missing:\n{names}");
    }
    server.kubectl_ok(&[
        "create",
        "configmap",
        "settings",
        "-n",
        "team-a",
        "--from-literal=color=blue",
        "--from-literal=size=9",
    ]);
    let cm = json(&server.kubectl_ok(&["get", "cm", "settings", "-n", "team-a", "-o", "json"]));
    assert_eq!(cm["data"]["color"], "blue");
    assert!(
        cm["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );
    assert!(cm["metadata"]["creationTimestamp"].is_string());
    let yaml = server.kubectl_ok(&["get", "cm", "settings", "-n", "team-a", "-o", "yaml"]);
    assert_contains(&yaml, "color: blue");

    server.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "creds",
        "-n",
        "team-a",
        "--from-literal=password=s3cr3t",
    ]);
    let secret =
        json(&server.kubectl_ok(&["get", "secret", "creds", "-n", "team-a", "-o", "json"]));
    assert_eq!(secret["type"], "Opaque");
    assert_eq!(secret["data"]["password"], "czNjcjN0");

    server.kubectl_ok(&["delete", "configmap", "settings", "-n", "team-a"]);
    let err = server.kubectl_err(&["get", "configmap", "settings", "-n", "team-a"]);
    assert_contains(
        &err,
        r#"Error from server (NotFound): configmaps "settings" not found"#,
    );
}

#[test]
fn missing_namespace_and_duplicate_create_errors() {
    let server = Server::start();
    let err = server.kubectl_err(&["create", "configmap", "x", "-n", "nowhere"]);
    assert_contains(
        &err,
        r#"error: failed to create configmap: namespaces "nowhere" not found"#,
    );
    server.kubectl_ok(&["create", "configmap", "dup"]);
    let err = server.kubectl_err(&["create", "configmap", "dup"]);
    assert_contains(
        &err,
        r#"error: failed to create configmap: configmaps "dup" already exists"#,
    );
}

#[test]
fn services_and_deployments_with_output_formats() {
    let server = Server::start();
    server.kubectl_ok(&[
        "create",
        "deployment",
        "web",
        "--image=busybox",
        "--replicas=2",
    ]);
    let deploy = json(&server.kubectl_ok(&["get", "deployment", "web", "-o", "json"]));
    assert_eq!(deploy["spec"]["replicas"], 2);
    assert_eq!(deploy["metadata"]["generation"], 1);
    assert_eq!(deploy["spec"]["selector"]["matchLabels"]["app"], "web");
    let name = server.kubectl_ok(&["get", "deploy", "-o", "name"]);
    assert_eq!(name.trim(), "deployment.apps/web");
    let wide = server.kubectl_ok(&["get", "deployments", "-o", "wide"]);
    assert_contains(&wide, "web");

    server.kubectl_ok(&["create", "service", "clusterip", "web", "--tcp=80:8080"]);
    let svc = json(&server.kubectl_ok(&["get", "svc", "web", "-o", "json"]));
    assert_eq!(svc["spec"]["ports"][0]["port"], 80);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);

    server.kubectl_ok(&["scale", "deployment", "web", "--replicas=5"]);
    let deploy = json(&server.kubectl_ok(&["get", "deployment", "web", "-o", "json"]));
    assert_eq!(deploy["spec"]["replicas"], 5);
    assert_eq!(
        deploy["metadata"]["generation"], 2,
        "a spec change bumps generation"
    );
}

#[test]
fn labels_annotations_and_selectors() {
    let server = Server::start();
    for (name, tier) in [("a", "front"), ("b", "back"), ("c", "front")] {
        server.kubectl_ok(&["create", "configmap", name]);
        server.kubectl_ok(&["label", "configmap", name, &format!("tier={tier}")]);
    }
    server.kubectl_ok(&["annotate", "configmap", "a", "owner=me"]);
    let front = server.kubectl_ok(&["get", "cm", "-l", "tier=front", "-o", "name"]);
    let mut front: Vec<_> = front.lines().collect();
    front.sort();
    assert_eq!(front, vec!["configmap/a", "configmap/c"]);
    let not_front = server.kubectl_ok(&["get", "cm", "-l", "tier!=front,tier", "-o", "name"]);
    assert_eq!(not_front.trim(), "configmap/b");
    let set = server.kubectl_ok(&["get", "cm", "-l", "tier in (back)", "-o", "name"]);
    assert_eq!(set.trim(), "configmap/b");
    let a = json(&server.kubectl_ok(&["get", "cm", "a", "-o", "json"]));
    assert_eq!(a["metadata"]["annotations"]["owner"], "me");
    server.kubectl_ok(&["label", "configmap", "a", "tier-"]);
    let a = json(&server.kubectl_ok(&["get", "cm", "a", "-o", "json"]));
    assert!(a["metadata"]["labels"].get("tier").is_none(), "{a}");
}

#[test]
fn patch_of_each_type_and_replace() {
    let server = Server::start();
    server.kubectl_ok(&["create", "deployment", "app", "--image=busybox"]);
    server.kubectl_ok(&[
        "patch", "deployment", "app", "--type=strategic", "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"busybox","image":"busybox:2"},{"name":"side","image":"side:1"}]}}}}"#,
    ]);
    let d = json(&server.kubectl_ok(&["get", "deploy", "app", "-o", "json"]));
    let containers = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    assert_eq!(
        containers.len(),
        2,
        "strategic merge adds by name: {containers:?}"
    );
    assert_eq!(containers[0]["image"], "busybox:2");

    server.kubectl_ok(&[
        "patch",
        "deployment",
        "app",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"merged":"yes"}}}"#,
    ]);
    server.kubectl_ok(&[
        "patch",
        "deployment",
        "app",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/replicas","value":3}]"#,
    ]);
    let d = json(&server.kubectl_ok(&["get", "deploy", "app", "-o", "json"]));
    assert_eq!(d["metadata"]["labels"]["merged"], "yes");
    assert_eq!(d["spec"]["replicas"], 3);

    let err = server.kubectl_err(&[
        "patch",
        "deployment",
        "app",
        "--type=json",
        "-p",
        r#"[{"op":"test","path":"/spec/replicas","value":99}]"#,
    ]);
    // Upstream's generic 422 to a JSON patch that cannot be applied, which
    // kubectl shows by its one cause: the operation that failed, in the
    // words of upstream's JSON patch library.
    assert_contains(
        &err,
        "The request is invalid: : testing value /spec/replicas failed: test failed",
    );
    let d = json(&server.kubectl_ok(&["get", "deploy", "app", "-o", "json"]));
    assert_eq!(d["spec"]["replicas"], 3, "a failed patch changes nothing");

    let mut cm = json(&server.kubectl_ok(&[
        "create",
        "configmap",
        "r",
        "--from-literal=k=v",
        "-o",
        "json",
    ]));
    cm["data"]["k"] = "replaced".into();
    // Default validation needs /openapi/v3 (the API fidelity issue); the
    // server validates the object itself.
    server.kubectl_stdin_ok(&["replace", "-f", "-"], &cm.to_string());
    let now = json(&server.kubectl_ok(&["get", "cm", "r", "-o", "json"]));
    assert_eq!(now["data"]["k"], "replaced");

    // The object above carries the old resourceVersion: a second replace with
    // it conflicts.
    cm["data"]["k"] = "stale".into();
    let err = server.kubectl_stdin_err(&["replace", "-f", "-"], &cm.to_string());
    assert_contains(
        &err,
        "Operation cannot be fulfilled on configmaps \"r\": the object has been modified",
    );
}

#[test]
fn watch_prints_live_events() {
    let server = Server::start();
    server.kubectl_ok(&["create", "configmap", "w0"]);
    let (mut child, rx) = server.kubectl_lines(&["get", "configmaps", "-w", "-o", "name"]);
    let first = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("initial list");
    assert_contains(&first, "configmap/");
    server.kubectl_ok(&["create", "configmap", "w1"]);
    let seen = eventually(
        Duration::from_secs(20),
        "the new configmap on the watch",
        || {
            rx.recv_timeout(Duration::from_millis(200))
                .ok()
                .filter(|l| l.contains("w1"))
        },
    );
    assert_eq!(seen, "configmap/w1");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn delete_waits_for_finalizers() {
    let server = Server::start();
    server.kubectl_ok(&["create", "configmap", "held"]);
    server.kubectl_ok(&[
        "patch",
        "configmap",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ]);
    server.kubectl_ok(&["delete", "configmap", "held", "--wait=false"]);
    let held = json(&server.kubectl_ok(&["get", "cm", "held", "-o", "json"]));
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    server.kubectl_ok(&[
        "patch",
        "configmap",
        "held",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    let out = server.kubectl(&["delete", "configmap", "held", "--ignore-not-found"]);
    assert!(out.status.success());
    server.kubectl_err(&["get", "cm", "held"]);
}
