//! Service networking on real containerd (issue #8): busybox `httpd`
//! backends that each serve their own hostname, reached through the service
//! proxy's nftables rules — from a pod through the ClusterIP, from the host
//! through the ClusterIP, a NodePort, a LoadBalancer's EXTERNAL-IP (from
//! ServiceLB) and an external IP; balanced over three replicas; a deleted
//! backend no longer answers once its endpoint is gone; a pod reaches
//! itself through its own Service (hairpin); a container is told where the
//! Services are, and what it is told reaches the API with the certificate
//! checked (as an in-cluster client does). The server gets
//! its own service CIDR and nftables table so it cannot meet the rules of
//! other servers on the machine. Needs root (containerd, runc, CNI, nft).

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use skiff_node::agent::pod::logs::{self, LogOptions, LogTarget};
use skiff_node::images::BUSYBOX_IMAGE;

use super::containerd::{
    import_busybox, internal_ip, pod, run_cidr, run_with_node, wait_node_ready,
};
use super::support::{Server, apply, assert_contains, endpoint_slices, eventually, json};

const NODE: &str = "e2e-services";

/// `GET /` from the host; the body, trimmed.
fn host_get(address: SocketAddr) -> Result<String, String> {
    let mut stream =
        TcpStream::connect_timeout(&address, Duration::from_secs(3)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(3)))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(b"GET / HTTP/1.0\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| e.to_string())?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP response: {response:?}"))?;
    if !head.starts_with("HTTP/1.") || !head.contains(" 200 ") {
        return Err(head.to_string());
    }
    Ok(body.trim().to_string())
}

/// A container command: serve the pod's hostname on :8080 with httpd.
const SERVE_HOSTNAME: &str =
    "mkdir -p /tmp/www && hostname > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www";

/// A Deployment of `replicas` busybox httpd pods labelled `app=<name>`
/// that serve their hostname on their port `http` (8080), ready once it
/// accepts connections.
pub(super) fn backend_deployment(name: &str, replicas: u32) -> String {
    format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{name}"}},
           "spec":{{"replicas":{replicas},"selector":{{"matchLabels":{{"app":"{name}"}}}},
             "template":{{"metadata":{{"labels":{{"app":"{name}"}}}},
               "spec":{{"terminationGracePeriodSeconds":30,"containers":[{{
                 "name":"httpd","image":"{BUSYBOX_IMAGE}","command":["sh","-c","{SERVE_HOSTNAME}"],
                 "ports":[{{"containerPort":8080,"name":"http"}}],
                 "readinessProbe":{{"tcpSocket":{{"port":8080}},"periodSeconds":1}}}}]}}}}}}}}"#
    )
}

/// Ready endpoint addresses of `service`'s slices.
fn ready_endpoints(server: &Server, service: &str) -> BTreeSet<String> {
    let selector = format!("kubernetes.io/service-name={service}");
    endpoint_slices(server, "default", &selector)
        .iter()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["conditions"]["ready"] != false)
        .filter_map(|e| e["addresses"][0].as_str().map(String::from))
        .collect()
}

/// Hostnames of the Running pods labelled `app=<app>` by pod IP.
fn backends(server: &Server, app: &str) -> Vec<(String, String)> {
    let list =
        json(&server.kubectl_ok(&["get", "pods", "-l", &format!("app={app}"), "-o", "json"]));
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| {
            p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null()
        })
        .filter_map(|p| {
            Some((
                p["status"]["podIP"].as_str()?.to_string(),
                p["metadata"]["name"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// Runs a pod that fetches `url` `times` times and returns its log lines
/// (each a body, or `FAIL`).
fn fetch_from_pod(server: &Server, name: &str, url: &str, times: u32) -> Vec<String> {
    // busybox 1.35's `wget -T` crashes; `busybox timeout` bounds each try.
    let script = format!(
        "for i in $(seq 1 {times}); do busybox timeout 5 wget -q -O - {url} || echo FAIL; done"
    );
    pod_output(server, name, &script, serde_json::json!([]))
}

/// The lines a pod `name` printed running `script` (with the container
/// variables `env`) to its end.
fn pod_output(server: &Server, name: &str, script: &str, env: serde_json::Value) -> Vec<String> {
    apply(
        server,
        &serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": NODE, "restartPolicy": "Never", "containers": [{
                "name": "main", "image": BUSYBOX_IMAGE, "command": ["sh", "-c", script],
                "env": env}]}})
        .to_string(),
    );
    let done = eventually(
        Duration::from_secs(120),
        &format!("{name} Succeeded"),
        || {
            let p = pod(server, name);
            (p["status"]["phase"] == "Succeeded" || p["status"]["phase"] == "Failed").then_some(p)
        },
    );
    read_log(server, &done)
}

