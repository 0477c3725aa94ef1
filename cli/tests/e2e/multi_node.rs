//! Several nodes on one machine (issue #16): a server and two `skiff agent`
//! hosts, each in its own network namespace behind a bridge, each agent with
//! its own containerd (`multi_node/cluster.rs`). Pods on different nodes
//! reach each other by IP (keeping their own source address) and through a
//! Service name, from both nodes, over the VXLAN overlay or host-gw routes;
//! pod traffic leaving the cluster is masqueraded; the cluster DNS answers
//! from both nodes; a default-deny NetworkPolicy cuts cross-node traffic until
//! an allow rule admits one labelled client; a node cannot register under
//! another node's name; a stopped agent's Node turns NotReady and its
//! Deployment pods come back on the other node; a deleted Node's routes go; a
//! local-path claim is provisioned on a joined agent and reclaimed by it. Needs root (namespaces,
//! containerd, runc, CNI, nft).

mod cluster;

use std::io::Read;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use skiff_node::images::BUSYBOX_IMAGE;

use super::containerd::internal_ip;
use super::support::{condition, eventually, json};
use cluster::Cluster;

/// A container command: serve the hostname at `/` and the client's address
/// at `/cgi-bin/ip` (busybox httpd's CGI sets REMOTE_ADDR) on :8080.
const SERVE: &str = "mkdir -p /tmp/www/cgi-bin && hostname > /tmp/www/index.html \
    && cd /tmp/www/cgi-bin && echo '#!/bin/sh' > ip && echo 'echo Content-Type: text/plain' >> ip \
    && echo 'echo' >> ip && echo 'echo $REMOTE_ADDR' >> ip && chmod +x ip \
    && exec httpd -f -p 8080 -h /tmp/www";

/// A pod on `node`: `web` serves (labelled app=web), else it sleeps.
fn pod(name: &str, node: &str, serve: bool) -> serde_json::Value {
    let (labels, command, probe) = if serve {
        (
            serde_json::json!({"app": "web"}),
            serde_json::json!(["sh", "-c", SERVE]),
            serde_json::json!({"tcpSocket": {"port": 8080}, "periodSeconds": 1}),
        )
    } else {
        (
            serde_json::json!({"app": "client"}),
            serde_json::json!(["sleep", "3600"]),
            serde_json::Value::Null,
        )
    };
    serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1, "containers": [{
            "name": "main", "image": BUSYBOX_IMAGE, "command": command,
            "readinessProbe": probe}]}})
}

/// Waits until pod `name` is Ready; returns its IP.
fn ready_pod_ip(cluster: &Cluster, name: &str) -> String {
    eventually(
        Duration::from_secs(120),
        &format!("pod {name} Ready"),
        || {
            let p = json(&cluster.kubectl_ok(&["get", "pod", name, "-o", "json"]));
            let ready = condition(&p, "Ready") == Some("True");
            ready.then(|| p["status"]["podIP"].as_str().map(String::from))?
        },
    )
}

/// `sh -c script` in pod `name`; its output, or why it failed.
fn exec(cluster: &Cluster, name: &str, script: &str) -> Result<String, String> {
    let out = cluster.kubectl(&["exec", name, "--", "sh", "-c", script]);
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        ))
    }
}

