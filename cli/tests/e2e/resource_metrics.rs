//! Resource metrics on real containerd, as a user sees them: `kubectl top
//! nodes` and `kubectl top pods` show figures for a running busybox pod
//! with no metrics-server installed; the node server's `/stats/summary`
//! and `/metrics/resource` answer the cluster's admin and refuse (403) a
//! certificate user without `nodes/stats` or `nodes/metrics`; `kubectl get
//! apiservices` shows the metrics API local and available; a user without
//! RBAC rights gets 403 from the metrics API.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use rcgen::{Issuer, KeyPair};
use skiff_node::images::BUSYBOX_IMAGE;

use super::containerd::{import_busybox, run_with_node, wait_node_ready, wait_running};
use super::support::{Kubectl, Server, apply, assert_contains, eventually, json, service_account};

const NODE: &str = "e2e-metrics";

#[test]
fn kubectl_top_shows_node_and_pod_figures_and_strangers_are_refused() {
    run_with_node(
        "skm",
        "10.233.31.0/24",
        NODE,
        &["--kubelet-port", "0", "--metric-resolution", "2s"],
        |server| scenario(server),
    );
}

/// A client certificate from the cluster CA for `user` (no groups), written
/// next to the data dir; returns (cert, key) paths.
fn client_cert(server: &Server, user: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let tls = server.data_dir().join("tls");
    let ca = std::fs::read_to_string(tls.join("ca.crt")).expect("ca.crt");
    let key = KeyPair::from_pem(&std::fs::read_to_string(tls.join("ca.key")).expect("ca.key"))
        .expect("CA key");
    let issuer = Issuer::from_ca_cert_pem(&ca, key).expect("CA");
    let (cert, key) =
        skiff_apiserver::tls::new_client(&issuer, user, &[], Duration::from_secs(3600))
            .expect("client certificate");
    let cert_path = server.data_dir().join(format!("{user}.crt"));
    let key_path = server.data_dir().join(format!("{user}.key"));
    std::fs::write(&cert_path, cert).unwrap();
    std::fs::write(&key_path, key).unwrap();
    (cert_path, key_path)
}

