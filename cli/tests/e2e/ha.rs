//! Two servers on one etcd (Debian's `/usr/bin/etcd`, started by the test):
//! the second joins by the first's token and serves the same cluster —
//! the same CA, objects written through one read through the other, Service
//! addresses unique across both while they allocate at once — and when the
//! server holding the controller-manager and scheduler leases is SIGKILLed,
//! the survivor takes over. The `kubernetes` endpoints list both servers
//! (each advertising its own node address) and drop the killed one within
//! its lease's TTL; each server's DNS is a `kube-dns` endpoint, and the
//! killed one's goes with its Lease. A server with a wrong token, or a token naming another
//! CA, refuses to start.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::Value;
use skiff_store::testing::EtcdProcess;
use skiff_store::{EtcdConfig, EtcdStore, Store};

use super::support::{Server, assert_contains, eventually, free_port, refused_server};

/// A small range, so that two servers choosing at random would collide
/// without records in the store (61 addresses, 41 Services).
const SERVICE_CIDR: &str = "10.96.0.0/26";

/// The cluster DNS's address in [`SERVICE_CIDR`].
const CLUSTER_DNS: &str = "10.96.0.10";

/// One DNS port for all servers: each listens on its own node address.
fn dns_port() -> u16 {
    static PORT: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    *PORT.get_or_init(free_port)
}

fn server_flags(etcd: &str) -> Vec<String> {
    let dns_listen = format!("0.0.0.0:{}", dns_port());
    [
        "--disable-agent",
        "--disable-snapshots",
        "--datastore-endpoint",
        etcd,
        "--service-cidr",
        SERVICE_CIDR,
        "--cluster-dns",
        CLUSTER_DNS,
        "--cluster-dns-listen",
        &dns_listen,
        "--cluster-dns-metrics-listen",
        "0.0.0.0:0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The addresses of the `kube-dns` EndpointSlices through `server`, sorted:
/// each server's DNS publishes its own.
fn dns_endpoints(server: &Server) -> String {
    let out = server.kubectl(&[
        "get",
        "endpointslices",
        "-n",
        "kube-system",
        "-l",
        "kubernetes.io/service-name=kube-dns",
        "-o",
        "jsonpath={.items[*].endpoints[*].addresses[*]}",
    ]);
    let mut addresses: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(String::from)
        .collect();
    addresses.sort();
    addresses.join(" ")
}

/// Binds every address, advertising `ip` (a loopback address of its own)
/// in the `kubernetes` endpoints.
fn advertising(mut flags: Vec<String>, ip: &str) -> Vec<String> {
    flags.extend(["--bind-address", "0.0.0.0", "--node-ip", ip].map(String::from));
    flags
}

/// The `kubernetes` Endpoints' addresses and the EndpointSlices'
/// addresses, each sorted, through `server`.
fn api_endpoints(server: &Server) -> (String, String) {
    let endpoints = server.kubectl(&[
        "get",
        "endpoints",
        "kubernetes",
        "-o",
        "jsonpath={.subsets[*].addresses[*].ip}",
    ]);
    let slices = server.kubectl(&[
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=kubernetes",
        "-o",
        "jsonpath={.items[*].endpoints[*].addresses[*]}",
    ]);
    // The servers under test listen on ports of their own, so each address
    // comes in a subset (and a slice) of its port, ordered by port: sort
    // the addresses to compare the sets.
    let sorted = |out: &[u8]| {
        let text = String::from_utf8_lossy(out);
        let mut ips: Vec<&str> = text.split_whitespace().collect();
        ips.sort_unstable();
        ips.join(" ")
    };
    (sorted(&endpoints.stdout), sorted(&slices.stdout))
}

fn start(flags: &[String]) -> Server {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    Server::start_with(&flags)
}

/// Every key under `prefix` in etcd, read with a client of our own.
fn etcd_values(endpoint: &str, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let store = EtcdStore::connect(EtcdConfig::new([endpoint]).compaction(None))
            .await
            .expect("connect to the test etcd");
        let listed = store.list(prefix, None, 0).await.expect("list etcd");
        store.close().await.expect("close");
        listed
            .items
            .into_iter()
            .map(|kv| (kv.key, kv.value.to_vec()))
            .collect()
    })
}

