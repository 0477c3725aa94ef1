//! Starting and stopping a `skiff server` under test, and running clients
//! against it.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// A running `skiff server` in its own data directory.
pub struct Server {
    child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub port: u16,
    /// The built-in ingress's HTTP and HTTPS ports (free ports, so that
    /// servers running side by side never contend for 80 and 443).
    pub ingress_ports: (u16, u16),
    args: Vec<String>,
}

/// The `skiff` binary under test: `SKIFF_E2E_BIN` when set (a copy taken
/// right after the build, on machines where several checkouts share one
/// target directory and so one `target/debug/skiff`), else cargo's.
pub fn skiff_binary() -> PathBuf {
    std::env::var_os("SKIFF_E2E_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_skiff")))
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl Server {
    /// Starts a control-plane-only server and waits until it answers.
    pub fn start() -> Self {
        Self::start_with(&["--disable-agent"])
    }

    /// Starts a server with extra flags and waits until it answers.
    pub fn start_with(extra: &[&str]) -> Self {
        Self::start_in(&std::env::temp_dir(), extra)
    }

    /// Starts a server whose data directory is a new directory in `parent`
    /// (a small file system, say) and waits until it answers.
    pub fn start_in(parent: &Path, extra: &[&str]) -> Self {
        Self::start_in_dir(tempfile::tempdir_in(parent).expect("temp data dir"), extra)
    }

    /// Starts a server on `dir` as its data directory (prepared by the
    /// test) and waits until it answers.
    pub fn start_in_dir(dir: tempfile::TempDir, extra: &[&str]) -> Self {
        let mut server = Server {
            child: None,
            port: free_port(),
            ingress_ports: (free_port(), free_port()),
            dir,
            args: extra.iter().map(|s| s.to_string()).collect(),
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let mut command = Command::new(skiff_binary());
        command
            .arg("server")
            .arg("--data-dir")
            .arg(self.dir.path())
            .arg("--https-listen-port")
            .arg(self.port.to_string())
            // Loopback unless the test binds elsewhere itself.
            .args(
                (!self.args.iter().any(|a| a == "--bind-address"))
                    .then_some(["--bind-address", "127.0.0.1"])
                    .into_iter()
                    .flatten(),
            )
            .args(&self.args)
            // Servers with a node agent run the service proxy: each gets
            // its own nftables table, so concurrent servers never share one.
            .env("SKIFF_PROXY_TABLE", format!("skiff-e2e-{}", self.port))
            .env("SKIFF_NETPOL_TABLE", format!("skiff-e2e-np-{}", self.port))
            // Likewise the pod network's masquerade table; and no VXLAN
            // device: servers side by side on one host would contend for
            // its name and port (multi_node runs nodes in namespaces).
            .env(
                "SKIFF_POD_NETWORK_TABLE",
                format!("skiff-e2e-net-{}", self.port),
            )
            .env("SKIFF_FLANNEL_BACKEND", "none")
            // Pod cgroups of its own, removed when the server is dropped.
            .env("SKIFF_CGROUP_ROOT", self.cgroup_root())
            .env("SKIFF_INGRESS_HTTP_PORT", self.ingress_ports.0.to_string())
            .env("SKIFF_INGRESS_HTTPS_PORT", self.ingress_ports.1.to_string());
        self.child = Some(spawn_logged(&mut command, &self.log_path()));
        self.wait_ready();
    }

    /// Where the server's log goes; printed when a test fails to start it.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig.yaml")
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    fn wait_ready(&mut self) {
        let (kubeconfig, log) = (self.kubeconfig(), self.log_path());
        let child = self.child.as_mut().expect("server running");
        wait_server_ready(child, &kubeconfig, &log, Duration::from_secs(60));
    }

    /// kubectl as this server's admin.
    pub fn admin(&self) -> Kubectl {
        Kubectl::new(self.kubeconfig())
    }

    /// Starts a long-running kubectl against this server (`get -w`, say);
    /// its stdout arrives line by line on the receiver.
    pub fn kubectl_lines(&self, args: &[&str]) -> (Child, std::sync::mpsc::Receiver<String>) {
        self.admin().lines(args)
    }

    /// Runs kubectl against this server.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.admin().run(args)
    }

    /// Runs kubectl with `input` on its standard input.
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> Output {
        self.admin().stdin(args, input)
    }

    /// Runs kubectl and returns its standard output, failing the test with
    /// kubectl's error output when it does not succeed.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        self.admin().ok(args)
    }

    /// Runs kubectl with `input` on its standard input (a manifest for
    /// `apply -f -`, say) and returns its standard output, failing the test
    /// with kubectl's error output when it does not succeed.
    pub fn kubectl_stdin_ok(&self, args: &[&str], input: &str) -> String {
        self.admin().stdin_ok(args, input)
    }

    /// Applies a CustomResourceDefinition `manifest` and waits (up to 30 s)
    /// until `crd/<name>` is Established, so that objects of its kind may be
    /// written next.
    pub fn apply_crd(&self, manifest: &str, name: &str) {
        apply(self, manifest);
        self.kubectl_ok(&[
            "wait",
            "--for",
            "condition=established",
            "--timeout=30s",
            &format!("crd/{name}"),
        ]);
    }

    /// `kubectl get events` narrowed by `field_selector`, as the table a
    /// user reads.
    pub fn events(&self, field_selector: &str) -> String {
        self.events_with(field_selector, &[])
    }

    /// [`Self::events`] with more of kubectl's flags (`-o wide`, `-o json`).
    pub fn events_with(&self, field_selector: &str, flags: &[&str]) -> String {
        let mut args = vec!["get", "events", "--field-selector", field_selector];
        args.extend_from_slice(flags);
        self.kubectl_ok(&args)
    }

    /// Runs kubectl expecting failure and returns its error output.
    pub fn kubectl_err(&self, args: &[&str]) -> String {
        self.admin().err(args)
    }

    /// Runs kubectl with `input` on its standard input expecting failure
    /// (a manifest the server must refuse) and returns its error output.
    pub fn kubectl_stdin_err(&self, args: &[&str], input: &str) -> String {
        self.admin().stdin_err(args, input)
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("server running");
        signal(child.id(), "TERM");
        child.wait().expect("wait for server")
    }

    /// SIGKILLs the server: no chance to flush or clean up.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The cgroup root of this server's pods (`--cgroup-root`).
    fn cgroup_root(&self) -> String {
        format!("/skiff-e2e-{}", self.port)
    }

    /// Starts the server again on the same data directory and port.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the server before restarting it");
        self.spawn();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        // A killed server leaves its service rules; they would still match
        // cluster IPs that later servers hand out again.
        // Policy rules stay after a stop by design; a test's must not.
        for (family, table) in [
            ("ip", "skiff-e2e"),
            ("ip", "skiff-e2e-net"),
            ("inet", "skiff-e2e-np"),
        ] {
            skiff_testkit::host::delete_nft_table(family, &format!("{table}-{}", self.port));
        }
        skiff_testkit::host::remove_cgroup_tree(&self.cgroup_root());
        // The agent's pods directory is a shared mount of itself, and
        // containerd's mounts lie below the data dir too.
        skiff_testkit::host::unmount_under(self.data_dir());
    }
}

