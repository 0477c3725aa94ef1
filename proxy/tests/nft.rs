//! The rendered rules in a real kernel: applied with `nft -f` inside a
//! network namespace this test creates (never on the host), listed back, and
//! exercised with real TCP traffic from busybox `wget` to busybox `httpd`
//! servers. Needs root, nft, ip and /bin/busybox (scripts/bootstrap).

use std::net::Ipv4Addr;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use skiff_proxy::render;
use skiff_proxy::{Applied, Applier, Endpoint, Nft, NodeFacts, PortPlan, Protocol, Target};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A network namespace removed on drop, with the servers started in it.
struct Netns {
    name: String,
    servers: Vec<Child>,
}

fn run(args: &[&str]) -> Output {
    Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Netns {
    fn new() -> Self {
        let name = format!(
            "skp-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        ok(&["ip", "netns", "add", &name]);
        Self {
            name,
            servers: Vec::new(),
        }
    }

    fn exec(&self, args: &[&str]) -> Output {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend(args);
        run(&full)
    }

    fn exec_ok(&self, args: &[&str]) -> String {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend(args);
        ok(&full)
    }

    /// `d0` with `addresses` (the first is the source of local traffic),
    /// the default route through it.
    fn network(&self, addresses: &[&str]) {
        self.exec_ok(&["ip", "link", "set", "lo", "up"]);
        // A veth pair (both ends here) gives d0 a carrier for the route.
        self.exec_ok(&[
            "ip", "link", "add", "d0", "type", "veth", "peer", "name", "d1",
        ]);
        self.exec_ok(&["ip", "link", "set", "d1", "up"]);
        for a in addresses {
            self.exec_ok(&["ip", "addr", "add", &format!("{a}/24"), "dev", "d0"]);
        }
        self.exec_ok(&["ip", "link", "set", "d0", "up"]);
        self.exec_ok(&[
            "ip",
            "route",
            "add",
            "default",
            "dev",
            "d0",
            "src",
            addresses[0],
        ]);
    }

    /// busybox httpd on `ip:8080` answering `/` with `body`.
    fn serve(&mut self, ip: &str, body: &str) {
        let dir = std::env::temp_dir().join(format!("{}-{ip}", self.name));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("index.html"), body).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.name, "/bin/busybox", "httpd", "-f"])
            .arg("-p")
            .arg(format!("{ip}:8080"))
            .arg("-h")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("busybox httpd");
        self.servers.push(child);
        // Wait until it answers directly.
        for _ in 0..50 {
            if self.fetch(&format!("{ip}:8080")).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("httpd on {ip} did not start");
    }

    /// `wget` of `http://address/` from inside the namespace: the body, or
    /// wget's error output.
    fn fetch(&self, address: &str) -> Result<String, String> {
        // busybox 1.35's `wget -T` crashes; `timeout` bounds it instead.
        let out = self.exec(&[
            "timeout",
            "3",
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
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }

    fn nft(&self) -> Nft {
        Nft::in_netns(self.name.clone())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for child in &mut self.servers {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = run(&["ip", "netns", "del", &self.name]);
    }
}

fn ep(ip: &str) -> Endpoint {
    Endpoint {
        ip: ip.parse().unwrap(),
        port: 8080,
    }
}

fn port(service: &str, cluster_ip: &str, target: Target) -> PortPlan {
    PortPlan {
        service: service.into(),
        port_name: "http".into(),
        protocol: Protocol::Tcp,
        port: 80,
        cluster_ip: Some(cluster_ip.parse().unwrap()),
        node_port: None,
        external_ips: Vec::new(),
        external: target.clone(),
        internal: target,
        external_local: false,
        affinity_seconds: None,
    }
}

fn facts(node_ip: &str, pod_cidr: &str) -> NodeFacts {
    NodeFacts {
        addresses: [node_ip.parse::<Ipv4Addr>().unwrap()].into(),
        pod_cidrs: [pod_cidr.to_string()].into(),
    }
}

/// Chain names and the elements of `map` as `nft list table` shows them.
fn listed(nft: &Nft, table: &str) -> String {
    nft.list_table(table).unwrap().expect("table exists")
}

fn listed_chains(listing: &str) -> Vec<String> {
    let mut names: Vec<String> = listing
        .lines()
        .filter_map(|l| l.trim().strip_prefix("chain "))
        .map(|l| l.trim_end_matches(" {").to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn ruleset_round_trips_and_updates_incrementally() {
    let ns = Netns::new();
    let nft = ns.nft();
    let node = facts("192.0.2.2", "10.42.0.0/24");
    let mut web = port(
        "ns/web",
        "10.43.0.20",
        Target::Endpoints(vec![ep("10.42.0.5"), ep("10.42.0.6")]),
    );
    web.node_port = Some(30080);
    let empty = port("ns/empty", "10.43.0.21", Target::Reject);
    let first = render::render("skp", &[web.clone(), empty.clone()], &node);
    let mut applier = Applier::new(nft.clone(), "skp");
    assert_eq!(applier.apply(first.clone()).unwrap(), Applied::Full);
    let text = listed(&nft, "skp");
    assert_eq!(
        listed_chains(&text),
        first.chains.keys().cloned().collect::<Vec<_>>()
    );
    assert!(text.contains("10.43.0.20 . tcp . 80 : goto svc-ns/web/tcp/http"));
    assert!(text.contains("10.43.0.21 . tcp . 80 : goto reject-chain"));
    assert!(text.contains("tcp . 30080 : goto ext-ns/web/tcp/http"));
    assert!(text.contains("dnat to 10.42.0.6:8080"));
    assert!(applier.intact().unwrap());
    assert_eq!(applier.apply(first.clone()).unwrap(), Applied::Unchanged);

    // One endpoint leaves, the empty Service gets one: applied as a diff.
    web.internal = Target::Endpoints(vec![ep("10.42.0.5")]);
    web.external = web.internal.clone();
    let mut served = empty.clone();
    served.internal = Target::Endpoints(vec![ep("10.42.0.7")]);
    let second = render::render("skp", &[web, served], &node);
    assert_eq!(applier.apply(second.clone()).unwrap(), Applied::Incremental);
    let text = listed(&nft, "skp");
    assert_eq!(
        listed_chains(&text),
        second.chains.keys().cloned().collect::<Vec<_>>()
    );
    assert!(!text.contains("10.42.0.6"), "{text}");
    assert!(!text.contains("reject-chain }"), "{text}");
    assert!(text.contains("10.43.0.21 . tcp . 80 : goto svc-ns/empty/tcp/http"));
    assert!(text.contains("numgen random mod 1 vmap"));

    // Someone flushes the table: noticed, and rebuilt by a full apply.
    ns.exec_ok(&["nft", "flush", "table", "ip", "skp"]);
    assert!(!applier.intact().unwrap());
    applier.invalidate();
    assert_eq!(applier.apply(second.clone()).unwrap(), Applied::Full);
    assert!(applier.intact().unwrap());
    // Or deletes it.
    nft.delete_table("skp").unwrap();
    assert!(!applier.intact().unwrap());
    assert_eq!(nft.list_table("skp").unwrap(), None);
}

#[test]
fn traffic_is_balanced_refused_and_sticky_as_planned() {
    let mut ns = Netns::new();
    ns.network(&["10.99.0.1", "10.99.0.2", "10.99.0.3"]);
    ns.serve("10.99.0.2", "two");
    ns.serve("10.99.0.3", "three");
    let both = Target::Endpoints(vec![ep("10.99.0.2"), ep("10.99.0.3")]);
    let mut web = port("ns/web", "10.43.0.20", both.clone());
    web.node_port = Some(30080);
    let empty = port("ns/empty", "10.43.0.21", Target::Reject);
    let mut sticky = port("ns/sticky", "10.43.0.22", both);
    sticky.affinity_seconds = Some(600);
    let mut external = port(
        "ns/ext",
        "10.43.0.23",
        Target::Endpoints(vec![ep("10.99.0.3")]),
    );
    external.external_ips = vec!["198.51.100.7".parse().unwrap()];
    let node = facts("10.99.0.1", "10.99.0.0/24");
    let ruleset = render::render("skp", &[web, empty, sticky, external], &node);
    let mut applier = Applier::new(ns.nft(), "skp");
    applier.apply(ruleset).unwrap();

    // The cluster IP reaches both endpoints.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        seen.insert(ns.fetch("10.43.0.20").expect("through the cluster IP"));
        if seen.len() == 2 {
            break;
        }
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["three", "two"]);
    // So does the node port on the node's address.
    assert!(
        ["two", "three"].contains(&ns.fetch("10.99.0.1:30080").unwrap().as_str()),
        "node port"
    );
    // And the external IP.
    assert_eq!(ns.fetch("198.51.100.7").unwrap(), "three");
    // A Service without endpoints is refused at once, not timed out.
    let refused = ns.fetch("10.43.0.21").unwrap_err();
    assert!(refused.contains("refused"), "{refused}");
    // ClientIP affinity: one client keeps its endpoint.
    let first = ns.fetch("10.43.0.22").unwrap();
    for _ in 0..10 {
        assert_eq!(ns.fetch("10.43.0.22").unwrap(), first);
    }
}
