//! NetworkPolicy enforcement on real containerd (issue #16): in a
//! namespace, a busybox httpd pod reached by `wget` from two busybox
//! clients through `kubectl exec`; a default-deny ingress policy blocks
//! both, an allow rule for pods labelled `role=client` admits the labelled
//! client only, the kubelet's probes keep the target Ready throughout, and
//! deleting the policies restores access. The server gets its own bridge,
//! pod CIDR and nftables tables. Needs root (containerd, runc, CNI, nft).

use std::time::Duration;

use skiff_node::images::BUSYBOX_IMAGE;

use super::containerd::{import_busybox, run_cidr, run_with_node, wait_node_ready};
use super::support::{Server, apply, assert_contains, condition, eventually, json};

const NODE: &str = "e2e-netpol";
const NS: &str = "np";

/// `wget` of `url` from inside pod `name` (bounded by `timeout`): the body
/// or the failure.
fn fetch_from(server: &Server, name: &str, url: &str) -> Result<String, String> {
    let out = server.kubectl(&[
        "exec", "-n", NS, name, "--", "busybox", "timeout", "3", "wget", "-q", "-O", "-", url,
    ]);
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

fn sleeper(name: &str, labels: serde_json::Value) -> String {
    serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1, "containers": [{
            "name": "main", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"]}]}})
    .to_string()
}

fn running(server: &Server, name: &str) -> serde_json::Value {
    eventually(Duration::from_secs(120), &format!("{name} Running"), || {
        let p = json(&server.kubectl_ok(&["get", "pod", "-n", NS, name, "-o", "json"]));
        let ready = condition(&p, "Ready") == Some("True");
        (p["status"]["phase"] == "Running" && ready).then_some(p)
    })
}

#[test]
fn network_policies_block_and_admit_pod_traffic() {
    run_with_node("sknp", &run_cidr(237), NODE, &[], scenario);
}

fn scenario(server: &mut Server) {
    wait_node_ready(server, NODE);
    import_busybox(server);
    server.kubectl_ok(&["create", "namespace", NS]);
    apply(
        server,
        &serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": NS, "labels": {"app": "web"}},
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1, "containers": [{
                "name": "httpd", "image": BUSYBOX_IMAGE,
                "command": ["sh", "-c",
                    "mkdir -p /tmp/www && echo web > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"],
                "ports": [{"containerPort": 8080, "name": "http"}],
                "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1,
                    "failureThreshold": 1}}]}})
        .to_string(),
    );
    apply(
        server,
        &sleeper("client", serde_json::json!({"role": "client"})),
    );
    apply(server, &sleeper("other", serde_json::json!({})));
    let web = running(server, "web");
    running(server, "client");
    running(server, "other");
    let url = format!(
        "http://{}:8080/",
        web["status"]["podIP"].as_str().expect("web's pod IP")
    );
    let reaches = |name: &str| fetch_from(server, name, &url).as_deref() == Ok("web");

    // Open without policies.
    eventually(Duration::from_secs(30), "both clients reach web", || {
        (reaches("client") && reaches("other")).then_some(())
    });

    // Default deny for ingress in the namespace: neither gets through.
    apply(
        server,
        r#"{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
           "metadata":{"name":"default-deny","namespace":"np"},
           "spec":{"podSelector":{},"policyTypes":["Ingress"]}}"#,
    );
    eventually(Duration::from_secs(30), "default deny blocks both", || {
        (!reaches("client") && !reaches("other")).then_some(())
    });
    // Dropped, not refused: wget waits until `timeout` ends it (SIGTERM).
    let blocked = fetch_from(server, "other", &url).unwrap_err();
    assert_contains(&blocked, "exit code 143");

    // Allow role=client: the labelled client only.
    apply(
        server,
        r#"{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
           "metadata":{"name":"allow-client","namespace":"np"},
           "spec":{"podSelector":{"matchLabels":{"app":"web"}},
             "ingress":[{"from":[{"podSelector":{"matchLabels":{"role":"client"}}}],
                         "ports":[{"port":"http"}]}]}}"#,
    );
    eventually(
        Duration::from_secs(30),
        "the labelled client admitted",
        || reaches("client").then_some(()),
    );
    assert!(!reaches("other"), "the unlabelled client stays blocked");
    // The kubelet's probes come from the node and are not blocked: web
    // stays Ready (one failed probe would make it NotReady).
    let web_now = json(&server.kubectl_ok(&["get", "pod", "-n", NS, "web", "-o", "json"]));
    let ready = condition(&web_now, "Ready") == Some("True");
    assert!(ready, "web stays Ready under the policies: {web_now}");

    // Deleting the policies restores access.
    server.kubectl_ok(&["delete", "networkpolicy", "-n", NS, "--all"]);
    eventually(
        Duration::from_secs(30),
        "both clients reach web again",
        || (reaches("client") && reaches("other")).then_some(()),
    );
    let _ = server.kubectl(&[
        "delete",
        "pods",
        "-n",
        NS,
        "--all",
        "--grace-period=1",
        "--timeout=60s",
    ]);
}