/// Waits until the `skiff server` process `child` answers `/readyz` to
/// the admin of `kubeconfig` (once it has written it), failing the test
/// with its log `log` when it exits first or is not ready `within`: how a
/// single server and a multi-node cluster's server are waited for.
pub fn wait_server_ready(child: &mut Child, kubeconfig: &Path, log: &Path, within: Duration) {
    let log = || std::fs::read_to_string(log).unwrap_or_default();
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().ok().flatten() {
            panic!("skiff server exited with {status}:\n{}", log());
        }
        if kubeconfig.exists()
            && Kubectl::new(kubeconfig)
                .run(&["get", "--raw", "/readyz"])
                .status
                .success()
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "skiff server not ready after {} s:\n{}",
            within.as_secs(),
            log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGTERMs `child` (by its PID), then SIGKILLs it if it has not exited
/// within 15 s: how a test stops an agent or server it spawned itself.
pub fn terminate(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{name} {pid} failed");
}

/// Runs `skiff server` on `data_dir` (loopback, a free port, then `args`),
/// which must refuse to start within `within` (see [`refused_exit`]); its
/// stderr.
pub fn refused_server(
    data_dir: &Path,
    args: &[&str],
    within: Duration,
    kept_running: &str,
) -> String {
    let child = Command::new(skiff_binary())
        .arg("server")
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--https-listen-port", &free_port().to_string()])
        .args(["--bind-address", "127.0.0.1"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn skiff server");
    refused_exit(child, within, kept_running)
}

/// Waits for `child` (spawned with its stderr piped), which must refuse
/// to run: it has to exit within `within`, unsuccessfully (else the test
/// fails with `kept_running`). Its stderr.
pub fn refused_exit(mut child: Child, within: Duration, kept_running: &str) -> String {
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{kept_running}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        std::io::Read::read_to_string(&mut pipe, &mut stderr).expect("read stderr");
    }
    assert!(!status.success(), "{stderr}");
    stderr
}

/// Fails the test, printing all of `text` (kubectl's output or error,
/// a log), unless `text` contains `needle`.
#[track_caller]
pub fn assert_contains(text: &str, needle: &str) {
    assert!(text.contains(needle), "{needle:?} not in:\n{text}");
}

/// Polls `check` until it returns `Some`, failing after `timeout`.
pub fn eventually<T>(timeout: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `text` (kubectl's `-o json`, say) parsed, failing the test with the
/// text when it is not JSON.
pub fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The EndpointSlices in `namespace` that the label `selector` picks, as
/// kubectl's `-o json` lists them.
pub fn endpoint_slices(server: &Server, namespace: &str, selector: &str) -> Vec<serde_json::Value> {
    let list = server.kubectl_ok(&[
        "get",
        "endpointslices",
        "-n",
        namespace,
        "-l",
        selector,
        "-o",
        "json",
    ]);
    json(&list)["items"].as_array().cloned().unwrap_or_default()
}

/// A kubectl table's lines split into whitespace-separated columns.
pub fn rows(output: &str) -> Vec<Vec<String>> {
    output
        .lines()
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

/// Two string fields, `first` and `second`, of each object in the JSON
/// array `list` (empty where one is missing or `list` is no array): a few
/// fields of a list compared in one assertion.
pub fn field_pairs(list: &serde_json::Value, first: &str, second: &str) -> Vec<(String, String)> {
    let field =
        |item: &serde_json::Value, name: &str| item[name].as_str().unwrap_or("").to_string();
    list.as_array()
        .into_iter()
        .flatten()
        .map(|item| (field(item, first), field(item, second)))
        .collect()
}

/// kubectl with one kubeconfig: a server's or a multi-node cluster's
/// admin, or a user a test wrote a kubeconfig for. The one place the tests
/// build kubectl's command line and check how it ended.
pub struct Kubectl {
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// kubectl with `--kubeconfig kubeconfig`.
    pub fn new(kubeconfig: impl Into<PathBuf>) -> Self {
        Kubectl {
            kubeconfig: kubeconfig.into(),
        }
    }

    /// The command with `args`, for a test that spawns it itself (a
    /// follower it reads as it goes, say).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("kubectl");
        command.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        command
    }

    /// Runs kubectl with `args`; its output, whatever the outcome.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args)
            .stdin(Stdio::null())
            .output()
            .expect("run kubectl")
    }

    /// Runs kubectl with `input` on its standard input.
    pub fn stdin(&self, args: &[&str], input: &str) -> Output {
        output_with_stdin(&mut self.command(args), input.as_bytes())
    }

    /// [`run`](Self::run) that must succeed; its standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        succeeded("kubectl", args, &self.run(args))
    }

    /// [`stdin`](Self::stdin) that must succeed; its standard output.
    pub fn stdin_ok(&self, args: &[&str], input: &str) -> String {
        succeeded("kubectl", args, &self.stdin(args, input))
    }

    /// [`run`](Self::run) that must fail; its error output.
    pub fn err(&self, args: &[&str]) -> String {
        failed("kubectl", args, &self.run(args))
    }

    /// [`stdin`](Self::stdin) that must fail; its error output.
    pub fn stdin_err(&self, args: &[&str], input: &str) -> String {
        failed("kubectl", args, &self.stdin(args, input))
    }

    /// Starts a long-running kubectl (`get -w`, say); its stdout arrives
    /// line by line on the receiver.
    pub fn lines(&self, args: &[&str]) -> (Child, std::sync::mpsc::Receiver<String>) {
        use std::io::BufRead;
        let mut child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn kubectl");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        (child, rx)
    }
}

/// Runs `command` with `input` written to its standard input and its
/// output captured (kubectl given a manifest, openssl given a PEM).
pub fn output_with_stdin(command: &mut Command, input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {:?}: {e}", command.get_program()));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write stdin");
    child.wait_with_output().expect("wait for output")
}

/// A finished command's standard output, as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A finished command's error output, as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The standard output of `program args` that ran to `out`, failing the
/// test with its error output unless it succeeded.
pub fn succeeded(program: &str, args: &[&str], out: &Output) -> String {
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    stdout(out)
}

/// The error output of `program args` that ran to `out`, failing the test
/// when it succeeded.
pub fn failed(program: &str, args: &[&str], out: &Output) -> String {
    assert!(
        !out.status.success(),
        "{program} {args:?} unexpectedly succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr(out)
}

/// Runs the Python client script `tests/python/<script>` with `args`
/// against the cluster `kubeconfig` points at, failing the test with the
/// script's output when it does not succeed.
pub fn python_ok(kubeconfig: &Path, script: &str, args: &[&str]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(script);
    let out = Command::new("python3")
        .arg(&path)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "python {script} {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A kubeconfig for `server` that authenticates with `token` only (no
/// client certificate), written next to the admin's.
pub fn token_kubeconfig(server: &Server, name: &str, token: &str) -> PathBuf {
    let admin: serde_json::Value = serde_json::from_str(
        &server.kubectl_ok(&["config", "view", "--raw", "--minify", "-o", "json"]),
    )
    .expect("kubeconfig as JSON");
    let cluster = admin["clusters"][0]["cluster"].clone();
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "skiff", "cluster": cluster}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": "skiff", "user": name}}],
        "current-context": name,
    });
    let path = server.data_dir().join(format!("{name}.kubeconfig"));
    std::fs::write(&path, config.to_string()).expect("write kubeconfig");
    path
}

