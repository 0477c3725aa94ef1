//! `skiff server` with its containerd node agent, driven by kubectl: a pod
//! that prints and exits, a 3-replica Deployment, and a server restart
//! that leaves running containers alone. Needs root (containerd, runc, CNI).

use std::time::Duration;

use skiff_node::images;

use super::support::{Kubectl, Server, apply, assert_contains, condition, eventually, json};

const NODE: &str = "e2e-containerd";

pub(super) fn assert_root() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .unwrap_or("");
    assert_eq!(
        euid, "0",
        "the containerd e2e tests run containerd and need root"
    );
}

/// The host clean-up every containerd suite here shares with the node
/// agent's tests.
pub(super) use skiff_testkit::host::{all_pids, cleanup_host, processes_naming, unmount_under};

/// Builds the busybox test image from /bin/busybox and imports it into the
/// server's containerd, waiting until CRI lists it.
pub(super) fn import_busybox(server: &Server) {
    let agent_dir = server.data_dir().join("agent");
    let archive = server.data_dir().join("busybox.tar");
    images::write_host_busybox(&archive).expect("busybox archive");
    let socket = agent_dir.join("containerd/containerd.sock");
    let rt = tokio::runtime::Runtime::new().expect("tokio");
    rt.block_on(async {
        let cri = skiff_node::CriRuntime::new(&socket.to_string_lossy(), Default::default())
            .expect("cri client");
        let names = images::ImageImporter::new(&socket)
            .wait_visible_through(cri)
            .import(&archive)
            .await
            .expect("import busybox");
        assert_eq!(names, [images::BUSYBOX_IMAGE]);
    });
}

pub(super) fn pod(server: &Server, name: &str) -> serde_json::Value {
    json(&server.kubectl_ok(&["get", "pod", name, "-o", "json"]))
}

/// Waits up to two minutes for the pod `name` to be Running.
pub(super) fn wait_running(server: &Server, name: &str) {
    eventually(Duration::from_secs(120), &format!("{name} Running"), || {
        (pod(server, name)["status"]["phase"] == "Running").then_some(())
    });
}

fn running_container_ids(server: &Server, selector: &str) -> Vec<(String, String, i64)> {
    let list = json(&server.kubectl_ok(&["get", "pods", "-l", selector, "-o", "json"]));
    let mut ids: Vec<(String, String, i64)> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["status"]["phase"] == "Running")
        .map(|p| {
            let c = &p["status"]["containerStatuses"][0];
            (
                p["metadata"]["name"].as_str().unwrap_or("").to_string(),
                c["containerID"].as_str().unwrap_or("").to_string(),
                c["restartCount"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    ids.sort();
    ids
}

#[test]
fn server_runs_pods_on_containerd_and_keeps_them_across_restarts() {
    run_with_node("ske", "10.233.7.0/24", NODE, &[], scenario);
}

/// The third octet of this run's networks: distinct per process, so
/// leftovers of other servers cannot match.
pub(super) fn run_octet() -> u32 {
    100 + std::process::id() % 100
}

/// This run's /24 in `10.<second>.0.0/16` (see [`run_octet`]).
pub(super) fn run_cidr(second: u8) -> String {
    format!("10.{second}.{}.0/24", run_octet())
}

/// Runs `scenario` against a fresh `skiff server` whose node agent, named
/// `node`, has its own bridge and pod CIDR (also given as the cluster CIDR,
/// so node IPAM hands out exactly that range and concurrent servers cannot
/// collide); afterwards deletes its workloads through the API, stops it and
/// cleans the host (its pods' cgroups go with the `Server`), and prints the
/// server log if the scenario panicked.
pub(super) fn run_with_node(
    bridge_prefix: &str,
    pod_cidr: &str,
    node: &str,
    extra: &[&str],
    scenario: impl FnOnce(&mut Server),
) {
    assert_root();
    let bridge = format!("{bridge_prefix}{}", std::process::id() % 100_000);
    let mut args = vec![
        "--cni-bridge",
        &bridge,
        "--pod-cidr",
        pod_cidr,
        "--cluster-cidr",
        pod_cidr,
        "--node-name",
        node,
    ];
    args.extend_from_slice(extra);
    let mut server = Server::start_with(&args);
    let base = server.data_dir().to_path_buf();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        scenario(&mut server);
    }));
    // Pods are deleted through the API (the agent stops them), in every
    // namespace a scenario used, then the server stops its containerd.
    let _ = server.kubectl(&["delete", "deployment", "--all", "-A", "--wait=false"]);
    let _ = server.kubectl(&[
        "delete",
        "pods",
        "--all",
        "-A",
        "--grace-period=1",
        "--timeout=60s",
    ]);
    server.terminate();
    cleanup_host(&base, &bridge);
    if let Err(panic) = result {
        eprintln!("server log:\n{}", server.log());
        std::panic::resume_unwind(panic);
    }
}

