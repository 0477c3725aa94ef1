//! Admission webhooks with a real `skiff server` and real kubectl, against
//! an HTTPS webhook this test serves (its CA given as the caBundle): a
//! mutating webhook reached through `clientConfig.service` (a selector-less
//! Service and a hand-written EndpointSlice pointing at loopback) labels
//! what kubectl creates; a validating one reached by URL refuses in
//! upstream's words; a webhook that is down fails writes under
//! `failurePolicy: Fail` and is skipped under `Ignore`; a slow one runs
//! into its timeout.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use skiff_testkit::admission::review_answer;
use skiff_testkit::pki::TestCa;

use super::support::{Server, assert_contains, free_port};

/// What the test webhook answers: a patch adding `mutated=yes` on
/// `/mutate`, a refusal of names starting with `bad-` on `/validate`,
/// and an allowed answer after three seconds on `/slow`.
fn answer(path: &str, request: &Value) -> Value {
    match path {
        "/mutate" => {
            let ops = if request["object"]["metadata"]["labels"].is_object() {
                json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
            };
            json!({"allowed": true, "patchType": "JSONPatch",
                "patch": BASE64.encode(ops.to_string())})
        }
        "/validate" if request["name"].as_str().unwrap_or("").starts_with("bad-") => {
            json!({"allowed": false, "status": {"code": 403, "reason": "Forbidden",
                "message": "names starting with bad- are refused"}})
        }
        _ => json!({"allowed": true}),
    }
}

/// The webhook's CA and the port it serves on, with a certificate for
/// `hooks.webhooks.svc` and 127.0.0.1; it runs until the test ends.
fn start_webhook() -> (TestCa, u16) {
    let ca = TestCa::new();
    let port =
        skiff_testkit::https::serve(&ca, &["hooks.webhooks.svc", "127.0.0.1"], |path, body| {
            Box::pin(async move {
                let review: Value = serde_json::from_slice(&body).unwrap_or_default();
                if path == "/slow" {
                    tokio::time::sleep(Duration::from_secs(3)).await;
                }
                let out = review_answer(&review, answer(&path, &review["request"]));
                (200, out.to_string())
            })
        });
    (ca, port)
}

fn hook(name: &str, client_config: Value, extra: Value) -> Value {
    let mut hook = json!({"name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
            "resources": ["configmaps"]}],
        "clientConfig": client_config});
    for (k, v) in extra.as_object().into_iter().flatten() {
        hook[k] = v.clone();
    }
    hook
}

fn create(server: &Server, object: Value) {
    server.kubectl_stdin_ok(&["create", "-f", "-"], &object.to_string());
}

fn configuration(kind: &str, name: &str, hooks: Vec<Value>) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": name}, "webhooks": hooks})
}

#[test]
fn kubectl_sees_a_webhooks_label_and_its_refusal() {
    let server = Server::start();
    let (ca, port) = start_webhook();
    let bundle = ca.bundle();
    server.kubectl_ok(&["create", "namespace", "webhooks"]);
    create(
        &server,
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "hooks", "namespace": "webhooks"},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}}),
    );
    create(
        &server,
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "hooks-loopback", "namespace": "webhooks",
                "labels": {"kubernetes.io/service-name": "hooks"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}),
    );
    create(
        &server,
        configuration(
            "MutatingWebhookConfiguration",
            "label",
            vec![hook(
                "label.e2e.skiff.dev",
                json!({"service": {"namespace": "webhooks", "name": "hooks", "path": "/mutate"},
                    "caBundle": bundle}),
                json!({}),
            )],
        ),
    );
    create(
        &server,
        configuration(
            "ValidatingWebhookConfiguration",
            "names",
            vec![hook(
                "names.e2e.skiff.dev",
                json!({"url": format!("https://127.0.0.1:{port}/validate"), "caBundle": bundle}),
                json!({}),
            )],
        ),
    );
    let listed = server.kubectl_ok(&["get", "mutatingwebhookconfigurations"]);
    let header: Vec<&str> = listed.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "WEBHOOKS", "AGE"], "{listed}");
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("label ") && l.split_whitespace().nth(1) == Some("1")),
        "{listed}"
    );

    server.kubectl_ok(&["create", "configmap", "good", "--from-literal=k=v"]);
    let shown = server.kubectl_ok(&["get", "configmap", "good", "--show-labels"]);
    assert_contains(&shown, "mutated=yes");

    let refused = server.kubectl_err(&["create", "configmap", "bad-one"]);
    assert_contains(
        &refused,
        "admission webhook \"names.e2e.skiff.dev\" denied the request: names starting with bad- are refused",
    );
    let missing = server.kubectl_err(&["get", "configmap", "bad-one"]);
    assert_contains(&missing, "NotFound");
}

#[test]
fn failure_policies_decide_when_a_webhook_is_down_or_slow() {
    let server = Server::start();
    let (ca, port) = start_webhook();
    let bundle = ca.bundle();
    let down = free_port();
    let selected = |value: &str| json!({"objectSelector": {"matchLabels": {"hook": value}}});
    create(
        &server,
        configuration(
            "ValidatingWebhookConfiguration",
            "failing",
            vec![
                hook(
                    "down.e2e.skiff.dev",
                    json!({"url": format!("https://127.0.0.1:{down}/validate"), "caBundle": bundle}),
                    selected("down"),
                ),
                hook(
                    "down-ignored.e2e.skiff.dev",
                    json!({"url": format!("https://127.0.0.1:{down}/validate"), "caBundle": bundle}),
                    json!({"failurePolicy": "Ignore",
                        "objectSelector": {"matchLabels": {"hook": "down-ignored"}}}),
                ),
                hook(
                    "slow.e2e.skiff.dev",
                    json!({"url": format!("https://127.0.0.1:{port}/slow"), "caBundle": bundle}),
                    json!({"timeoutSeconds": 1,
                        "objectSelector": {"matchLabels": {"hook": "slow"}}}),
                ),
            ],
        ),
    );
    let configmap = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"hook": name}}})
        .to_string()
    };
    let err = server.kubectl_stdin_err(&["create", "-f", "-"], &configmap("down"));
    assert_contains(
        &err,
        &format!(
            "Internal error occurred: failed calling webhook \"down.e2e.skiff.dev\": failed to call webhook: Post \"https://127.0.0.1:{down}/validate?timeout=10s\": dial tcp 127.0.0.1:{down}: connect: connection refused"
        ),
    );
    // Ignore lets the write through.
    server.kubectl_stdin_ok(&["create", "-f", "-"], &configmap("down-ignored"));
    let started = std::time::Instant::now();
    let err = server.kubectl_stdin_err(&["create", "-f", "-"], &configmap("slow"));
    assert!(
        err.contains("failed calling webhook \"slow.e2e.skiff.dev\"")
            && err.contains("context deadline exceeded"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the 1 s timeout was enforced"
    );
    server.kubectl_ok(&["get", "configmap", "down-ignored"]);
}
