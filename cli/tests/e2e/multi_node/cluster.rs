//! A cluster of several hosts on one machine: each host a network
//! namespace with a veth pair to a bridge in the root namespace (the
//! "switch"), the server in one of them and a `skiff agent` in each of the
//! others, with its own data dir, containerd (started by the agent), pod
//! bridge and node token. The test process drives it from the root
//! namespace with kubectl over the bridge.
//!
//! Every name carries `mn<N>` (N the test's number): namespaces `mn<N>s`,
//! `mn<N>a`, ..., the bridge `mn<N>br`, veths `mn<N>v<host>`, nodes
//! `mn<N>-a`, ...; host addresses are `10.209.N.0/24`, pod CIDRs come from
//! `10.(220+N).0.0/16` and Services from `10.(230+N).0.0/16`, so clusters of
//! different tests never meet, nor the single-host tests' servers. Dropping
//! the cluster (also on a failed assertion) kills every process it started
//! and what they started (containerd, shims, containers), then deletes the
//! namespaces, the bridge and the agents' cgroups (`/skiff-e2e-mn<N>`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use skiff_node::images;

use super::super::containerd::{
    all_pids, assert_root, node_ready, processes_naming, unmount_under,
};
use super::super::support::{
    Kubectl, skiff_binary, spawn_logged, succeeded, terminate, wait_server_ready,
};

/// One agent host.
pub struct AgentHost {
    /// Its Node's name (`mn<N>-<letter>`).
    pub node: String,
    /// Its network namespace.
    pub netns: String,
    /// Its address on the switch.
    pub ip: String,
    /// The bearer token naming it `system:node:<node>`.
    pub token: String,
    /// Its data dir.
    pub data_dir: PathBuf,
    /// Its pod bridge.
    pub bridge: String,
    child: Option<Child>,
}

/// The cluster; see the module docs.
pub struct Cluster {
    /// The test's number.
    pub n: u8,
    /// Where every data dir and log lives.
    pub dir: tempfile::TempDir,
    /// `--flannel-backend` of every agent.
    pub backend: String,
    /// The server's address on the switch.
    pub server_ip: String,
    /// The agents, in letter order.
    pub agents: Vec<AgentHost>,
    server: Option<Child>,
    namespaces: Vec<String>,
    bridge: Option<String>,
}

/// The switch's address in the root namespace.
fn gateway(n: u8) -> String {
    format!("10.209.{n}.1")
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}"));
    succeeded(program, args, &out);
}

impl Cluster {
    /// Starts the switch, the server and one agent per letter in `agents`
    /// (each with `--flannel-backend backend`), and waits until every Node
    /// is Ready.
    pub fn start(n: u8, backend: &str, agents: &[char]) -> Self {
        assert_root();
        let mut cluster = Cluster {
            n,
            dir: tempfile::Builder::new()
                .prefix(&format!("mn{n}-"))
                .tempdir_in("/tmp")
                .expect("temp dir"),
            backend: backend.to_string(),
            server_ip: format!("10.209.{n}.10"),
            agents: Vec::new(),
            server: None,
            namespaces: Vec::new(),
            bridge: None,
        };
        cluster.switch();
        cluster.host('s', &cluster.server_ip.clone());
        for (i, letter) in agents.iter().enumerate() {
            let ip = format!("10.209.{n}.{}", 11 + i);
            cluster.host(*letter, &ip);
            let node = format!("mn{n}-{letter}");
            let data_dir = cluster.dir.path().join(format!("agent-{letter}"));
            std::fs::create_dir_all(data_dir.join("agent/images")).expect("agent dir");
            // The agent imports every archive there when it starts.
            images::write_host_busybox(&data_dir.join("agent/images/busybox.tar"))
                .expect("busybox archive");
            cluster.agents.push(AgentHost {
                token: format!(
                    "mn{n}{letter}-{:x}",
                    std::process::id() as u64 * 7919 + n as u64
                ),
                netns: format!("mn{n}{letter}"),
                bridge: format!("mn{n}p{letter}"),
                node,
                ip,
                data_dir,
                child: None,
            });
        }
        cluster.start_server();
        for i in 0..cluster.agents.len() {
            cluster.start_agent(i);
        }
        for agent in &cluster.agents {
            cluster.wait_ready(&agent.node);
        }
        cluster
    }