/// GETs `url` from pod `name` until the body is `expected` (a fresh
/// network path may need a moment: routes follow the Node annotations).
fn fetch_until(cluster: &Cluster, name: &str, url: &str, expected: &str) {
    // busybox 1.35's `wget -T` crashes; `timeout` bounds each try.
    let script = format!("busybox timeout 5 wget -q -O - {url}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = Err(String::new());
    while Instant::now() < deadline {
        // httpd gives an IPv4 client as `[::ffff:a.b.c.d]`.
        last = exec(cluster, name, &script).map(|body| {
            body.trim_start_matches("[::ffff:")
                .trim_end_matches(']')
                .to_string()
        });
        if last.as_deref() == Ok(expected) {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("{name} fetching {url}: wanted {expected:?}, last got {last:?}");
}

/// Waits until GETs of `url` from pod `name` fail (a policy may take a
/// moment to reach the node), then checks that two more fail too.
fn fetch_fails(cluster: &Cluster, name: &str, url: &str) {
    let script = format!("busybox timeout 3 wget -q -O - {url}");
    eventually(
        Duration::from_secs(60),
        &format!("{name} refused {url}"),
        || exec(cluster, name, &script).is_err().then_some(()),
    );
    for _ in 0..2 {
        let got = exec(cluster, name, &script);
        assert!(
            got.is_err(),
            "{name} reached {url} through the policy: {got:?}"
        );
    }
}

/// Pod `client-a` (address `client_ip`) on node A reaches `web-b` on node
/// B by its IP `web_ip`, with its own address as the source: pod-to-pod
/// traffic across nodes is not masqueraded, whatever the backend.
fn reaches_across_nodes(cluster: &Cluster, web_ip: &str, client_ip: &str) {
    fetch_until(
        cluster,
        "client-a",
        &format!("http://{web_ip}:8080/"),
        "web-b",
    );
    fetch_until(
        cluster,
        "client-a",
        &format!("http://{web_ip}:8080/cgi-bin/ip"),
        client_ip,
    );
}

/// The routes skiff's pod network installed on `netns` (`proto 173`), as
/// `destination via gateway dev device` lines.
fn overlay_routes(cluster: &Cluster, netns: &str) -> Vec<String> {
    let out = cluster.in_host(netns, &["ip", "-j", "route", "show", "proto", "173"]);
    let routes: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    routes
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "{} via {} dev {}",
                r["dst"].as_str().unwrap_or(""),
                r["gateway"].as_str().unwrap_or(""),
                r["dev"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn node(cluster: &Cluster, name: &str) -> serde_json::Value {
    json(&cluster.kubectl_ok(&["get", "node", name, "-o", "json"]))
}

/// Node `name` once its agent has published its end of the pod network
/// (a moment after it reports Ready).
fn published_node(cluster: &Cluster, name: &str) -> serde_json::Value {
    eventually(
        Duration::from_secs(30),
        &format!("{name} publishes its pod network end"),
        || {
            let found = node(cluster, name);
            found["metadata"]["annotations"]["flannel.alpha.coreos.com/backend-type"]
                .is_string()
                .then_some(found)
        },
    )
}

/// The address of the peer that connects to `listener` while `connect`
/// runs (a pod dialing out of the cluster).
fn peer_of_next_connection(listener: &TcpListener, connect: impl FnOnce()) -> String {
    listener.set_nonblocking(true).expect("nonblocking");
    connect();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match listener.accept() {
            Ok((mut stream, peer)) => {
                let mut buf = [0u8; 16];
                let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
                let _ = stream.read(&mut buf);
                return peer.ip().to_string();
            }
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("no connection from the pod: {e}"),
        }
    }
}

#[test]
fn multi_node_vxlan_pods_services_dns_failover_and_node_names() {
    let mut cluster = Cluster::start(1, "vxlan", &['a', 'b']);
    let (a, b) = (
        cluster.agents[0].node.clone(),
        cluster.agents[1].node.clone(),
    );
    let (netns_a, ip_a) = (
        cluster.agents[0].netns.clone(),
        cluster.agents[0].ip.clone(),
    );

    // Each node publishes its VTEP; each routes to the other's pod CIDR
    // through the VXLAN device.
    let node_b = published_node(&cluster, &b);
    let annotations = &node_b["metadata"]["annotations"];
    assert_eq!(
        annotations["flannel.alpha.coreos.com/backend-type"],
        "vxlan"
    );
    assert_eq!(
        annotations["flannel.alpha.coreos.com/public-ip"],
        cluster.agents[1].ip.as_str()
    );
    let data: serde_json::Value = serde_json::from_str(
        annotations["flannel.alpha.coreos.com/backend-data"]
            .as_str()
            .expect("backend data"),
    )
    .expect("backend data is JSON");
    assert_eq!(data["VNI"], 1);
    assert!(
        data["VtepMAC"].as_str().is_some_and(|m| m.len() == 17),
        "{data}"
    );
    let cidr_b = node_b["spec"]["podCIDR"]
        .as_str()
        .expect("pod CIDR")
        .to_string();
    let vtep_b = cidr_b.split('/').next().unwrap_or_default().to_string();
    let want = format!("{cidr_b} via {vtep_b} dev skiff.vxlan");
    eventually(Duration::from_secs(30), "A's route to B's pods", || {
        overlay_routes(&cluster, &netns_a)
            .contains(&want)
            .then_some(())
    });

    cluster.apply(&pod("web-b", &b, true));
    cluster.apply(&pod("client-a", &a, false));
    cluster.apply(&pod("client-b", &b, false));
    cluster.apply(&serde_json::json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}));
    let web_ip = ready_pod_ip(&cluster, "web-b");
    let client_a_ip = ready_pod_ip(&cluster, "client-a");
    ready_pod_ip(&cluster, "client-b");

    // Pods get the link MTU less VXLAN's 50 bytes.
    assert_eq!(
        exec(&cluster, "client-a", "cat /sys/class/net/eth0/mtu"),
        Ok("1450".to_string())
    );
    reaches_across_nodes(&cluster, &web_ip, &client_a_ip);
    // ... and through the Service's name, from both nodes (the proxy runs
    // on each agent; the name comes from the cluster DNS on the server).
    let service = "web.default.svc.cluster.local";
    fetch_until(&cluster, "client-a", &format!("http://{service}/"), "web-b");
    fetch_until(&cluster, "client-b", &format!("http://{service}/"), "web-b");
    let cluster_ip = cluster
        .kubectl_ok(&["get", "service", "web", "-o", "jsonpath={.spec.clusterIP}"])
        .trim()
        .to_string();
    for client in ["client-a", "client-b"] {
        let answer = exec(&cluster, client, &format!("nslookup {service}"))
            .unwrap_or_else(|e| panic!("nslookup from {client}: {e}"));
        assert!(answer.contains(&cluster_ip), "{client}: {answer}");
    }

    // A default-deny NetworkPolicy in the namespace cuts the cross-node path
    // to web-b until an allow rule admits pods labelled role=client, and
    // only them: enforced on B for traffic from A's pods.
    cluster.apply(&pod("other-a", &a, false));
    ready_pod_ip(&cluster, "other-a");
    cluster.kubectl_ok(&["label", "pod", "client-a", "role=client"]);
    cluster.apply(&serde_json::json!({"apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy", "metadata": {"name": "default-deny"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}));
    let web_url = format!("http://{web_ip}:8080/");
    fetch_fails(&cluster, "client-a", &web_url);
    fetch_fails(&cluster, "other-a", &web_url);
    cluster.apply(&serde_json::json!({"apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy", "metadata": {"name": "web-from-clients"},
        "spec": {"podSelector": {"matchLabels": {"app": "web"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}}],
                "ports": [{"protocol": "TCP", "port": 8080}]}]}}));
    fetch_until(&cluster, "client-a", &web_url, "web-b");
    fetch_fails(&cluster, "other-a", &web_url);
    cluster.kubectl_ok(&[
        "delete",
        "networkpolicy",
        "default-deny",
        "web-from-clients",
    ]);
    fetch_until(&cluster, "other-a", &web_url, "web-b");

    // Traffic leaving the cluster leaves with the node's address.
    let gateway = format!("10.209.{}.1", cluster.n);
    let listener = TcpListener::bind((gateway.as_str(), 0)).expect("listen on the switch");
    let port = listener.local_addr().expect("port").port();
    let peer = peer_of_next_connection(&listener, || {
        let _ = exec(
            &cluster,
            "client-a",
            &format!("echo hi | busybox timeout 5 nc {gateway} {port}"),
        );
    });
    assert_eq!(
        peer, ip_a,
        "a pod's traffic out of the cluster is masqueraded"
    );

    // Node A's credentials cannot register as B: the agent is refused and
    // B's Node is untouched.
    let impostor_dir = cluster.dir.path().join("impostor");
    let token_a = cluster.agents[0].token.clone();
    let mut impostor =
        cluster.spawn_agent(&cluster.agents[0], &b, &token_a, &impostor_dir, "-impostor");
    let status = eventually(
        Duration::from_secs(120),
        "the impostor agent to exit",
        || impostor.try_wait().ok().flatten(),
    );
    assert!(
        !status.success(),
        "an agent registered under another node's name"
    );
    let log = cluster.log(&format!("{b}-impostor"));
    assert!(
        log.contains("forbidden") || log.contains("Forbidden"),
        "the agent's error names the refusal:\n{log}"
    );
    assert_eq!(internal_ip(&node(&cluster, &b)), cluster.agents[1].ip);
    // Nor can another host join with the cluster's own join token under B's
    // name: its node password differs from the one B registered with.
    let thief_dir = cluster.dir.path().join("thief");
    let join_token = cluster.join_token();
    let mut thief = cluster.spawn_agent(&cluster.agents[0], &b, &join_token, &thief_dir, "-thief");
    let status = eventually(
        Duration::from_secs(120),
        "the agent joining under a taken name to exit",
        || thief.try_wait().ok().flatten(),
    );
    assert!(!status.success(), "a second host took over node {b}");
    let log = cluster.log(&format!("{b}-thief"));
    assert!(
        log.contains("node password"),
        "the agent's error names the node password:\n{log}"
    );
    assert_eq!(internal_ip(&node(&cluster, &b)), cluster.agents[1].ip);
    // A host with a wrong token (the cluster's CA hash, another secret) is
    // refused at the first request, and says why.
    let (hash, _) = join_token
        .split_once("::")
        .expect("K10<hash>::<credential>");
    let wrong_dir = cluster.dir.path().join("wrong-token");
    let wrong_token = format!("{hash}::abcdef.0123456789abcdef");
    let mut wrong = cluster.spawn_agent(
        &cluster.agents[0],
        "wrong-token",
        &wrong_token,
        &wrong_dir,
        "-wrong",
    );
    let status = eventually(
        Duration::from_secs(60),
        "the agent with a wrong token to exit",
        || wrong.try_wait().ok().flatten(),
    );
    assert!(!status.success(), "an agent joined with a wrong token");
    let log = cluster.log("wrong-token-wrong");
    assert!(
        log.contains("refused the join token (401)") && log.contains("wrong or has expired"),
        "the agent's error names the wrong token:\n{log}"
    );
    assert!(
        !cluster
            .kubectl(&["get", "node", "wrong-token"])
            .status
            .success(),
        "a Node was registered with a wrong token"
    );

    // A Deployment preferring B, tolerating B's loss for 5 s only.
    let toleration = |key: &str| {
        serde_json::json!({"key": key, "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": 5})
    };
    cluster.apply(
        &serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "spread"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "spread"}},
          "template": {"metadata": {"labels": {"app": "spread"}},
            "spec": {"terminationGracePeriodSeconds": 1,
              "tolerations": [toleration("node.kubernetes.io/unreachable"),
                              toleration("node.kubernetes.io/not-ready")],
              "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": [
                  {"key": "kubernetes.io/hostname", "operator": "In", "values": [b.clone()]}]}}]}},
              "containers": [{"name": "main", "image": BUSYBOX_IMAGE,
                "command": ["sleep", "3600"]}]}}}}),
    );
    let running_on = |cluster: &Cluster, host: &str| -> usize {
        let list = json(&cluster.kubectl_ok(&["get", "pods", "-l", "app=spread", "-o", "json"]));
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| {
                p["spec"]["nodeName"] == host
                    && p["status"]["phase"] == "Running"
                    && p["metadata"]["deletionTimestamp"].is_null()
            })
            .count()
    };
    eventually(
        Duration::from_secs(120),
        "2 spread pods Running on B",
        || (running_on(&cluster, &b) == 2).then_some(()),
    );

    cluster.stop_agent(1);
    eventually(Duration::from_secs(120), "B NotReady", || {
        let n = node(&cluster, &b);
        condition(&n, "Ready")
            .is_some_and(|s| s != "True")
            .then_some(())
    });
    eventually(
        Duration::from_secs(120),
        "the spread pods recreated on A",
        || (running_on(&cluster, &a) == 2).then_some(()),
    );

    // B's Node goes away: A drops its route to B's pods.
    cluster.kubectl_ok(&["delete", "node", &b]);
    eventually(
        Duration::from_secs(30),
        "A's route to B's pods removed",
        || {
            (!overlay_routes(&cluster, &netns_a)
                .iter()
                .any(|r| r.starts_with(&cidr_b)))
            .then_some(())
        },
    );
    let neighbours = cluster.in_host(&netns_a, &["ip", "neigh", "show", "dev", "skiff.vxlan"]);
    assert!(
        !String::from_utf8_lossy(&neighbours.stdout).contains(&vtep_b),
        "B's VTEP is no longer A's neighbour"
    );
}

