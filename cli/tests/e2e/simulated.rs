//! The simulated node runtime (`--simulated-nodes`): hollow nodes that register,
//! stay Ready and run pods instantly.

use std::time::Duration;

use super::support::{Server, eventually};

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn pod_manifest(name: &str, node: &str, restart: &str, annotations: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","annotations":{{{annotations}}}}},
            "spec":{{"nodeName":"{node}","restartPolicy":"{restart}","containers":[{{"name":"main","image":"busybox"}}]}}}}"#
    )
}

fn phase(server: &Server, name: &str) -> String {
    let pod = json(&server.kubectl_ok(&["get", "pod", name, "-o", "json"]));
    pod["status"]["phase"].as_str().unwrap_or("").to_string()
}

#[test]
fn simulated_nodes_register_and_run_pods() {
    let server = Server::start_with(&["--disable-agent", "--simulated-nodes", "3"]);
    let nodes = eventually(Duration::from_secs(30), "three Ready nodes", || {
        let list = json(&server.kubectl_ok(&["get", "nodes", "-o", "json"]));
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let ready = items
            .iter()
            .filter(|n| {
                n["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
            })
            .count();
        (ready == 3).then_some(items)
    });
    for node in &nodes {
        assert_eq!(
            node["status"]["nodeInfo"]["containerRuntimeVersion"], "simulated://0.1.0",
            "simulated nodes say so"
        );
        assert_eq!(node["status"]["allocatable"]["pods"], "110");
    }
    let lease = json(&server.kubectl_ok(&[
        "get",
        "lease",
        "-n",
        "kube-node-lease",
        "sim-node-1",
        "-o",
        "json",
    ]));
    assert_eq!(lease["spec"]["holderIdentity"], "sim-node-1");

    // A long-running pod goes Running with an IP and Ready.
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        &pod_manifest("web", "sim-node-0", "Always", ""),
    );
    eventually(Duration::from_secs(20), "web Running", || {
        (phase(&server, "web") == "Running").then_some(())
    });
    let web = json(&server.kubectl_ok(&["get", "pod", "web", "-o", "json"]));
    assert!(
        web["status"]["podIP"]
            .as_str()
            .is_some_and(|ip| ip.starts_with("100.64.0.")),
        "{web}"
    );
    assert_eq!(web["status"]["containerStatuses"][0]["ready"], true);

    // Pods that do not restart finish: 0 → Succeeded, non-zero → Failed.
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        &pod_manifest("ok", "sim-node-1", "Never", ""),
    );
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        &pod_manifest(
            "bad",
            "sim-node-2",
            "Never",
            r#""simulated.skiff.dev/exit-code":"2""#,
        ),
    );
    eventually(Duration::from_secs(20), "ok Succeeded", || {
        (phase(&server, "ok") == "Succeeded").then_some(())
    });
    eventually(Duration::from_secs(20), "bad Failed", || {
        (phase(&server, "bad") == "Failed").then_some(())
    });

    // Graceful deletion completes because the node confirms it.
    server.kubectl_ok(&["delete", "pod", "web", "--timeout=20s"]);
    server.kubectl_err(&["get", "pod", "web"]);
}
