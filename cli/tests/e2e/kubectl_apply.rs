//! kubectl's object-file commands with its default validation on (no
//! `--validate=false` anywhere): apply, create -f, replace, edit, diff,
//! explain and get all, as a user types them. kubectl finds the
//! `fieldValidation` parameter in the server's OpenAPI v3 documents, sends
//! `fieldValidation=Strict` and leaves validation to the server.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use super::support::{Server, assert_contains, stderr, stdout};

/// `kubectl edit configmap edited` with `editor` as the editor.
fn edit_with(server: &Server, editor: &Path) -> Output {
    server
        .admin()
        .command(&["edit", "configmap", "edited"])
        .env("KUBE_EDITOR", editor)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn jsonpath(server: &Server, object: &[&str], path: &str) -> String {
    let mut args = vec!["get"];
    args.extend_from_slice(object);
    let template = format!("jsonpath={path}");
    args.extend(["-o", &template]);
    server.kubectl_ok(&args)
}

fn deployment(replicas: u32, tier: &str, env: &[(&str, &str)]) -> String {
    let env: String = env
        .iter()
        .map(|(n, v)| format!("        - name: {n}\n          value: \"{v}\"\n"))
        .collect();
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
{tier}spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: main
        image: busybox
        env:
{env}",
        tier = if tier.is_empty() {
            String::new()
        } else {
            format!("    tier: {tier}\n")
        },
    )
}

#[test]
fn apply_create_modify_remove_converges() {
    let server = Server::start();
    let out = server.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        &deployment(1, "front", &[("A", "1"), ("B", "2")]),
    );
    assert_eq!(out.trim(), "deployment.apps/web created");
    let applied = jsonpath(
        &server,
        &["deployment", "web"],
        "{.metadata.annotations.kubectl\\.kubernetes\\.io/last-applied-configuration}",
    );
    assert_contains(&applied, "\"replicas\":1");

    // Modify a field, drop a label and a list entry (merged by name).
    let out = server.kubectl_stdin_ok(&["apply", "-f", "-"], &deployment(3, "", &[("A", "10")]));
    assert_eq!(out.trim(), "deployment.apps/web configured");
    assert_eq!(
        jsonpath(&server, &["deployment", "web"], "{.spec.replicas}"),
        "3"
    );
    assert_eq!(
        jsonpath(&server, &["deployment", "web"], "{.metadata.labels}"),
        r#"{"app":"web"}"#
    );
    assert_eq!(
        jsonpath(
            &server,
            &["deployment", "web"],
            "{.spec.template.spec.containers[0].env}"
        ),
        r#"[{"name":"A","value":"10"}]"#
    );
    // A field set by someone else survives apply (three-way merge)...
    server.kubectl_ok(&["label", "deployment", "web", "owner=ops"]);
    let out = server.kubectl_stdin_ok(&["apply", "-f", "-"], &deployment(3, "", &[("A", "10")]));
    assert_eq!(out.trim(), "deployment.apps/web unchanged");
    assert_eq!(
        jsonpath(&server, &["deployment", "web"], "{.metadata.labels.owner}"),
        "ops"
    );
    // ...and the applied state is what apply converged on.
    let out = server.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        &deployment(2, "back", &[("A", "10"), ("C", "3")]),
    );
    assert_eq!(out.trim(), "deployment.apps/web configured");
    assert_eq!(
        jsonpath(
            &server,
            &["deployment", "web"],
            "{.spec.replicas} {.metadata.labels.tier} {.spec.template.spec.containers[0].env[*].name}"
        ),
        "2 back A C"
    );
}

#[test]
fn unknown_fields_fail_by_default_and_warn_on_request() {
    let server = Server::start();
    let manifest = "apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  colour: red
data:
  a: \"1\"
";
    let err = server.kubectl_stdin_err(&["apply", "-f", "-"], manifest);
    assert_contains(
        &err,
        "strict decoding error: unknown field \"metadata.colour\"",
    );
    let err = server.kubectl_stdin_err(&["create", "-f", "-"], manifest);
    assert_contains(&err, "unknown field \"metadata.colour\"");
    assert!(
        !server
            .kubectl(&["get", "configmap", "settings"])
            .status
            .success()
    );

    let out = server.kubectl_stdin(&["apply", "--validate=warn", "-f", "-"], manifest);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Warning: unknown field \"metadata.colour\""),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        jsonpath(&server, &["configmap", "settings"], "{.data.a}"),
        "1"
    );
}