    /// The bridge all hosts hang off.
    fn switch(&mut self) {
        let bridge = format!("mn{}br", self.n);
        let _ = Command::new("ip")
            .args(["link", "delete", &bridge])
            .stderr(Stdio::null())
            .status();
        run("ip", &["link", "add", &bridge, "type", "bridge"]);
        self.bridge = Some(bridge.clone());
        run(
            "ip",
            &[
                "addr",
                "add",
                &format!("{}/24", gateway(self.n)),
                "dev",
                &bridge,
            ],
        );
        run("ip", &["link", "set", &bridge, "up"]);
    }

    /// A host: namespace `mn<N><letter>`, its `eth0` at `ip` on the switch.
    fn host(&mut self, letter: char, ip: &str) {
        let n = self.n;
        let netns = format!("mn{n}{letter}");
        let veth = format!("mn{n}v{letter}");
        let bridge = self.bridge.clone().expect("switch first");
        let _ = Command::new("ip")
            .args(["netns", "delete", &netns])
            .stderr(Stdio::null())
            .status();
        run("ip", &["netns", "add", &netns]);
        self.namespaces.push(netns.clone());
        run(
            "ip",
            &[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &netns,
            ],
        );
        run("ip", &["link", "set", &veth, "master", &bridge, "up"]);
        run(
            "ip",
            &[
                "-n",
                &netns,
                "addr",
                "add",
                &format!("{ip}/24"),
                "dev",
                "eth0",
            ],
        );
        run("ip", &["-n", &netns, "link", "set", "eth0", "up"]);
        run("ip", &["-n", &netns, "link", "set", "lo", "up"]);
        run(
            "ip",
            &["-n", &netns, "route", "add", "default", "via", &gateway(n)],
        );
    }

    fn server_dir(&self) -> PathBuf {
        self.dir.path().join("server")
    }