/// GETs `path` from the node server with a client certificate; returns
/// the HTTP status and the body.
fn node_get(server: &Server, url: &str, cert: &Path, key: &Path) -> (u16, String) {
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "20",
            "-w",
            "\n%{http_code}",
            "--cacert",
        ])
        .arg(server.data_dir().join("tls").join("ca.crt"))
        .arg("--cert")
        .arg(cert)
        .arg("--key")
        .arg(key)
        .arg(url)
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// `kubectl top <what> --no-headers` once it succeeds and lists `name`,
/// waiting up to a minute for the figures; each failure's error output is
/// printed on the way.
fn top_once_listed(server: &Server, what: &str, name: &str) -> String {
    eventually(
        Duration::from_secs(60),
        &format!("kubectl top {what}"),
        || {
            let out = server.kubectl(&["top", what, "--no-headers"]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if !out.status.success() {
                eprintln!(
                    "kubectl top {what}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            (out.status.success() && text.contains(name)).then_some(text)
        },
    )
}

fn scenario(server: &Server) {
    let node = wait_node_ready(server, NODE);
    import_busybox(server);
    let spec = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "busy", "labels": {"app": "busy"}},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "main",
            "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
            // A little CPU every second, so the rate is not always zero.
            "command": ["sh", "-c", "while true; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 1; done"]}]}});
    apply(server, &spec.to_string());
    wait_running(server, "busy");

    // The node server itself, with the cluster admin's certificate...
    let address = node["status"]["addresses"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["type"] == "InternalIP"))
        .and_then(|a| a["address"].as_str())
        .expect("InternalIP")
        .to_string();
    let port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .expect("kubelet port");
    let base = format!("https://{address}:{port}");
    let tls = server.data_dir().join("tls");
    let (admin_cert, admin_key) = (tls.join("admin.crt"), tls.join("admin.key"));
    let as_admin = |path: &str| node_get(server, &format!("{base}{path}"), &admin_cert, &admin_key);
    let (code, summary) = as_admin("/stats/summary");
    assert_eq!(code, 200, "{summary}");
    let summary = json(&summary);
    assert_eq!(summary["node"]["nodeName"], NODE);
    assert!(
        summary["node"]["cpu"]["usageCoreNanoSeconds"]
            .as_u64()
            .unwrap_or(0)
            > 0
    );
    assert!(
        summary["node"]["memory"]["workingSetBytes"]
            .as_u64()
            .unwrap_or(0)
            > 0
    );
    let busy = summary["pods"]
        .as_array()
        .and_then(|pods| pods.iter().find(|p| p["podRef"]["name"] == "busy"))
        .unwrap_or_else(|| panic!("busy in {summary}"));
    assert!(
        busy["containers"][0]["memory"]["workingSetBytes"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{busy}"
    );
    // Disk, as the kubelet's Summary API reports it: the node's file
    // system, each container's logs, each pod's ephemeral storage.
    assert!(
        summary["node"]["fs"]["capacityBytes"].as_u64().unwrap_or(0) > 0,
        "{summary}"
    );
    assert!(
        busy["containers"][0]["logs"]["usedBytes"].is_u64(),
        "{busy}"
    );
    assert!(busy["ephemeral-storage"]["usedBytes"].is_u64(), "{busy}");
    let (code, metrics) = as_admin("/metrics/resource");
    assert_eq!(code, 200, "{metrics}");
    assert_contains(&metrics, "node_cpu_usage_seconds_total ");
    assert_contains(
        &metrics,
        "container_memory_working_set_bytes{container=\"main\",namespace=\"default\",pod=\"busy\"}",
    );

    // ...and, from a stranger's side, refused: a valid certificate of the
    // cluster CA is not a right to the node's figures.
    let (cert, key) = client_cert(server, "stranger");
    for (path, subresource) in [
        ("/stats/summary", "stats"),
        ("/metrics/resource", "metrics"),
    ] {
        let (code, body) = node_get(server, &format!("{base}{path}"), &cert, &key);
        assert_eq!(code, 403, "{path}: {body}");
        assert_contains(&body, &format!("subresource(s)=[{subresource}]"));
        assert!(!body.contains("usage"), "{body}");
    }

    // kubectl top nodes: the node with CPU in millicores and memory.
    let top = top_once_listed(server, "nodes", NODE);
    let row: Vec<&str> = top.split_whitespace().collect();
    assert_eq!(row[0], NODE, "{top}");
    assert!(row[1].ends_with('m'), "CPU in millicores: {top}");
    assert!(row[3].ends_with("Mi"), "memory in MiB: {top}");

    // kubectl top pods (one namespace, and all) shows the busybox pod.
    let top = top_once_listed(server, "pods", "busy");
    let row: Vec<&str> = top.split_whitespace().collect();
    assert_eq!(row[0], "busy", "{top}");
    assert!(row[1].ends_with('m'), "{top}");
    assert!(row[2].ends_with("Mi"), "{top}");
    let all = server.kubectl_ok(&["top", "pods", "-A", "-l", "app=busy", "--containers"]);
    assert!(all.contains("default") && all.contains("main"), "{all}");

    // The metrics objects themselves, as the HPA controller reads them.
    let list = json(&server.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dbusy",
    ]));
    let item = &list["items"][0];
    assert_eq!(item["metadata"]["name"], "busy", "{list}");
    assert!(item["window"].as_str().is_some(), "{list}");
    assert_eq!(item["containers"][0]["name"], "main", "{list}");

    // The metrics API is a local, available APIService, as kubectl shows.
    let row = server.kubectl_ok(&[
        "get",
        "apiservices",
        "v1beta1.metrics.k8s.io",
        "--no-headers",
    ]);
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells[..3],
        ["v1beta1.metrics.k8s.io", "Local", "True"],
        "{row}"
    );

    // A user without RBAC rights gets 403 from the metrics API.
    let stranger = service_account(server, "default", "stranger");
    let err = Kubectl::new(&stranger).err(&["top", "pods"]);
    assert!(
        err.contains("Forbidden") || err.contains("forbidden"),
        "{err}"
    );
}
