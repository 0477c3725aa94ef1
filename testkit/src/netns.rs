//! Network namespaces for the tests that need a network of their own (the
//! service proxy's and the network policy controller's, which apply real
//! nftables rules): one [`Netns`] per namespace, removed on drop with the
//! HTTP servers started in it, plus [`ok`] to run a command on the host and
//! [`fetch_until`] to wait for what the rules let through. Creating
//! namespaces needs root, as those tests do.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use skiff_common::nft::{Nft, TableSync};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Runs `args` on the host (the first is the program).
fn run(args: &[&str]) -> Output {
    Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Runs `args` on the host and returns its output; panics with its error
/// output when it fails.
pub fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A name no other namespace of this process (nor of a concurrent test
/// process) has: `prefix`, the process id and a counter.
pub fn unique_name(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

/// A network namespace with its loopback up, removed on drop with the
/// servers started in it.
pub struct Netns {
    /// The namespace's name (`ip netns` and `nft` address it by it).
    pub name: String,
    /// How long one [`fetch`](Self::fetch) may take before it counts as
    /// failed (dropped traffic only ends there). 2 s unless changed.
    pub fetch_timeout: Duration,
    /// Each server with the directory it serves, removed with it.
    servers: Mutex<Vec<(Child, PathBuf)>>,
}

impl Netns {
    /// Adds namespace `name` and sets its loopback up.
    pub fn new(name: String) -> Self {
        ok(&["ip", "netns", "add", &name]);
        let ns = Self {
            name,
            fetch_timeout: Duration::from_secs(2),
            servers: Mutex::new(Vec::new()),
        };
        ns.exec_ok(&["ip", "link", "set", "lo", "up"]);
        ns
    }

    /// Runs `args` inside the namespace.
    pub fn exec(&self, args: &[&str]) -> Output {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend(args);
        run(&full)
    }

    /// Runs `args` inside the namespace as [`ok`] does.
    pub fn exec_ok(&self, args: &[&str]) -> String {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend(args);
        ok(&full)
    }

    /// `wget` of `http://address/` from inside: the body, or the exit
    /// status and error output.
    pub fn fetch(&self, address: &str) -> Result<String, String> {
        // busybox 1.35's `wget -T` crashes; `timeout` bounds it instead.
        let seconds = self.fetch_timeout.as_secs().max(1).to_string();
        let out = self.exec(&[
            "timeout",
            &seconds,
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

    /// busybox httpd on `ip:8080` inside, answering `/` with `body`; returns
    /// once it answers a fetch from inside.
    pub fn serve(&self, ip: &str, body: &str) {
        let dir = std::env::temp_dir().join(format!("{}-{ip}", self.name));
        std::fs::create_dir_all(&dir).expect("the server's directory");
        std::fs::write(dir.join("index.html"), body).expect("the server's page");
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
        self.servers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((child, dir));
        for _ in 0..50 {
            if self.fetch(&format!("{ip}:8080")).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("httpd on {ip} did not start");
    }

    /// `nft` run inside the namespace.
    pub fn nft(&self) -> Nft {
        Nft::in_netns(self.name.clone())
    }

    /// Points `sync` at table `table` in this namespace, as the tests of a
    /// running proxy or policy controller keep it: the host's sysctls left
    /// alone, and a resync every second, so a table flushed by the test is
    /// rebuilt well within its patience.
    pub fn keep_table(&self, sync: &mut TableSync, table: &str) {
        sync.table = table.into();
        sync.nft = self.nft();
        sync.host_sysctls = false;
        sync.resync = Duration::from_secs(1);
    }

    /// A veth pair from this namespace (end `here`) to `peer` (end
    /// `there`), both ends down and without addresses.
    pub fn link_peer(&self, here: &str, peer: &Netns, there: &str) {
        ok(&[
            "ip", "link", "add", here, "netns", &self.name, "type", "veth", "peer", "name", there,
            "netns", &peer.name,
        ]);
    }

    /// Gives interface `dev` the address `cidr` (`a.b.c.d/len`) and sets it
    /// up.
    pub fn address(&self, dev: &str, cidr: &str) {
        self.exec_ok(&["ip", "addr", "add", cidr, "dev", dev]);
        self.exec_ok(&["ip", "link", "set", dev, "up"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let servers = self.servers.get_mut().unwrap_or_else(|e| e.into_inner());
        for (child, dir) in servers {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(dir);
        }
        let _ = run(&["ip", "netns", "del", &self.name]);
    }
}

/// Fetches `address` from inside `ns` (on a blocking thread: it runs
/// commands) until `want` holds of the answer, for up to 20 s; panics
/// naming `what` and the last answer otherwise. Rules applied by a running
/// controller take effect a little later than the API change behind them.
pub async fn fetch_until(
    ns: &Arc<Netns>,
    address: &str,
    what: &str,
    want: impl Fn(&Result<String, String>) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = Err(String::new());
    while Instant::now() < deadline {
        let (ns, address) = (ns.clone(), address.to_string());
        last = tokio::task::spawn_blocking(move || ns.fetch(&address))
            .await
            .expect("the fetch's thread");
        if want(&last) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{what}: last answer {last:?}");
}