/// Runs `skiff server` expected to refuse to start; returns its stderr.
fn refused_start(etcd: &str, first: &Server, token: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut args = server_flags(etcd);
    args.extend([
        "--server".to_string(),
        format!("https://127.0.0.1:{}", first.port),
        "--token".to_string(),
        token.to_string(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let stderr = refused_server(
        dir.path(),
        &args,
        Duration::from_secs(60),
        "a server with a bad token kept running",
    );
    assert!(
        !dir.path().join("kubeconfig.yaml").exists(),
        "nothing was served: {stderr}"
    );
    stderr
}

fn json(server: &Server, args: &[&str]) -> Value {
    let out = server.kubectl_ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The holder of `kube-system/<lease>`, once someone holds it.
fn holder(server: &Server, lease: &str) -> Option<String> {
    let out = server.kubectl(&[
        "get",
        "lease",
        "-n",
        "kube-system",
        lease,
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ]);
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

#[test]
fn two_servers_on_one_etcd_share_the_cluster_and_the_survivor_takes_over() {
    let etcd_dir = tempfile::tempdir().expect("temp dir");
    let etcd = EtcdProcess::start(etcd_dir.path())
        .unwrap_or_else(|e| panic!("cannot start the test etcd: {e}"));
    let endpoint = etcd.endpoint().to_string();

    let mut first = start(&advertising(server_flags(&endpoint), "127.0.0.2"));
    let token = std::fs::read_to_string(first.data_dir().join("token"))
        .expect("the first server writes DATA_DIR/token")
        .trim()
        .to_string();
    assert!(
        token.starts_with("K10") && token.contains("::server:"),
        "{token}"
    );
    // The first server leads both before anyone else runs.
    let leader_cm = eventually(
        Duration::from_secs(30),
        "a controller-manager leader",
        || holder(&first, "kube-controller-manager"),
    );
    let leader_sched = eventually(Duration::from_secs(30), "a scheduler leader", || {
        holder(&first, "kube-scheduler")
    });

    // The bootstrap data is in etcd, outside the API's keys and encrypted.
    let bootstrap = etcd_values(&endpoint, "/skiff/bootstrap");
    assert_eq!(bootstrap.len(), 1, "one bootstrap key");
    let stored = String::from_utf8_lossy(&bootstrap[0].1);
    assert!(
        !stored.contains("PRIVATE KEY") && !stored.contains("BEGIN"),
        "the bootstrap data is stored in the clear"
    );
    let raw = first.kubectl(&["get", "--raw", "/skiff/bootstrap"]);
    assert!(!raw.status.success(), "the API serves the bootstrap key");

    // A wrong secret, and the right secret under another CA's hash, are
    // refused before anything is served.
    let (hash_part, secret) = token.split_once("::server:").expect("token form");
    let wrong_secret = refused_start(&endpoint, &first, &format!("{hash_part}::server:not-it"));
    assert_contains(&wrong_secret, "the token does not match this cluster");
    let other_ca = format!("K10{}::server:{secret}", "0".repeat(64));
    let wrong_ca = refused_start(&endpoint, &first, &other_ca);
    assert_contains(&wrong_ca, "CA hash does not match");

    // The second server joins with the token and runs the nodes.
    let mut joined = advertising(server_flags(&endpoint), "127.0.0.3");
    joined.extend([
        "--server".to_string(),
        format!("https://127.0.0.1:{}", first.port),
        "--token".to_string(),
        token.clone(),
        "--simulated-nodes".to_string(),
        "2".to_string(),
    ]);
    let second = start(&joined);
    for shared in ["tls/ca.crt", "tls/service-account.key", "token.csv"] {
        assert_eq!(
            std::fs::read(first.data_dir().join(shared)).expect("first's file"),
            std::fs::read(second.data_dir().join(shared)).expect("second's file"),
            "{shared} differs between the servers"
        );
    }
    assert_eq!(
        std::fs::read_to_string(second.data_dir().join("token"))
            .expect("the joined server's token")
            .trim(),
        token
    );
    // One cluster: the first server's admin credentials work on the second
    // (same CA, same client CA), and what one stores the other reads.
    first.admin().ok(&[
        "--server",
        &format!("https://127.0.0.1:{}", second.port),
        "get",
        "namespace",
        "default",
        "-o",
        "name",
    ]);
    first.kubectl_ok(&[
        "create",
        "configmap",
        "shared",
        "--from-literal=k=from-first",
    ]);
    eventually(
        Duration::from_secs(10),
        "the configmap through the second",
        || {
            let out = second.kubectl(&["get", "configmap", "shared", "-o", "jsonpath={.data.k}"]);
            (String::from_utf8_lossy(&out.stdout) == "from-first").then_some(())
        },
    );
    // A list through the second, right after a write through the first,
    // already holds it: a list without resourceVersion is a consistent read.
    first.kubectl_ok(&["create", "configmap", "fresh"]);
    let listed = second.kubectl_ok(&["get", "configmaps", "-o", "name"]);
    assert_contains(&listed, "configmap/fresh");
    // A service-account token the first issued is accepted by the second.
    first.kubectl_ok(&["create", "serviceaccount", "reader"]);
    let sa_token = first.kubectl_ok(&["create", "token", "reader"]);
    let whoami = second.kubectl(&[
        "--token",
        sa_token.trim(),
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&whoami.stdout),
        "system:serviceaccount:default:reader",
        "{}",
        String::from_utf8_lossy(&whoami.stderr)
    );
    // Both servers are the `kubernetes` endpoints, sorted, through either;
    // each keeps its lease.
    let both = (
        "127.0.0.2 127.0.0.3".to_string(),
        "127.0.0.2 127.0.0.3".to_string(),
    );
    for server in [&first, &second] {
        eventually(Duration::from_secs(20), "both servers as endpoints", || {
            (api_endpoints(server) == both).then_some(())
        });
    }
    // Each server's DNS is a `kube-dns` endpoint of its own.
    eventually(
        Duration::from_secs(20),
        "both DNS servers as endpoints",
        || (dns_endpoints(&first) == "127.0.0.2 127.0.0.3").then_some(()),
    );
    let leases = first.kubectl_ok(&[
        "get",
        "leases",
        "-n",
        "kube-system",
        "-l",
        "apiserver.kubernetes.io/identity=kube-apiserver",
        "-o",
        "name",
    ]);
    assert_eq!(leases.lines().count(), 2, "{leases}");
    // The joined server waits: it does not lead while the first renews.
    assert_eq!(
        holder(&second, "kube-controller-manager").as_deref(),
        Some(leader_cm.as_str())
    );
    assert!(
        first.log().contains(&leader_cm) && first.log().contains(&leader_sched),
        "the first server holds both leases"
    );
    assert!(
        !second.log().contains("controller manager starting"),
        "the second server's controllers run beside the leader's"
    );

    // Services created through both at once get distinct addresses.
    let create_through = |server: &Server, side: &str| {
        for i in 0..20 {
            server.kubectl_ok(&[
                "create",
                "service",
                "nodeport",
                &format!("svc-{side}-{i}"),
                "--tcp=80:8080",
            ]);
        }
    };
    std::thread::scope(|scope| {
        scope.spawn(|| create_through(&first, "a"));
        scope.spawn(|| create_through(&second, "b"));
    });
    let services = json(&first, &["get", "services", "-A", "-o", "json"]);
    let items = services["items"].as_array().expect("items");
    let created: Vec<&Value> = items
        .iter()
        .filter(|s| {
            s["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("svc-"))
        })
        .collect();
    assert_eq!(created.len(), 40);
    let ips: HashSet<&str> = items
        .iter()
        .filter_map(|s| s["spec"]["clusterIP"].as_str())
        .collect();
    assert_eq!(ips.len(), items.len(), "a cluster IP was handed out twice");
    let ports: HashSet<u64> = created
        .iter()
        .filter_map(|s| s["spec"]["ports"][0]["nodePort"].as_u64())
        .collect();
    assert_eq!(ports.len(), 40, "a node port was handed out twice");
    // Each allocation is a record in the store; a deleted Service's go.
    let records = etcd_values(&endpoint, "/skiff/ranges/serviceips/");
    assert_eq!(records.len(), items.len(), "one record per cluster IP");
    let gone = created[0]["spec"]["clusterIP"]
        .as_str()
        .expect("ip")
        .to_string();
    let gone_name = created[0]["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    second.kubectl_ok(&["delete", "service", &gone_name]);
    eventually(
        Duration::from_secs(10),
        "the deleted Service's record released",
        || {
            etcd_values(&endpoint, "/skiff/ranges/serviceips/")
                .iter()
                .all(|(key, _)| !key.ends_with(&format!("/{gone}")))
                .then_some(())
        },
    );

    // SIGKILL the leader: the survivor takes both leases and runs a new
    // Deployment's pods on its nodes.
    first.kill();
    let killed_at = Instant::now();
    second.kubectl_ok(&[
        "create",
        "deployment",
        "web",
        "--image=busybox",
        "--replicas=2",
    ]);
    eventually(
        Duration::from_secs(45),
        "the Deployment's pods running",
        || {
            let pods = second.kubectl(&[
                "get",
                "pods",
                "-l",
                "app=web",
                "-o",
                "jsonpath={.items[*].status.phase}",
            ]);
            let phases = String::from_utf8_lossy(&pods.stdout).to_string();
            (phases
                .split_whitespace()
                .filter(|p| *p == "Running")
                .count()
                == 2)
                .then_some(())
        },
    );
    assert!(killed_at.elapsed() < Duration::from_secs(45));
    // Within the killed server's lease TTL (15 s) and one renewal (5 s) of
    // the survivor's, only the survivor is left.
    let only_survivor = ("127.0.0.3".to_string(), "127.0.0.3".to_string());
    eventually(
        (killed_at + Duration::from_secs(22)).saturating_duration_since(Instant::now()),
        "only the survivor as endpoints",
        || (api_endpoints(&second) == only_survivor).then_some(()),
    );
    // A TTL after that its Lease is deleted, and with it (the garbage
    // collector, now the survivor's) its DNS slice.
    eventually(
        (killed_at + Duration::from_secs(75)).saturating_duration_since(Instant::now()),
        "only the survivor's DNS as endpoints",
        || (dns_endpoints(&second) == "127.0.0.3").then_some(()),
    );
    let new_cm = holder(&second, "kube-controller-manager").expect("a new leader");
    let new_sched = holder(&second, "kube-scheduler").expect("a new leader");
    assert!(
        new_cm != leader_cm && second.log().contains(&new_cm),
        "{new_cm}"
    );
    assert!(
        new_sched != leader_sched && second.log().contains(&new_sched),
        "{new_sched}"
    );
    drop(second);
    drop(first);
}
