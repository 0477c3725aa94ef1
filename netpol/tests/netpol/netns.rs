//! A small node in network namespaces, removed on drop: a node namespace
//! with bridge `br0` (the pod network's gateway) and an uplink namespace
//! routed through it ("another node", reaching the pods over a routed
//! hop, not the bridge), plus pod namespaces on the bridge, each able to
//! serve HTTP and fetch.

use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use skiff_common::nft::Nft;

static NEXT: AtomicU32 = AtomicU32::new(0);

fn run(args: &[&str]) -> Output {
    Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

pub fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One namespace.
pub struct Ns {
    pub name: String,
}

impl Ns {
    fn new(name: String) -> Self {
        ok(&["ip", "netns", "add", &name]);
        let ns = Self { name };
        ns.exec_ok(&["ip", "link", "set", "lo", "up"]);
        ns
    }

    pub fn exec(&self, args: &[&str]) -> Output {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend(args);
        run(&full)
    }

    pub fn exec_ok(&self, args: &[&str]) -> String {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend(args);
        ok(&full)
    }

    /// `wget` of `http://address/` from inside: the body, or the error.
    pub fn fetch(&self, address: &str) -> Result<String, String> {
        // busybox 1.35's `wget -T` crashes; `timeout` bounds it instead.
        let out = self.exec(&[
            "timeout",
            "2",
            "/bin/busybox",
            "wget",
            "-q",
            "-O",
            "-",
            &format!("http://{address}/"),
        ]);
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(format!(
                "{} {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.name]);
    }
}

/// The node, its uplink peer and its pods.
pub struct Node {
    prefix: String,
    /// Holds the bridge, the table and the routes.
    pub node: Ns,
    /// A routed neighbour (10.77.1.2), standing for another node.
    pub remote: Ns,
    pods: Vec<Ns>,
    servers: Vec<Child>,
}

/// The pod network: 10.77.0.0/24, gateway 10.77.0.1 on the node's bridge.
pub const GATEWAY: &str = "10.77.0.1";
/// The routed neighbour's address.
pub const REMOTE: &str = "10.77.1.2";

impl Node {
    pub fn new() -> Self {
        let prefix = format!(
            "np-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let node = Ns::new(format!("{prefix}-node"));
        node.exec_ok(&["ip", "link", "add", "br0", "type", "bridge"]);
        node.exec_ok(&["ip", "addr", "add", &format!("{GATEWAY}/24"), "dev", "br0"]);
        node.exec_ok(&["ip", "link", "set", "br0", "up"]);
        node.exec_ok(&["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
        // Bridged traffic through the inet forward hook (br_netfilter).
        node.exec_ok(&["sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"]);
        let remote = Ns::new(format!("{prefix}-remote"));
        ok(&[
            "ip",
            "link",
            "add",
            "up0",
            "netns",
            &node.name,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &remote.name,
        ]);
        node.exec_ok(&["ip", "addr", "add", "10.77.1.1/24", "dev", "up0"]);
        node.exec_ok(&["ip", "link", "set", "up0", "up"]);
        remote.exec_ok(&["ip", "addr", "add", &format!("{REMOTE}/24"), "dev", "eth0"]);
        remote.exec_ok(&["ip", "link", "set", "eth0", "up"]);
        remote.exec_ok(&["ip", "route", "add", "default", "via", "10.77.1.1"]);
        Self {
            prefix,
            node,
            remote,
            pods: Vec::new(),
            servers: Vec::new(),
        }
    }

    /// A pod namespace on the bridge with address `ip`; its index.
    pub fn pod(&mut self, ip: &str) -> usize {
        let index = self.pods.len();
        let pod = Ns::new(format!("{}-p{index}", self.prefix));
        let host_end = format!("vp{index}");
        ok(&[
            "ip",
            "link",
            "add",
            &host_end,
            "netns",
            &self.node.name,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &pod.name,
        ]);
        self.node
            .exec_ok(&["ip", "link", "set", &host_end, "master", "br0"]);
        self.node.exec_ok(&["ip", "link", "set", &host_end, "up"]);
        pod.exec_ok(&["ip", "addr", "add", &format!("{ip}/24"), "dev", "eth0"]);
        pod.exec_ok(&["ip", "link", "set", "eth0", "up"]);
        pod.exec_ok(&["ip", "route", "add", "default", "via", GATEWAY]);
        self.pods.push(pod);
        index
    }

    pub fn pod_ns(&self, index: usize) -> &Ns {
        &self.pods[index]
    }

    /// busybox httpd on `ip:8080` in pod `index`, answering `/` with `body`.
    pub fn serve(&mut self, index: usize, ip: &str, body: &str) {
        let name = self.pods[index].name.clone();
        self.serve_in(name, ip, body);
    }

    /// busybox httpd on `ip:8080` in the node namespace.
    pub fn serve_on_node(&mut self, ip: &str, body: &str) {
        let name = self.node.name.clone();
        self.serve_in(name, ip, body);
    }

    fn serve_in(&mut self, ns: String, ip: &str, body: &str) {
        let dir = std::env::temp_dir().join(format!("{}-{ip}", self.prefix));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("index.html"), body).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &ns, "/bin/busybox", "httpd", "-f"])
            .arg("-p")
            .arg(format!("{ip}:8080"))
            .arg("-h")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("busybox httpd");
        self.servers.push(child);
        for _ in 0..50 {
            if self.node.fetch(&format!("{ip}:8080")).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("httpd on {ip} did not start");
    }

    pub fn nft(&self) -> Nft {
        Nft::in_netns(self.node.name.clone())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        for child in &mut self.servers {
            let _ = child.kill();
            let _ = child.wait();
        }
        // The namespaces go with their fields (veths with them).
    }
}