#[test]
fn multi_node_host_gw_routes_pods_across_nodes() {
    let cluster = Cluster::start(2, "host-gw", &['a', 'b']);
    let (a, b) = (
        cluster.agents[0].node.clone(),
        cluster.agents[1].node.clone(),
    );
    let netns_a = cluster.agents[0].netns.clone();
    let node_b = published_node(&cluster, &b);
    assert_eq!(
        node_b["metadata"]["annotations"]["flannel.alpha.coreos.com/backend-type"],
        "host-gw"
    );
    let cidr_b = node_b["spec"]["podCIDR"]
        .as_str()
        .expect("pod CIDR")
        .to_string();
    let want = format!("{cidr_b} via {} dev eth0", cluster.agents[1].ip);
    eventually(
        Duration::from_secs(30),
        "A's route to B's pods via B",
        || {
            overlay_routes(&cluster, &netns_a)
                .contains(&want)
                .then_some(())
        },
    );
    // No VXLAN device in host-gw mode.
    let link = cluster.in_host(&netns_a, &["ip", "link", "show", "skiff.vxlan"]);
    assert!(!link.status.success(), "host-gw has no VXLAN device");

    cluster.apply(&pod("web-b", &b, true));
    cluster.apply(&pod("client-a", &a, false));
    let web_ip = ready_pod_ip(&cluster, "web-b");
    let client_a_ip = ready_pod_ip(&cluster, "client-a");
    assert_eq!(
        exec(&cluster, "client-a", "cat /sys/class/net/eth0/mtu"),
        Ok("1500".to_string())
    );
    reaches_across_nodes(&cluster, &web_ip, &client_a_ip);
    local_path_on_a_joined_node(&cluster, &b, &cluster.agents[1].data_dir);
}