#[test]
fn create_multi_document_and_list_then_replace() {
    let server = Server::start();
    let docs = "apiVersion: v1
kind: ConfigMap
metadata:
  name: one
data:
  k: v
---
apiVersion: v1
kind: Secret
metadata:
  name: two
stringData:
  password: hunter2
";
    let out = server.kubectl_stdin_ok(&["create", "-f", "-"], docs);
    assert_contains(&out, "configmap/one created");
    assert_contains(&out, "secret/two created");

    let list = r#"{"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "three"}, "data": {"num": "3"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "four"}, "data": {"num": "4"}}]}"#;
    let out = server.kubectl_stdin_ok(&["create", "-f", "-"], list);
    assert_contains(&out, "configmap/three created");
    assert_contains(&out, "configmap/four created");

    let mut live = server.kubectl_ok(&["get", "configmap", "three", "-o", "yaml"]);
    live = live.replace("num: \"3\"", "num: \"33\"");
    let out = server.kubectl_stdin_ok(&["replace", "-f", "-"], &live);
    assert_eq!(out.trim(), "configmap/three replaced");
    assert_eq!(
        jsonpath(&server, &["configmap", "three"], "{.data.num}"),
        "33"
    );
    // A stale resourceVersion is a conflict, as upstream.
    let err = server.kubectl_stdin_err(&["replace", "-f", "-"], &live);
    assert_contains(&err, "the object has been modified");
}

#[test]
fn edit_with_a_scripted_editor() {
    let server = Server::start();
    server.kubectl_ok(&["create", "configmap", "edited", "--from-literal=colour=red"]);
    let editor = server.dir.path().join("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\nsed -i 's/colour: red/colour: blue/' \"$1\"\n",
    )
    .unwrap();
    let status = Command::new("chmod")
        .arg("+x")
        .arg(&editor)
        .status()
        .unwrap();
    assert!(status.success());
    let out = edit_with(&server, &editor);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "configmap/edited edited");
    assert_eq!(
        jsonpath(&server, &["configmap", "edited"], "{.data.colour}"),
        "blue"
    );

    // An editor that adds an unknown field: the server refuses it and
    // kubectl reports the field.
    std::fs::write(
        &editor,
        "#!/bin/sh\nsed -i 's/^metadata:/metadata:\\n  colour: green/' \"$1\"\n",
    )
    .unwrap();
    let out = edit_with(&server, &editor);
    assert!(!out.status.success());
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert_contains(&text, "unknown field \"metadata.colour\"");
}

#[test]
fn diff_uses_server_dry_run() {
    let server = Server::start();
    let manifest = deployment(1, "front", &[("A", "1")]);
    server.kubectl_stdin_ok(&["apply", "-f", "-"], &manifest);
    let out = server.kubectl_stdin(&["diff", "-f", "-"], &manifest);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));

    let changed = deployment(4, "front", &[("A", "1")]);
    let out = server.kubectl_stdin(&["diff", "-f", "-"], &changed);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert_contains(&text, "-  replicas: 1");
    assert_contains(&text, "+  replicas: 4");
    // Nothing was written.
    assert_eq!(
        jsonpath(&server, &["deployment", "web"], "{.spec.replicas}"),
        "1"
    );
}

#[test]
fn explain_and_get_all() {
    let server = Server::start();
    let out = server.kubectl_ok(&["explain", "pods.spec.containers"]);
    assert_contains(&out, "KIND:       Pod");
    assert_contains(&out, "FIELD: containers <[]Container>");
    assert_contains(&out, "image\t<string>");
    assert_contains(&out, "Container image name.");
    let out = server.kubectl_ok(&["explain", "deployment.spec.replicas"]);
    assert_contains(&out, "GROUP:      apps");
    assert_contains(&out, "FIELD: replicas <integer>");
    // The OpenAPI v2 (protobuf) rendering.
    let out = server.kubectl_ok(&[
        "explain",
        "pods.spec.containers.image",
        "--output=plaintext-openapiv2",
    ]);
    assert_contains(&out, "FIELD:    image <string>");
    assert_contains(&out, "Container image name.");

    server.kubectl_stdin_ok(&["apply", "-f", "-"], &deployment(1, "", &[("A", "1")]));
    server.kubectl_ok(&["create", "service", "clusterip", "web", "--tcp=80:8080"]);
    let out = server.kubectl_ok(&["get", "all"]);
    assert_contains(&out, "deployment.apps/web");
    assert_contains(&out, "service/web");
    // Configuration objects are not in the "all" category.
    server.kubectl_ok(&["create", "configmap", "not-in-all"]);
    assert!(!server.kubectl_ok(&["get", "all"]).contains("not-in-all"));
}
