//! Agents joining by token (issue #16), with a real `skiff agent` on
//! containerd beside a control-plane-only server: `skiff token create` →
//! `skiff agent --server --token` becomes a Ready node holding a
//! `system:node:<name>` client certificate it got through the kubelet TLS
//! bootstrap, and keeps using it after a restart; from the attacker's side,
//! a token naming another CA is refused before anything is sent, a wrong
//! secret is refused with 401, and a second host (another data dir, the
//! same `--node-name`, even with the valid server token) cannot take the
//! node's name; an agent registers with its `--node-taint` and
//! `--node-external-ip`, read from its `--config` file. Needs root (containerd, runc, CNI).

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use super::containerd::{assert_root, cleanup_host, wait_node_ready};
use super::support::{
    Server, assert_contains, eventually, free_port, json, skiff_ok, spawn_joined_agent, terminate,
};

/// A `skiff agent` process in its own data dir.
struct Agent {
    child: Child,
    dir: tempfile::TempDir,
    bridge: String,
}

impl Agent {
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("agent.log")).unwrap_or_default()
    }

    fn stop(&mut self) {
        terminate(&mut self.child);
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.stop();
        }
        cleanup_host(self.dir.path(), &self.bridge);
        // What spawn_agent named after the bridge.
        skiff_testkit::host::remove_cgroup_tree(&format!("/{}", self.bridge));
        skiff_testkit::host::delete_nft_table("ip", &format!("{}-net", self.bridge));
        skiff_testkit::host::delete_nft_table("inet", &self.bridge);
    }
}

/// Starts `skiff agent` joining `server` with `token` as `node`.
fn start_agent(
    server: &Server,
    dir: tempfile::TempDir,
    token: &str,
    node: &str,
    bridge: &str,
    pod_cidr: &str,
) -> Agent {
    let child = spawn_agent(
        server,
        dir.path(),
        Join::Token(token),
        node,
        bridge,
        pod_cidr,
    );
    Agent {
        child,
        dir,
        bridge: bridge.to_string(),
    }
}

/// How an agent is given its join token.
enum Join<'a> {
    /// `--token` on the command line.
    Token(&'a str),
    /// `--token-file`.
    TokenFile(&'a Path),
}

fn spawn_agent(
    server: &Server,
    dir: &Path,
    join: Join<'_>,
    node: &str,
    bridge: &str,
    pod_cidr: &str,
) -> Child {
    let kubelet_port = free_port().to_string();
    // Pod cgroups, pod-network and policy tables of its own, which the
    // Agent's drop removes.
    let (cgroup_root, net_table) = (format!("/{bridge}"), format!("{bridge}-net"));
    // Some flags come from a k3s-style config file (a list repeats one).
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        "node-taint:\n  - dedicated=edge:NoSchedule\nnode-external-ip: 192.0.2.10\n",
    )
    .expect("config.yaml");
    let config = config.to_string_lossy().into_owned();
    let (token, token_file) = match join {
        Join::Token(token) => (token, None),
        Join::TokenFile(path) => ("", Some(path.to_string_lossy().into_owned())),
    };
    let token_file: Vec<&str> = token_file
        .as_deref()
        .map(|path| vec!["--token-file", path])
        .unwrap_or_default();
    spawn_joined_agent(
        server,
        dir,
        token,
        &[
            "--cgroup-root",
            &cgroup_root,
            "--pod-network-table",
            &net_table,
            "--netpol-table",
            bridge,
            "--flannel-backend",
            "none",
            "--node-name",
            node,
            "--cni-bridge",
            bridge,
            "--pod-cidr",
            pod_cidr,
            "--node-ip",
            "127.0.0.1",
            "--kubelet-port",
            &kubelet_port,
            "--disable-kube-proxy",
            "--config",
            &config,
        ]
        .into_iter()
        .chain(token_file)
        .collect::<Vec<_>>(),
    )
}