/// The status (`True`, `False`, `Unknown`) of `object`'s condition `kind`
/// (a pod's or a node's, as kubectl prints them in JSON), when it has one.
pub fn condition<'a>(object: &'a serde_json::Value, kind: &str) -> Option<&'a str> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)?["status"]
        .as_str()
}

/// `kubectl apply` of `manifest` (JSON or YAML) as `server`'s admin, which
/// must succeed.
pub fn apply(server: &Server, manifest: &str) {
    server.kubectl_stdin_ok(&["apply", "-f", "-"], manifest);
}

/// A service account in `namespace` and a kubeconfig holding its token.
pub fn service_account(server: &Server, namespace: &str, name: &str) -> PathBuf {
    server.kubectl_ok(&["create", "serviceaccount", name, "-n", namespace]);
    let token = server.kubectl_ok(&["create", "token", name, "-n", namespace]);
    token_kubeconfig(server, &format!("{namespace}-{name}"), token.trim())
}

/// Binds service account `<namespace>/<account>` to `role` (`--role=NAME`
/// or `--clusterrole=NAME`) in its own namespace, as the cluster's admin
/// creating RoleBinding `binding`.
pub fn bind_account(server: &Server, binding: &str, role: &str, namespace: &str, account: &str) {
    server.kubectl_ok(&[
        "create",
        "rolebinding",
        binding,
        role,
        &format!("--serviceaccount={namespace}:{account}"),
        "-n",
        namespace,
    ]);
}