/// A claim of the default `local-path` class whose pod the scheduler puts
/// on the joined agent `node`: the controller manager provisions it in the
/// directory that node published, the agent makes the directory and the
/// pod writes there; once pod and claim are gone the agent removes the
/// directory and the Released volume (as its own node: no node may list
/// or write other volumes).
fn local_path_on_a_joined_node(cluster: &Cluster, node: &str, data_dir: &std::path::Path) {
    cluster.apply(&serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data-b"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}}}));
    cluster.apply(&serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "writer-b"},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-b"}}],
            "containers": [{"name": "main", "image": BUSYBOX_IMAGE,
                "command": ["sh", "-c", "echo from-b > /data/out.txt && echo wrote && sleep 3600"],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}}));
    ready_pod_ip(cluster, "writer-b");
    let claim = json(&cluster.kubectl_ok(&["get", "pvc", "data-b", "-o", "json"]));
    assert_eq!(claim["status"]["phase"], "Bound", "{claim}");
    assert_eq!(claim["spec"]["storageClassName"], "local-path", "{claim}");
    let uid = claim["metadata"]["uid"].as_str().expect("uid").to_string();
    let volume = format!("pvc-{uid}");
    let pv = json(&cluster.kubectl_ok(&["get", "pv", &volume, "-o", "json"]));
    // Agents keep volumes where `--default-local-storage-path` says.
    let dir = data_dir
        .join("volumes")
        .join(format!("pvc-{uid}_default_data-b"));
    assert_eq!(
        pv["spec"]["hostPath"]["path"],
        dir.to_string_lossy().as_ref(),
        "{pv}"
    );
    assert_eq!(
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"],
        serde_json::json!([node]),
        "{pv}"
    );
    eventually(Duration::from_secs(30), "the pod's file on node B", || {
        (std::fs::read_to_string(dir.join("out.txt")).ok()? == "from-b\n").then_some(())
    });

    // Its log and its node's usage, read through node B's server.
    assert_eq!(cluster.kubectl_ok(&["logs", "writer-b"]).trim(), "wrote");
    let top = eventually(Duration::from_secs(30), "kubectl top node", || {
        let out = cluster.kubectl(&["top", "node", node, "--no-headers"]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    });
    assert!(top.starts_with(node), "{top}");
    let top = eventually(Duration::from_secs(30), "kubectl top pod", || {
        let out = cluster.kubectl(&["top", "pod", "writer-b", "--no-headers"]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    });
    assert!(top.starts_with("writer-b"), "{top}");

    cluster.kubectl_ok(&["delete", "pod", "writer-b", "--wait=true"]);
    cluster.kubectl_ok(&["delete", "pvc", "data-b", "--wait=true"]);
    eventually(
        Duration::from_secs(60),
        "the Released volume reclaimed by node B",
        || {
            let gone = cluster
                .kubectl(&["get", "pv", &volume])
                .status
                .code()
                .is_some_and(|c| c != 0);
            (gone && !dir.exists()).then_some(())
        },
    );
}