fn read_log(server: &Server, pod: &serde_json::Value) -> Vec<String> {
    let log_root = server.data_dir().join("agent/logs/pods");
    let log = logs::read(
        &LogTarget {
            log_root: &log_root,
            namespace: "default",
            name: pod["metadata"]["name"].as_str().unwrap_or(""),
            uid: pod["metadata"]["uid"].as_str().unwrap_or(""),
            container: "main",
        },
        &LogOptions::default(),
    )
    .expect("container log");
    String::from_utf8_lossy(&log)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The test's own proxy table, deleted when the test ends (passed or
/// failed), after its server and what it started are gone.
struct ProxyTable(String);

impl Drop for ProxyTable {
    fn drop(&mut self) {
        let _ = skiff_proxy::Nft::new().delete_table(skiff_proxy::Family::Ip, &self.0);
    }
}

#[test]
fn services_reach_pods_through_the_proxy_rules() {
    let tag = std::process::id() % 100_000;
    let table = ProxyTable(format!("skiff-e2e-{tag}"));
    let service_cidr = run_cidr(236);
    run_with_node(
        "sksv",
        &run_cidr(235),
        NODE,
        &["--service-cidr", &service_cidr, "--proxy-table", &table.0],
        |server| scenario(server, &table.0),
    );
}

fn scenario(server: &mut Server, table: &str) {
    let node = wait_node_ready(server, NODE);
    let node_ip: std::net::IpAddr = internal_ip(&node).parse().expect("node InternalIP");
    import_busybox(server);

    // One backend behind a NodePort Service.
    apply(server, &backend_deployment("web", 1));
    apply(
        server,
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc-b"},
           "spec":{"type":"NodePort","selector":{"app":"web"},
             "ports":[{"name":"http","port":80,"targetPort":"http"}]}}"#,
    );
    let svc = json(&server.kubectl_ok(&["get", "service", "svc-b", "-o", "json"]));
    let cluster_ip: std::net::IpAddr = svc["spec"]["clusterIP"]
        .as_str()
        .and_then(|ip| ip.parse().ok())
        .expect("cluster IP");
    let node_port = svc["spec"]["ports"][0]["nodePort"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .expect("node port");
    let first = eventually(Duration::from_secs(120), "one web backend", || {
        let b = backends(server, "web");
        (b.len() == 1 && ready_endpoints(server, "svc-b").len() == 1).then_some(b)
    });
    let first_name = first[0].1.clone();
    let via_cluster_ip = SocketAddr::new(cluster_ip, 80);
    let answer = eventually(
        Duration::from_secs(30),
        "host reaches the ClusterIP",
        || host_get(via_cluster_ip).ok(),
    );
    assert_eq!(answer, first_name, "the backend serves its hostname");
    let nft = skiff_proxy::Nft::new()
        .list_table(skiff_proxy::Family::Ip, table)
        .expect("nft")
        .expect("the proxy's table exists");
    assert_contains(&nft, &format!("{cluster_ip} . tcp . 80"));

    // Pod → ClusterIP.
    let lines = fetch_from_pod(server, "client-1", &format!("http://{cluster_ip}/"), 3);
    assert_eq!(
        lines,
        vec![first_name.clone(); 3],
        "pod through the ClusterIP"
    );

    in_cluster_client(server, &cluster_ip.to_string());

    // Host → NodePort on the node's address, and on 127.0.0.1 (as k3s
    // answers there).
    let via_node_port = SocketAddr::new(node_ip, node_port);
    assert_eq!(host_get(via_node_port).as_deref(), Ok(first_name.as_str()));
    let via_loopback = SocketAddr::from(([127, 0, 0, 1], node_port));
    assert_eq!(host_get(via_loopback).as_deref(), Ok(first_name.as_str()));

    // Three replicas: every one answers.
    server.kubectl_ok(&["scale", "deployment", "web", "--replicas=3"]);
    let three = eventually(Duration::from_secs(120), "three web backends", || {
        let b = backends(server, "web");
        (b.len() == 3 && ready_endpoints(server, "svc-b").len() == 3).then_some(b)
    });
    let names: BTreeSet<String> = three.iter().map(|(_, n)| n.clone()).collect();
    let seen = eventually(Duration::from_secs(30), "answers from all three", || {
        let mut seen = BTreeSet::new();
        for _ in 0..60 {
            seen.insert(host_get(via_cluster_ip).ok()?);
            if seen == names {
                return Some(seen);
            }
        }
        None
    });
    assert_eq!(seen, names);
    let lines = fetch_from_pod(server, "client-2", &format!("http://{cluster_ip}/"), 30);
    let from_pod: BTreeSet<String> = lines.into_iter().collect();
    assert_eq!(from_pod, names, "a pod sees every backend");

    // Delete one backend: once its endpoint is gone, no request reaches it
    // (it keeps serving for its 30 s grace period).
    let (gone_ip, gone_name) = three[0].clone();
    server.kubectl_ok(&["delete", "pod", &gone_name, "--wait=false"]);
    eventually(Duration::from_secs(60), "endpoint removed", || {
        (!ready_endpoints(server, "svc-b").contains(&gone_ip)).then_some(())
    });
    // The change reaches the rules within the proxy's coalescing delay.
    std::thread::sleep(Duration::from_secs(1));
    for _ in 0..40 {
        let answer = host_get(via_cluster_ip);
        assert_ne!(
            answer.as_deref(),
            Ok(gone_name.as_str()),
            "request reached the deleted backend"
        );
    }

    // A LoadBalancer Service: ServiceLB gives it the node's address as
    // EXTERNAL-IP, reachable from the host on the Service's port.
    apply(
        server,
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc-lb"},
           "spec":{"type":"LoadBalancer","selector":{"app":"web"},
             "ports":[{"name":"http","port":8081,"targetPort":8080}]}}"#,
    );
    let ingress: std::net::IpAddr = eventually(Duration::from_secs(30), "EXTERNAL-IP", || {
        let svc = json(&server.kubectl_ok(&["get", "service", "svc-lb", "-o", "json"]));
        svc["status"]["loadBalancer"]["ingress"][0]["ip"]
            .as_str()?
            .parse()
            .ok()
    });
    assert_eq!(ingress, node_ip, "ServiceLB publishes the node's address");
    let table_row = server.kubectl_ok(&["get", "service", "svc-lb"]);
    assert_contains(&table_row, &ingress.to_string());
    let live = |answer: &str| backends(server, "web").iter().any(|(_, n)| n == answer);
    let answer = eventually(Duration::from_secs(30), "EXTERNAL-IP answers", || {
        host_get(SocketAddr::new(ingress, 8081)).ok()
    });
    assert!(live(&answer), "{answer} is not a live backend");

    // spec.externalIPs are served the same way.
    let external_ip = format!("198.51.100.{}", 10 + std::process::id() % 200);
    apply(
        server,
        &format!(
            r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"svc-ext"}},
               "spec":{{"selector":{{"app":"web"}},"externalIPs":["{external_ip}"],
                 "ports":[{{"name":"http","port":8082,"targetPort":8080}}]}}}}"#
        ),
    );
    let via_external = SocketAddr::new(external_ip.parse().expect("ip"), 8082);
    let answer = eventually(Duration::from_secs(30), "external IP answers", || {
        host_get(via_external).ok()
    });
    assert!(live(&answer), "{answer} is not a live backend");

    // Hairpin: the only backend of a Service fetches from that Service.
    apply(
        server,
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"solo"},
           "spec":{"selector":{"app":"solo"},"ports":[{"port":80,"targetPort":8080}]}}"#,
    );
    let solo = json(&server.kubectl_ok(&["get", "service", "solo", "-o", "json"]));
    let solo_ip = solo["spec"]["clusterIP"]
        .as_str()
        .expect("cluster IP")
        .to_string();
    let script = format!(
        "mkdir -p /tmp/www && hostname > /tmp/www/index.html && httpd -p 8080 -h /tmp/www && \
         while true; do busybox timeout 5 wget -q -O - http://{solo_ip}/ || echo FAIL; sleep 1; done"
    );
    apply(
        server,
        &serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "solo", "labels": {"app": "solo"}},
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1, "containers": [{
                "name": "main", "image": BUSYBOX_IMAGE, "command": ["sh", "-c", script]}]}})
        .to_string(),
    );
    eventually(Duration::from_secs(90), "solo reaches itself", || {
        let p = pod(server, "solo");
        if p["status"]["phase"] != "Running" {
            return None;
        }
        read_log(server, &p)
            .iter()
            .any(|l| l == "solo")
            .then_some(())
    });
}

