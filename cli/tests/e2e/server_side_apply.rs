//! Server-side apply with real clients: `kubectl apply --server-side`
//! (create, update, conflicts between field managers, `--force-conflicts`,
//! `--show-managed-fields`) and the Python client's dynamic client.

use super::support::{Server, assert_contains, python_ok};

fn configmap(data: &[(&str, &str)]) -> String {
    let mut yaml = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n");
    for (k, v) in data {
        yaml.push_str(&format!("  {k}: \"{v}\"\n"));
    }
    yaml
}

/// `kubectl apply --server-side` of `yaml` as `manager`, with extra flags.
fn apply(server: &Server, manager: &str, yaml: &str, extra: &[&str]) -> std::process::Output {
    let manager = format!("--field-manager={manager}");
    let mut args = vec!["apply", "--server-side", &manager, "-f", "-"];
    args.extend_from_slice(extra);
    server.kubectl_stdin(&args, yaml)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn data(server: &Server) -> serde_json::Value {
    let out = server.kubectl_ok(&["get", "configmap", "ssa", "-o", "json"]);
    let object: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    object["data"].clone()
}

#[test]
fn kubectl_server_side_apply_owns_conflicts_and_forces() {
    let server = Server::start();
    let out = apply(
        &server,
        "a",
        &configmap(&[("k", "1"), ("gone", "soon")]),
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "configmap/ssa serverside-applied");

    // a stops applying `gone`: it is removed; `k` changes.
    let out = apply(&server, "a", &configmap(&[("k", "2")]), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // kubectl moves the client-side manager's fields over with a JSON patch
    // guarded by a test of the resourceVersion; it warns when refused.
    assert!(
        !text(&out.stderr).contains("managed fields migration"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(data(&server), serde_json::json!({"k": "2"}));

    // b wants another value for a's field.
    let out = apply(&server, "b", &configmap(&[("k", "3")]), &[]);
    assert!(!out.status.success(), "conflicting apply succeeded");
    let err = text(&out.stderr);
    assert_contains(
        &err,
        r#"Apply failed with 1 conflict: conflict with "a": .data.k"#,
    );
    assert_eq!(data(&server), serde_json::json!({"k": "2"}));

    // Agreeing on the value is no conflict; forcing takes the field over.
    let out = apply(&server, "b", &configmap(&[("k", "2")]), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = apply(
        &server,
        "b",
        &configmap(&[("k", "4")]),
        &["--force-conflicts"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(data(&server), serde_json::json!({"k": "4"}));

    // An update by another kubectl command owns what it changed.
    server.kubectl_ok(&["label", "configmap", "ssa", "team=x"]);
    let yaml = server.kubectl_ok(&[
        "get",
        "configmap",
        "ssa",
        "-o",
        "yaml",
        "--show-managed-fields",
    ]);
    for line in [
        "manager: b",
        "operation: Apply",
        "manager: kubectl-label",
        "operation: Update",
        "fieldsType: FieldsV1",
        "f:k: {}",
        "f:team: {}",
    ] {
        assert!(
            yaml.contains(line),
            "--show-managed-fields lacks {line:?}:\n{yaml}"
        );
    }
    assert!(
        !yaml.contains("manager: a\n"),
        "a lost its only field to the forced apply:\n{yaml}"
    );
    let plain = server.kubectl_ok(&["get", "configmap", "ssa", "-o", "yaml"]);
    assert!(!plain.contains("managedFields"), "{plain}");
}

#[test]
fn kubectl_server_side_apply_merges_containers_by_name() {
    let server = Server::start();
    let deployment = |containers: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n{containers}"
        )
    };
    let two = "      - {name: app, image: nginx:1}\n      - {name: sidecar, image: busybox:1}\n";
    let out = apply(&server, "ci", &deployment(two), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).trim(),
        "deployment.apps/web serverside-applied"
    );

    // Someone scales by hand; the next apply without replicas leaves it.
    server.kubectl_ok(&["scale", "deployment", "web", "--replicas=3"]);
    let one = "      - {name: app, image: nginx:2}\n";
    let without_replicas = deployment(one).replace("  replicas: 1\n", "");
    let out = apply(&server, "ci", &without_replicas, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = server.kubectl_ok(&["get", "deployment", "web", "-o", "json"]);
    let object: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let containers = object["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    let names: Vec<&str> = containers
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, vec!["app"], "the sidecar went with its omission");
    assert_eq!(containers[0]["image"], "nginx:2");
    assert_eq!(object["spec"]["replicas"], 3);
}

#[test]
fn python_dynamic_client_server_side_apply() {
    let server = Server::start();
    python_ok(&server.kubeconfig(), "server_side_apply.py", &[]);
}

#[test]
fn kubectl_moves_from_client_side_to_server_side_apply() {
    let server = Server::start();
    let out = server.kubectl_stdin(&["apply", "-f", "-"], &configmap(&[("k", "1")]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    // kubectl's own server-side apply may change what its client-side apply set.
    let out = server.kubectl_stdin(
        &["apply", "--server-side", "-f", "-"],
        &configmap(&[("k", "2")]),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(data(&server), serde_json::json!({"k": "2"}));
    // ... and the client-side apply after it sees its annotation in step.
    let out = server.kubectl_stdin(&["apply", "-f", "-"], &configmap(&[("k", "3")]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(data(&server), serde_json::json!({"k": "3"}));
}