/// Waits until `node` is registered and Ready, and returns it.
pub(super) fn wait_node_ready(server: &Server, node: &str) -> serde_json::Value {
    node_ready(&server.admin(), node, Duration::from_secs(120))
}

/// Waits up to `within` until `node` is registered and Ready, asking as
/// `kubectl` (a single server's admin or a multi-node cluster's), and
/// returns it.
pub(super) fn node_ready(kubectl: &Kubectl, node: &str, within: Duration) -> serde_json::Value {
    eventually(within, &format!("node {node} Ready"), || {
        let out = kubectl.run(&["get", "node", node, "-o", "json"]);
        if !out.status.success() {
            return None;
        }
        let found = json(&String::from_utf8_lossy(&out.stdout));
        (condition(&found, "Ready") == Some("True")).then_some(found)
    })
}

/// A Node's InternalIP address.
pub(super) fn internal_ip(node: &serde_json::Value) -> String {
    node["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["type"] == "InternalIP")
        .and_then(|a| a["address"].as_str())
        .expect("the node's InternalIP")
        .to_string()
}

/// The server's own Node shows ROLES `control-plane,master` (k3s's labels,
/// set by the server); the node itself can neither drop them nor add a role.
fn control_plane_role(server: &Server) {
    let row = eventually(Duration::from_secs(30), "ROLES control-plane", || {
        let table = server.kubectl_ok(&["get", "nodes", NODE, "--no-headers"]);
        table.contains("control-plane,master").then_some(table)
    });
    assert!(row.starts_with(NODE), "{row}");
    let as_node = format!("system:node:{NODE}");
    for change in [
        "node-role.kubernetes.io/control-plane-",
        "node-role.kubernetes.io/worker=true",
    ] {
        let err = server.kubectl_err(&[
            "label",
            "node",
            NODE,
            change,
            "--as",
            &as_node,
            "--as-group",
            "system:nodes",
        ]);
        let key = change.trim_end_matches('-').split('=').next().unwrap_or("");
        assert!(
            err.contains(&format!("is not allowed to modify labels: {key}")),
            "{change}: {err}"
        );
    }
    let labels =
        json(&server.kubectl_ok(&["get", "node", NODE, "-o", "json"]))["metadata"]["labels"]
            .clone();
    assert_eq!(labels["node-role.kubernetes.io/control-plane"], "true");
    assert!(
        labels["node-role.kubernetes.io/worker"].is_null(),
        "{labels}"
    );
}

/// The proxy subresources reach a real pod, a service's pod and the node's
/// server through the API server.
fn proxies(server: &Server, pods: &serde_json::Value) {
    let pod = pods["items"][0]["metadata"]["name"]
        .as_str()
        .expect("a web pod");
    let through = |path: &str| {
        let out = server.kubectl(&["get", "--raw", path]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    eventually(Duration::from_secs(30), "pod proxy", || {
        (through(&format!("/api/v1/namespaces/default/pods/{pod}/proxy/")) == "web\n").then_some(())
    });
    apply(
        server,
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},
           "spec":{"selector":{"app":"web"},"ports":[{"name":"http","port":80,"targetPort":8080}]}}"#,
    );
    eventually(Duration::from_secs(30), "service proxy", || {
        (through("/api/v1/namespaces/default/services/web:http/proxy/index.html") == "web\n")
            .then_some(())
    });
    let metrics = server.kubectl_ok(&[
        "get",
        "--raw",
        &format!("/api/v1/nodes/{NODE}/proxy/metrics"),
    ]);
    assert_contains(&metrics, "kubelet_running_pods");
}

/// `kubectl debug` runs an ephemeral container in a running pod, in the
/// process namespace of the container it targets.
fn debug(server: &Server, pods: &serde_json::Value) {
    let name = pods["items"][1]["metadata"]["name"]
        .as_str()
        .expect("a web pod");
    server.kubectl_ok(&[
        "debug",
        name,
        &format!("--image={}", images::BUSYBOX_IMAGE),
        "--target=httpd",
        "-c",
        "debugger",
        "--profile=general",
        "--",
        "ps",
    ]);
    let status = eventually(Duration::from_secs(60), "debugger ran", || {
        let p = pod(server, name);
        let status = p["status"]["ephemeralContainerStatuses"][0].clone();
        status["state"]["terminated"].is_object().then_some(status)
    });
    assert_eq!(status["name"], "debugger");
    assert_eq!(status["state"]["terminated"]["exitCode"], 0, "{status}");
    // It saw the target's processes: httpd runs there, not in the debugger.
    let seen = server.kubectl_ok(&["logs", name, "-c", "debugger"]);
    assert_contains(&seen, "httpd -f -p 8080");
    // The pod's own container went on, and the pod is still Ready.
    let p = pod(server, name);
    assert_eq!(p["status"]["containerStatuses"][0]["restartCount"], 0);
    assert!(p["status"]["containerStatuses"][0]["ready"] == true, "{p}");
}

fn scenario(server: &mut Server) {
    wait_node_ready(server, NODE);
    control_plane_role(server);
    let node = json(&server.kubectl_ok(&["get", "node", NODE, "-o", "json"]));
    let runtime = node["status"]["nodeInfo"]["containerRuntimeVersion"]
        .as_str()
        .unwrap_or("");
    assert!(runtime.starts_with("containerd://1."), "{runtime}");
    assert!(
        node["spec"]["podCIDR"]
            .as_str()
            .is_some_and(|c| c.ends_with("/24")),
        "{node}"
    );
    import_busybox(server);

    // A pod that prints and exits: Completed.
    apply(
        server,
        &format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"hello"}},
               "spec":{{"nodeName":"{NODE}","restartPolicy":"Never","containers":[{{
                 "name":"main","image":"{}","command":["sh","-c","echo hello from containerd"]}}]}}}}"#,
            images::BUSYBOX_IMAGE
        ),
    );
    let hello = eventually(Duration::from_secs(90), "hello Succeeded", || {
        let p = pod(server, "hello");
        (p["status"]["phase"] == "Succeeded").then_some(p)
    });
    let terminated = &hello["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 0);
    assert_eq!(terminated["reason"], "Completed");
    let table = server.kubectl_ok(&["get", "pod", "hello"]);
    assert_contains(&table, "Completed");
    assert_eq!(
        server.kubectl_ok(&["logs", "hello"]),
        "hello from containerd\n"
    );

    // A 3-replica Deployment, scheduled onto the node, all Running.
    apply(
        server,
        &format!(
            r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"web"}},
               "spec":{{"replicas":3,"selector":{{"matchLabels":{{"app":"web"}}}},
                 "template":{{"metadata":{{"labels":{{"app":"web"}}}},
                   "spec":{{"terminationGracePeriodSeconds":2,"containers":[{{
                     "name":"httpd","image":"{}","ports":[{{"containerPort":8080}}],
                     "command":["sh","-c","mkdir -p /tmp/www && echo web > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"]}}]}}}}}}}}"#,
            images::BUSYBOX_IMAGE
        ),
    );
    let before = eventually(Duration::from_secs(120), "3 web pods Running", || {
        let ids = running_container_ids(server, "app=web");
        (ids.len() == 3 && ids.iter().all(|(_, id, _)| id.starts_with("containerd://")))
            .then_some(ids)
    });
    // The node agent's metrics, read through the API server's /metrics
    // (one process, one registry).
    eventually(Duration::from_secs(10), "kubelet metrics", || {
        let found = super::metrics::samples(&server.kubectl_ok(&["get", "--raw", "/metrics"]));
        let value =
            |name: &str, labels: &[(&str, &str)]| super::metrics::value(&found, name, labels);
        (value("kubelet_running_pods", &[]) >= 3.0
            && value(
                "kubelet_running_containers",
                &[("container_state", "running")],
            ) >= 3.0
            && value("kubelet_pod_start_duration_seconds_count", &[]) >= 3.0
            && value("kubelet_pleg_relist_duration_seconds_count", &[]) >= 1.0)
            .then_some(())
    });
    let ips = json(&server.kubectl_ok(&["get", "pods", "-l", "app=web", "-o", "json"]));
    for p in ips["items"].as_array().into_iter().flatten() {
        assert_eq!(p["spec"]["nodeName"], NODE, "scheduled onto the node");
        assert!(
            p["status"]["podIP"]
                .as_str()
                .is_some_and(|ip| !ip.is_empty()),
            "{p}"
        );
    }

    proxies(server, &ips);
    debug(server, &ips);

    // Restart the server: the containers keep running and are adopted.
    let status = server.terminate();
    assert!(status.success(), "server exit status {status}");
    server.restart();
    wait_node_ready(server, NODE);
    std::thread::sleep(Duration::from_secs(4));
    let after = eventually(Duration::from_secs(60), "web pods Running again", || {
        let ids = running_container_ids(server, "app=web");
        (ids.len() == 3).then_some(ids)
    });
    assert_eq!(after, before, "containers were recreated by the restart");
}