/// A service account `default/<name>` holding the `admin` ClusterRole in
/// every namespace (everything on Secrets, not cluster-admin), and a
/// kubeconfig with its token: the ordinary user admin endpoints refuse.
pub fn admin_role_account(server: &Server, name: &str) -> PathBuf {
    let kubeconfig = service_account(server, "default", name);
    server.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        &format!("{name}-admin"),
        "--clusterrole=admin",
        &format!("--serviceaccount=default:{name}"),
    ]);
    kubeconfig
}

/// Runs `skiff ARGS --data-dir DIR`, a command an operator runs beside the
/// server, and returns its output.
pub fn skiff(args: &[&str], data_dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skiff"))
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .stdin(Stdio::null())
        .output()
        .expect("run skiff")
}

/// [`skiff`] that must succeed; returns its standard output.
pub fn skiff_ok(args: &[&str], data_dir: &Path) -> String {
    succeeded("skiff", args, &skiff(args, data_dir))
}

/// [`skiff`] that must fail; returns its error output.
pub fn skiff_err(args: &[&str], data_dir: &Path) -> String {
    failed("skiff", args, &skiff(args, data_dir))
}

/// Starts `skiff agent` joining `server` with `token`, its data directory
/// `dir` (log in `dir/agent.log`), plus `extra` flags. An empty `token`
/// passes no `--token`, for a caller that gives `--token-file` in `extra`.
pub fn spawn_joined_agent(server: &Server, dir: &Path, token: &str, extra: &[&str]) -> Child {
    let token_flag: &[&str] = if token.is_empty() {
        &[]
    } else {
        &["--token", token]
    };
    spawn_logged(
        Command::new(skiff_binary())
            .arg("agent")
            .arg("--data-dir")
            .arg(dir)
            .args(["--server", &format!("https://127.0.0.1:{}", server.port)])
            .args(token_flag)
            .args(extra),
        &dir.join("agent.log"),
    )
}

/// Spawns `command` (a `skiff server` or `skiff agent`) as the tests run
/// skiff: logging at info, appended to `log`, with nothing on stdin or
/// stdout.
pub fn spawn_logged(command: &mut Command, log: &Path) -> Child {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    command
        .env("SKIFF_LOG", "info")
        // The tests share the build machine's disk: how full it is must not
        // taint their nodes with disk-pressure or refuse their pods...
        .env("SKIFF_EVICTION_HARD", "nodefs.available<0%")
        // Nor remove the images later cases need (no registry to pull them
        // again from).
        .env("SKIFF_IMAGE_GC_HIGH_THRESHOLD", "100")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {command:?}: {e}"))
}