    /// The admin's kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.server_dir().join("kubeconfig.yaml")
    }

    /// The cluster CA agents verify the server with.
    pub fn ca_file(&self) -> PathBuf {
        self.server_dir().join("tls/ca.crt")
    }

    /// The cluster DNS's Service IP.
    pub fn cluster_dns(&self) -> String {
        format!("10.{}.0.10", 230 + u16::from(self.n))
    }

    /// Where the log of `name` (the server or a node) goes.
    fn log_path(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.log"))
    }

    /// A log's text.
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.log_path(name)).unwrap_or_default()
    }

    /// Starts the server (control plane only) in namespace `mn<N>s`, with
    /// the agents' node tokens in its token file.
    fn start_server(&mut self) {
        let dir = self.server_dir();
        std::fs::create_dir_all(&dir).expect("server dir");
        let tokens: String = self
            .agents
            .iter()
            .map(|a| {
                format!(
                    "{},system:node:{},{},\"system:nodes\"\n",
                    a.token, a.node, a.node
                )
            })
            .collect();
        std::fs::write(dir.join("token.csv"), tokens).expect("token file");
        let n = u16::from(self.n);
        let args: Vec<String> = vec![
            "server".into(),
            "--data-dir".into(),
            dir.display().to_string(),
            "--bind-address".into(),
            self.server_ip.clone(),
            "--https-listen-port".into(),
            "6443".into(),
            "--tls-san".into(),
            self.server_ip.clone(),
            "--node-ip".into(),
            self.server_ip.clone(),
            "--disable-agent".into(),
            "--disable-snapshots".into(),
            "--cluster-cidr".into(),
            format!("10.{}.0.0/16", 220 + n),
            "--service-cidr".into(),
            format!("10.{}.0.0/16", 230 + n),
            "--cluster-dns".into(),
            self.cluster_dns(),
            // `kubectl top` has figures after two scrapes.
            "--metric-resolution".into(),
            "2s".into(),
        ];
        let (kubeconfig, log) = (self.kubeconfig(), self.log_path("server"));
        let child = spawn_logged(in_netns(&format!("mn{}s", self.n)).args(&args), &log);
        wait_server_ready(
            self.server.insert(child),
            &kubeconfig,
            &log,
            Duration::from_secs(90),
        );
    }

    /// Starts agent `i` (again, after [`stop_agent`](Self::stop_agent)).
    pub fn start_agent(&mut self, i: usize) {
        let agent = &self.agents[i];
        let token = self.join_token();
        let child = self.spawn_agent(agent, &agent.node, &token, &agent.data_dir, "");
        self.agents[i].child = Some(child);
    }

    /// The server's join token (`DATA_DIR/token`, `K10<CA hash>::server:…`):
    /// agents join with it by TLS bootstrap, as `skiff agent --token` does.
    pub fn join_token(&self) -> String {
        std::fs::read_to_string(self.server_dir().join("token"))
            .expect("the server's join token")
            .trim()
            .to_string()
    }

    /// Joins a host to the cluster: `skiff agent` in `host`'s namespace
    /// with `--server` and `--token` (a K10 join token, checked against the
    /// CA it names; any other token with `--ca-file`). (The one place that knows
    /// how agents join; `log_suffix` keeps the logs of extra agents apart.)
    pub fn spawn_agent(
        &self,
        host: &AgentHost,
        node: &str,
        token: &str,
        data_dir: &Path,
        log_suffix: &str,
    ) -> Child {
        std::fs::create_dir_all(data_dir).expect("agent data dir");
        let resolv = data_dir.join("resolv.conf");
        std::fs::write(&resolv, format!("nameserver {}\n", gateway(self.n))).expect("resolv.conf");
        spawn_logged(
            in_netns(&host.netns)
                .arg("agent")
                .arg("--data-dir")
                .arg(data_dir)
                .args(["--server", &format!("https://{}:6443", self.server_ip)])
                .args(["--token", token])
                .args(
                    (!token.starts_with("K10"))
                        .then(|| ["--ca-file".into(), self.ca_file().into_os_string()])
                        .into_iter()
                        .flatten(),
                )
                .args(["--node-name", node])
                .args(["--node-ip", &host.ip])
                .args(["--cni-bridge", &host.bridge])
                .args(["--cluster-dns", &self.cluster_dns()])
                .arg("--resolv-conf")
                .arg(&resolv)
                .args(["--flannel-backend", &self.backend])
                // k3s's flag for where volumes go; the server's own node
                // keeps the default (DATA_DIR/storage).
                .arg("--default-local-storage-path")
                .arg(data_dir.join("volumes"))
                .arg("--cgroup-root")
                .arg(format!("{}/{node}", self.cgroup_root())),
            &self.log_path(&format!("{node}{log_suffix}")),
        )
    }

    /// The cgroup tree under which every agent of this cluster keeps its
    /// pods' cgroups (one `--cgroup-root` per agent inside it), removed
    /// with the cluster.
    fn cgroup_root(&self) -> String {
        format!("/skiff-e2e-mn{}", self.n)
    }

    /// SIGTERMs agent `i` and waits for it to exit (its containers keep
    /// running, as a stopped kubelet's do).
    pub fn stop_agent(&mut self, i: usize) {
        if let Some(mut child) = self.agents[i].child.take() {
            terminate(&mut child);
        }
    }

    /// Waits until `node` is registered and Ready; returns it.
    pub fn wait_ready(&self, node: &str) -> serde_json::Value {
        node_ready(&self.admin(), node, Duration::from_secs(180))
    }

    /// kubectl as the admin.
    pub fn admin(&self) -> Kubectl {
        Kubectl::new(self.kubeconfig())
    }

    /// Runs kubectl as the admin.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.admin().run(args)
    }

    /// kubectl that must succeed; its output.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        self.admin().ok(args)
    }

    /// `kubectl apply` of `manifest`.
    pub fn apply(&self, manifest: &serde_json::Value) {
        self.admin()
            .stdin_ok(&["apply", "-f", "-"], &manifest.to_string());
    }

    /// Runs `command` in namespace `netns` (`ip netns exec`); its output.
    pub fn in_host(&self, netns: &str, command: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", netns])
            .args(command)
            .stdin(Stdio::null())
            .output()
            .expect("ip netns exec")
    }

    /// Everything this cluster started: processes in its namespaces, and
    /// processes whose command line names its directory (containerd's
    /// shims, which name their containerd's socket), with all their
    /// descendants (the containers).
    fn processes(&self) -> BTreeSet<u32> {
        let mut roots: BTreeSet<u32> = BTreeSet::new();
        for netns in &self.namespaces {
            if let Ok(out) = Command::new("ip").args(["netns", "pids", netns]).output() {
                roots.extend(
                    String::from_utf8_lossy(&out.stdout)
                        .split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
        roots.extend(
            processes_naming(self.dir.path())
                .into_iter()
                .map(|(pid, _)| pid),
        );
        let mut parents: Vec<(u32, u32)> = Vec::new();
        for pid in all_pids() {
            // `pid (comm) state ppid ...`; comm may hold spaces.
            if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                && let Some((_, rest)) = stat.rsplit_once(')')
                && let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok())
            {
                parents.push((pid, ppid));
            }
        }
        let mut all = roots;
        loop {
            let before = all.len();
            for (pid, ppid) in &parents {
                if all.contains(ppid) {
                    all.insert(*pid);
                }
            }
            if all.len() == before {
                break;
            }
        }
        all.remove(&std::process::id());
        all
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Pods first, through the API, while the agents still run: they
        // stop the containers and free their network namespaces.
        if self.server.is_some() {
            let _ = self.kubectl(&["delete", "deployments,services", "--all", "--wait=false"]);
            let _ = self.kubectl(&[
                "delete",
                "pods",
                "--all",
                "--grace-period=1",
                "--wait=false",
            ]);
            let deadline = Instant::now() + Duration::from_secs(40);
            while Instant::now() < deadline {
                let out = self.kubectl(&["get", "pods", "-A", "-o", "name"]);
                if !out.status.success() || out.stdout.is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(500));
            }
            // Pods of a node whose agent is gone never finish terminating.
            let _ = self.kubectl(&["delete", "pods", "--all", "--grace-period=0", "--force"]);
        }
        for agent in &mut self.agents {
            if let Some(mut child) = agent.child.take() {
                terminate(&mut child);
            }
        }
        if let Some(mut child) = self.server.take() {
            terminate(&mut child);
        }
        let processes = self.processes();
        // The pods' network namespaces (containerd's `/run/netns/cni-*`)
        // of the containers about to be killed.
        let pod_namespaces: BTreeSet<u64> = processes
            .iter()
            .filter_map(|pid| netns_inode(Path::new(&format!("/proc/{pid}/ns/net"))))
            .collect();
        for pid in &processes {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        for entry in std::fs::read_dir("/run/netns")
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("cni-")
                && netns_inode(&entry.path()).is_some_and(|i| pod_namespaces.contains(&i))
            {
                let _ = Command::new("ip").args(["netns", "delete", &name]).status();
            }
        }
        // containerd's mounts (container root file systems, shm) under the
        // data dirs.
        unmount_under(self.dir.path());
        skiff_testkit::host::remove_cgroup_tree(&self.cgroup_root());
        for netns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "delete", netns]).status();
        }
        if let Some(bridge) = &self.bridge {
            let _ = Command::new("ip").args(["link", "delete", bridge]).status();
        }
        if std::thread::panicking() {
            for name in std::iter::once("server".to_string())
                .chain(self.agents.iter().map(|a| a.node.clone()))
            {
                let log = self.log(&name);
                let tail: Vec<&str> = log.lines().rev().take(80).collect();
                eprintln!("---- {name} log (last 80 lines) ----");
                for line in tail.iter().rev() {
                    eprintln!("{line}");
                }
            }
        }
    }
}

/// `skiff` inside the network namespace `netns`. Only the network
/// namespace changes (`nsenter --net`, not `ip netns exec`, whose fresh
/// `/sys` has no cgroup mounts, which runc needs).
fn in_netns(netns: &str) -> Command {
    let mut command = Command::new("nsenter");
    command
        .arg(format!("--net=/run/netns/{netns}"))
        .arg("--")
        .arg(skiff_binary());
    command
}

/// The inode of a network namespace (of a process or a `/run/netns` file).
fn netns_inode(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.ino())
}