/// What an in-cluster client relies on: a container is told where the
/// API's Service is and where its namespace's Services are (its own
/// variables winning, and able to name those), and with its service
/// account's CA and token kubectl reaches the API at that address, the
/// certificate checked against it.
fn in_cluster_client(server: &Server, svc_b_ip: &str) {
    let account = "/var/run/secrets/kubernetes.io/serviceaccount";
    let script = format!(
        "env | grep -E '^(KUBERNETES|SVC_B|OWN|LINKED)' | sort; echo TOKEN=$(cat {account}/token); echo CA; cat {account}/ca.crt"
    );
    let env = serde_json::json!([
        {"name": "SVC_B_SERVICE_PORT", "value": "own"},
        {"name": "LINKED", "value": "$(SVC_B_SERVICE_HOST):$(SVC_B_SERVICE_PORT_HTTP)"}]);
    let lines = pod_output(server, "in-cluster", &script, env);
    let (lines, ca) = lines.split_at(lines.iter().position(|l| l == "CA").unwrap_or(lines.len()));
    let vars: std::collections::BTreeMap<&str, &str> =
        lines.iter().filter_map(|l| l.split_once('=')).collect();
    let api_ip = vars
        .get("KUBERNETES_SERVICE_HOST")
        .copied()
        .unwrap_or_default();
    let kubernetes = json(&server.kubectl_ok(&["get", "service", "kubernetes", "-o", "json"]));
    assert_eq!(
        Some(api_ip),
        kubernetes["spec"]["clusterIP"].as_str(),
        "{lines:?}"
    );
    for (name, want) in [
        ("KUBERNETES_SERVICE_PORT", "443".to_string()),
        ("KUBERNETES_SERVICE_PORT_HTTPS", "443".to_string()),
        ("KUBERNETES_PORT_443_TCP", format!("tcp://{api_ip}:443")),
        ("SVC_B_SERVICE_HOST", svc_b_ip.to_string()),
        ("SVC_B_SERVICE_PORT", "own".to_string()),
        ("SVC_B_SERVICE_PORT_HTTP", "80".to_string()),
        ("SVC_B_PORT_80_TCP_ADDR", svc_b_ip.to_string()),
        ("LINKED", format!("{svc_b_ip}:80")),
    ] {
        assert_eq!(
            vars.get(name).copied(),
            Some(want.as_str()),
            "{name}: {lines:?}"
        );
    }
    let token = vars.get("TOKEN").copied().unwrap_or_default();
    let ca_file = server.data_dir().join("in-cluster-ca.crt");
    std::fs::write(&ca_file, ca.get(1..).unwrap_or_default().join("\n")).expect("write CA");
    let url = format!("https://{api_ip}:443");
    let whoami = eventually(
        Duration::from_secs(30),
        "the API through its Service",
        || {
            let out = std::process::Command::new("kubectl")
                .args([
                    "--kubeconfig",
                    "/dev/null",
                    "--server",
                    &url,
                    "--token",
                    token,
                ])
                .arg(format!("--certificate-authority={}", ca_file.display()))
                .args([
                    "auth",
                    "whoami",
                    "-o",
                    "jsonpath={.status.userInfo.username}",
                ])
                .output()
                .expect("kubectl");
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        },
    );
    assert_eq!(whoami, "system:serviceaccount:default:default");
}
