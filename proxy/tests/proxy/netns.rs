//! A network namespace for one test, removed on drop, with helpers to
//! configure it, serve HTTP in it and fetch from inside it.

use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use skiff_proxy::Nft;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A network namespace removed on drop, with the servers started in it.
pub struct Netns {
    pub name: String,
    servers: Vec<Child>,
}

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

impl Netns {
    pub fn new() -> Self {
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

    /// `d0` with `addresses` (the first is the source of local traffic),
    /// the default route through it.
    pub fn network(&self, addresses: &[&str]) {
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
    pub fn serve(&mut self, ip: &str, body: &str) {
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
    pub fn fetch(&self, address: &str) -> Result<String, String> {
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

    pub fn nft(&self) -> Nft {
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