/// Runs an agent that must refuse to join: returns its log once it exited
/// with a failure.
fn refused(server: &Server, token: &str, node: &str, bridge: &str) -> String {
    let dir = tempfile::tempdir().expect("agent dir");
    let mut agent = start_agent(server, dir, token, node, bridge, "10.233.41.0/24");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = agent.child.try_wait().expect("agent status") {
            assert!(!status.success(), "the agent joined:\n{}", agent.log());
            return agent.log();
        }
        assert!(
            Instant::now() < deadline,
            "the agent neither joined nor gave up:\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The certificate requests for kubelet client certificates (each joining
/// node's, and each hollow node's, makes one).
pub(super) fn client_csrs(server: &Server) -> Vec<serde_json::Value> {
    let list = json(&server.kubectl_ok(&["get", "csr", "-o", "json"]));
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet")
        .cloned()
        .collect()
}

/// The subject of the certificate in `path`.
fn subject(path: &Path) -> String {
    let pem = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).expect("PEM");
    let cert = pem.parse_x509().expect("certificate");
    cert.subject().to_string()
}

fn pki(agent: &Agent) -> PathBuf {
    agent.dir.path().join("agent").join("pki")
}

#[test]
fn agents_join_by_token_and_cannot_take_another_nodes_name() {
    assert_root();
    let id = std::process::id() % 10_000;
    // k3s's `--disable local-storage`: no local-path provisioner or class.
    let server = Server::start_with(&[
        "--disable-agent",
        "--cluster-cidr",
        "10.233.40.0/23",
        "--disable",
        "local-storage",
    ]);
    let server_token = std::fs::read_to_string(server.data_dir().join("token"))
        .expect("DATA_DIR/token")
        .trim()
        .to_string();
    assert!(server_token.starts_with("K10"), "{server_token}");
    let (hash, credential) = server_token[3..]
        .split_once("::")
        .expect("K10<hash>::<credential>");
    assert!(credential.starts_with("server:"));

    // The bad tokens are tried by the same would-be node.
    let refused_bridge = format!("sjx{id}");
    let refused_token = |token: &str| refused(&server, token, "join-x", &refused_bridge);

    // A token naming another CA: refused before anything is sent.
    let other_hash = "0".repeat(64);
    assert_ne!(hash, other_hash);
    let log = refused_token(&format!("K10{other_hash}::{credential}"));
    assert_contains(&log, "refusing to trust this server");
    assert!(client_csrs(&server).is_empty(), "a request was made");

    // The right CA, a wrong secret: 401.
    let log = refused_token(&format!("K10{hash}::abcdef.0123456789abcdef"));
    assert_contains(&log, "refused the join token (401)");
    assert_contains(&log, "wrong or has expired");

    // `skiff token create` → a Ready node with its own client certificate.
    let token = skiff_ok(
        &["token", "create", "--ttl", "1h", "--description", "e2e"],
        server.data_dir(),
    )
    .trim()
    .to_string();
    assert!(token.starts_with(&format!("K10{hash}::")), "{token}");
    let listed = skiff_ok(&["token", "list"], server.data_dir());
    let short = token.rsplit("::").next().expect("id.secret");
    assert!(listed.contains(short) && listed.contains("e2e"), "{listed}");

    let node = "join-a";
    let bridge = format!("sja{id}");
    let mut agent = start_agent(
        &server,
        tempfile::tempdir().expect("agent dir"),
        &token,
        node,
        &bridge,
        "10.233.40.0/24",
    );
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_node_ready(&server, node);
        assert_eq!(
            server
                .kubectl_ok(&["get", "storageclass", "-o", "name"])
                .trim(),
            "",
            "--disable local-storage"
        );
        let cert = pki(&agent).join("kubelet-client.crt");
        let subject = subject(&cert);
        assert_contains(&subject, "CN=system:node:join-a");
        assert_contains(&subject, "O=system:nodes");
        let csrs = client_csrs(&server);
        assert_eq!(csrs.len(), 1, "{csrs:?}");
        let csr = &csrs[0];
        let short_id = short.split('.').next().expect("token id");
        assert_eq!(
            csr["spec"]["username"],
            format!("system:bootstrap:{short_id}")
        );
        assert!(
            csr["metadata"]["annotations"]
                .get("skiff.io/node-password")
                .is_none(),
            "the node password was stored: {csr}"
        );
        // The node's own identity reaches the API: its Lease is renewed.
        let lease = json(&server.kubectl_ok(&[
            "get",
            "lease",
            node,
            "-n",
            "kube-node-lease",
            "-o",
            "json",
        ]));
        assert_eq!(lease["spec"]["holderIdentity"], node);

        // Another host with the same name, even with the server's own
        // token: refused, with the reason.
        let log = refused(&server, &server_token, node, &format!("sjb{id}"));
        assert_contains(&log, "another node password");
        assert_contains(&log, "join-a");

        // A restart reuses the certificate: no new request. (It is given
        // the token in a file, kept out of `ps`.)
        agent.stop();
        let token_file = agent.dir.path().join("join-token");
        std::fs::write(&token_file, format!("{token}\n")).expect("token file");
        agent.child = spawn_agent(
            &server,
            agent.dir.path(),
            Join::TokenFile(&token_file),
            node,
            &bridge,
            "10.233.40.0/24",
        );
        eventually(Duration::from_secs(60), "the restarted agent", || {
            agent
                .log()
                .contains("using the stored node client certificate")
                .then_some(())
        });
        wait_node_ready(&server, node);
        assert_eq!(client_csrs(&server).len(), 1, "the restart asked again");

        // `--node-external-ip`, as `kubectl get nodes -o wide` shows it.
        let wide = server.kubectl_ok(&["get", "node", node, "-o", "wide", "--no-headers"]);
        let columns: Vec<&str> = wide.split_whitespace().collect();
        assert_eq!(
            columns.get(5..7),
            Some(&["127.0.0.1", "192.0.2.10"][..]),
            "{wide}"
        );
        // Its node server serves with a certificate naming that address
        // too (the approver signs only a node's published addresses).
        let healthz = eventually(Duration::from_secs(30), "the node server's healthz", || {
            let out = server.kubectl(&[
                "get",
                "--raw",
                &format!("/api/v1/nodes/{node}/proxy/healthz"),
            ]);
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        });
        assert_eq!(healthz, "ok");
        // The host's /var/log, as a kubelet's `/logs/` lists it.
        let listed =
            server.kubectl_ok(&["get", "--raw", &format!("/api/v1/nodes/{node}/proxy/logs/")]);
        assert!(listed.starts_with("<pre>\n"), "{listed}");
        // The configuration it runs with, as a kubelet's `/configz` shows it.
        let configz = json(&server.kubectl_ok(&[
            "get",
            "--raw",
            &format!("/api/v1/nodes/{node}/proxy/configz"),
        ]));
        assert_eq!(
            configz["kubeletconfig"]["registerWithTaints"][0]["key"], "dedicated",
            "{configz}"
        );
        let serving = std::fs::read(pki(&agent).join("kubelet-serving.crt")).expect("serving cert");
        let (_, pem) = x509_parser::pem::parse_x509_pem(&serving).expect("PEM");
        let cert = pem.parse_x509().expect("certificate");
        let names = format!("{:?}", cert.subject_alternative_name().expect("SAN"));
        assert_contains(&names, "IPAddress([192, 0, 2, 10])");

        // `--node-taint` (a list in the config file): the node came with
        // its taint, once (not again at the restart), and a pod
        // that does not tolerate it is not placed there.
        // The restarted agent may report NotReady for a moment, and the
        // node lifecycle controller taints it `not-ready` until it is Ready
        // again: wait for that to clear rather than read the moment.
        let want =
            serde_json::json!([{"key": "dedicated", "value": "edge", "effect": "NoSchedule"}]);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let taints =
                json(&server.kubectl_ok(&["get", "node", node, "-o", "json"]))["spec"]["taints"]
                    .clone();
            if taints == want {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "taints: {taints}");
            std::thread::sleep(Duration::from_millis(200));
        }
        server.kubectl_ok(&[
            "run",
            "intolerant",
            "--image",
            "busybox",
            "--restart",
            "Never",
        ]);
        eventually(
            Duration::from_secs(30),
            "the pod refused by the taint",
            || {
                let described = server.kubectl_ok(&["describe", "pod", "intolerant"]);
                described
                    .contains("1 node(s) had untolerated taint {dedicated: edge}")
                    .then_some(())
            },
        );
        server.kubectl_ok(&["delete", "pod", "intolerant", "--wait=false"]);

        // Deleting the token ends it for new agents; the joined node keeps
        // its certificate.
        skiff_ok(&["token", "delete", short], server.data_dir());
        let log = refused(&server, &token, "join-y", &format!("sjy{id}"));
        assert_contains(&log, "(401)");
    }));
    if let Err(panic) = result {
        eprintln!("agent log:\n{}\nserver log:\n{}", agent.log(), server.log());
        std::panic::resume_unwind(panic);
    }
    let _ = server.kubectl(&["delete", "node", node, "--wait=false"]);
    drop(agent);
}
