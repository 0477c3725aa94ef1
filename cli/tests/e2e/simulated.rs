//! The simulated node runtime (`--simulated-nodes`): hollow nodes that register,
//! stay Ready and run pods instantly, inside the server or behind a joined
//! `skiff agent`, where each hollow node is a node identity of its own.
//! `kubectl debug` adds ephemeral containers to their pods.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use super::join::client_csrs;
use super::support::{Server, condition, eventually, json, skiff_ok, spawn_joined_agent};

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
    eventually(Duration::from_secs(30), "three Ready nodes", || {
        (ready_nodes(&server, "sim-node-").len() == 3).then_some(())
    });
    let list = json(&server.kubectl_ok(&["get", "nodes", "-o", "json"]));
    let nodes = list["items"].as_array().cloned().unwrap_or_default();
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

#[test]
fn kubectl_debug_adds_an_ephemeral_container() {
    let server = Server::start_with(&["--disable-agent", "--simulated-nodes", "1"]);
    server.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        &pod_manifest("app", "sim-node-0", "Always", ""),
    );
    eventually(Duration::from_secs(30), "app Running", || {
        (phase(&server, "app") == "Running").then_some(())
    });
    server.kubectl_ok(&[
        "debug",
        "app",
        "--image=busybox",
        "--target=main",
        "-c",
        "debugger",
        "--profile=general",
        "--",
        "sh",
    ]);
    let pod = eventually(Duration::from_secs(30), "debugger running", || {
        let pod = json(&server.kubectl_ok(&["get", "pod", "app", "-o", "json"]));
        pod["status"]["ephemeralContainerStatuses"][0]["state"]["running"]
            .is_object()
            .then_some(pod)
    });
    let debugger = &pod["spec"]["ephemeralContainers"][0];
    assert_eq!(debugger["name"], "debugger");
    assert_eq!(debugger["targetContainerName"], "main");
    assert_eq!(debugger["command"], serde_json::json!(["sh"]));
    assert_eq!(pod["status"]["phase"], "Running", "the pod keeps running");
    // A debugger once added stays as it was.
    let err = server.kubectl_err(&[
        "patch",
        "pod",
        "app",
        "--subresource=ephemeralcontainers",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/ephemeralContainers/0/image","value":"alpine"}]"#,
    ]);
    assert!(
        err.contains("existing ephemeral containers \"debugger\" may not be changed"),
        "{err}"
    );
}

fn ready_nodes(server: &Server, prefix: &str) -> Vec<String> {
    let list = json(&server.kubectl_ok(&["get", "nodes", "-o", "json"]));
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| condition(n, "Ready") == Some("True"))
        .filter_map(|n| n["metadata"]["name"].as_str().map(String::from))
        .filter(|name| name.starts_with(prefix))
        .collect()
}

fn spawn_simulated_agent(server: &Server, dir: &Path, token: &str) -> Child {
    spawn_joined_agent(
        server,
        dir,
        token,
        &["--node-name", "simjoin", "--simulated-nodes", "3"],
    )
}

fn stop(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

/// kubectl acting with hollow node `node`'s own client certificate.
fn kubectl_as_node(server: &Server, pki: &Path, args: &[&str]) -> std::process::Output {
    let ca = server.data_dir().join("tls").join("ca.crt");
    Command::new("kubectl")
        .arg("--kubeconfig=/dev/null")
        .arg(format!("--server=https://127.0.0.1:{}", server.port))
        .arg(format!("--certificate-authority={}", ca.display()))
        .arg(format!(
            "--client-certificate={}",
            pki.join("kubelet-client.crt").display()
        ))
        .arg(format!(
            "--client-key={}",
            pki.join("kubelet-client.key").display()
        ))
        .args(args)
        .output()
        .expect("run kubectl")
}

#[test]
fn a_joined_agent_runs_simulated_nodes_each_as_its_own_node() {
    let server = Server::start_with(&["--disable-agent"]);
    let token = skiff_ok(&["token", "create", "--ttl", "1h"], server.data_dir())
        .trim()
        .to_string();
    let dir = tempfile::tempdir().expect("agent dir");
    let mut agent = spawn_simulated_agent(&server, dir.path(), &token);
    let agent_log = || std::fs::read_to_string(dir.path().join("agent.log")).unwrap_or_default();
    let pki = |node: &str| -> PathBuf { dir.path().join("agent/simulated").join(node).join("pki") };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        eventually(Duration::from_secs(90), "three Ready hollow nodes", || {
            (ready_nodes(&server, "simjoin-sim-").len() == 3).then_some(())
        });
        // The agent and each hollow node asked for their own certificate.
        assert_eq!(client_csrs(&server).len(), 4);
        let whoami = kubectl_as_node(
            &server,
            &pki("simjoin-sim-1"),
            &["auth", "whoami", "-o", "json"],
        );
        let whoami = json(&String::from_utf8_lossy(&whoami.stdout));
        assert_eq!(
            whoami["status"]["userInfo"]["username"], "system:node:simjoin-sim-1",
            "{whoami}"
        );

        // A pod bound to one of them runs (simulated).
        server.kubectl_stdin(
            &["apply", "-f", "-"],
            &pod_manifest("on-sim", "simjoin-sim-1", "Always", ""),
        );
        eventually(Duration::from_secs(30), "on-sim Running", || {
            (phase(&server, "on-sim") == "Running").then_some(())
        });

        // A hollow node may write its own Node, not another's.
        let own = kubectl_as_node(
            &server,
            &pki("simjoin-sim-0"),
            &["label", "node", "simjoin-sim-0", "bench=own"],
        );
        assert!(
            own.status.success(),
            "{}",
            String::from_utf8_lossy(&own.stderr)
        );
        let other = kubectl_as_node(
            &server,
            &pki("simjoin-sim-0"),
            &["label", "node", "simjoin-sim-1", "bench=stolen"],
        );
        let stderr = String::from_utf8_lossy(&other.stderr);
        assert!(!other.status.success(), "another Node was modified");
        assert!(
            stderr.contains("Forbidden") || stderr.contains("forbidden"),
            "{stderr}"
        );
        let labels = json(&server.kubectl_ok(&["get", "node", "simjoin-sim-1", "-o", "json"]));
        assert!(
            labels["metadata"]["labels"].get("bench").is_none(),
            "{labels}"
        );

        // A restart reuses every stored certificate: no new request.
        stop(&mut agent);
        agent = spawn_simulated_agent(&server, dir.path(), &token);
        eventually(
            Duration::from_secs(60),
            "the restarted agent's nodes",
            || (agent_log().matches("simulated nodes ready").count() == 2).then_some(()),
        );
        assert_eq!(client_csrs(&server).len(), 4, "the restart asked again");
    }));
    stop(&mut agent);
    if let Err(panic) = result {
        eprintln!("agent log:\n{}\nserver log:\n{}", agent_log(), server.log());
        std::panic::resume_unwind(panic);
    }
}
