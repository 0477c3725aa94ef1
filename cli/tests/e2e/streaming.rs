//! Streaming against `skiff server` on real containerd, with kubectl 1.32
//! and the Python client: logs (follow, previous, tail, since, timestamps,
//! container), exec (output, stdin, exit codes), attach, cp both ways,
//! port-forward, and the API's errors for missing pods and unscheduled ones.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use skiff_node::images::BUSYBOX_IMAGE;

use super::containerd::{import_busybox, pod, run_with_node, wait_node_ready, wait_running};
use super::support::{Server, apply, assert_contains, eventually, json, python_ok};

const NODE: &str = "e2e-streaming";

#[test]
fn kubectl_and_python_stream_logs_exec_attach_cp_and_port_forward() {
    run_with_node(
        "sks",
        "10.233.8.0/24",
        NODE,
        &["--kubelet-port", "0"],
        |server| scenario(server),
    );
}

/// Starts kubectl with `args`, a command that keeps streaming (`logs -f`,
/// `attach`), reads its output until `enough` holds of it or `within` has
/// passed, then stops it; what it read.
fn stream_until(
    server: &Server,
    args: &[&str],
    within: Duration,
    enough: impl Fn(&str) -> bool,
) -> String {
    let mut child = server
        .admin()
        .command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"));
    let mut stdout = child.stdout.take().expect("stdout");
    let mut read = String::new();
    let deadline = Instant::now() + within;
    let mut buffer = [0u8; 256];
    while !enough(&read) && Instant::now() < deadline {
        match stdout.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => read.push_str(&String::from_utf8_lossy(&buffer[..n])),
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    read
}

fn busybox_pod(name: &str, containers: &[(&str, &str)], restart: &str) -> String {
    let containers: Vec<serde_json::Value> = containers
        .iter()
        .map(|(c, script)| {
            serde_json::json!({"name": c, "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "Never", "command": ["sh", "-c", script]})
        })
        .collect();
    serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": restart, "terminationGracePeriodSeconds": 1,
                 "containers": containers}})
    .to_string()
}

fn scenario(server: &Server) {
    wait_node_ready(server, NODE);
    let node = json(&server.kubectl_ok(&["get", "node", NODE, "-o", "json"]));
    let port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .unwrap_or(0);
    assert!(port > 0, "kubelet port published: {node}");
    import_busybox(server);

    apply(
        server,
        &busybox_pod(
            "ticker",
            &[(
                "main",
                "for i in 1 2 3 4 5; do echo tick $i; sleep 0.5; done; sleep 3600",
            )],
            "Always",
        ),
    );
    apply(
        server,
        &busybox_pod(
            "duo",
            &[
                ("a", "echo from-a; sleep 3600"),
                ("b", "echo from-b; sleep 3600"),
            ],
            "Always",
        ),
    );
    apply(
        server,
        &busybox_pod(
            "crasher",
            &[("main", "echo run-output; sleep 1; exit 1")],
            "Always",
        ),
    );
    apply(
        server,
        &busybox_pod(
            "web",
            &[(
                "httpd",
                "mkdir -p /www && echo hello-from-httpd > /www/index.html && httpd -f -p 8080 -h /www",
            )],
            "Always",
        ),
    );
    wait_running(server, "ticker");

    // logs -f follows new lines as they are written (the container keeps
    // running, so kubectl is stopped once all five arrived).
    let followed = stream_until(
        server,
        &["logs", "-f", "ticker"],
        Duration::from_secs(60),
        |followed| followed.contains("tick 5\n"),
    );
    assert_eq!(followed, "tick 1\ntick 2\ntick 3\ntick 4\ntick 5\n");

    assert_eq!(
        server.kubectl_ok(&["logs", "ticker", "--tail=2"]),
        "tick 4\ntick 5\n"
    );
    assert_eq!(
        server
            .kubectl_ok(&["logs", "ticker", "--since=1h"])
            .lines()
            .count(),
        5
    );
    assert_eq!(
        server.kubectl_ok(&["logs", "ticker", "--since-time=2999-01-01T00:00:00Z"]),
        ""
    );
    let stamped = server.kubectl_ok(&["logs", "ticker", "--timestamps", "--tail=1"]);
    let (time, text) = stamped
        .trim_end()
        .split_once(' ')
        .expect("timestamped line");
    assert_eq!(text, "tick 5");
    assert!(
        time.starts_with("20") && time.contains('T') && time.ends_with('Z'),
        "{stamped}"
    );

    wait_running(server, "duo");
    eventually(Duration::from_secs(30), "duo logs", || {
        (server.kubectl_ok(&["logs", "duo", "-c", "b"]) == "from-b\n").then_some(())
    });
    assert_eq!(server.kubectl_ok(&["logs", "duo", "-c", "a"]), "from-a\n");
    let err = server.kubectl_err(&["get", "--raw", "/api/v1/namespaces/default/pods/duo/log"]);
    assert_contains(
        &err,
        "a container name must be specified for pod duo, choose one of: [a b]",
    );

    // --previous shows the run before the restart.
    eventually(Duration::from_secs(90), "crasher restarted", || {
        let p = pod(server, "crasher");
        (p["status"]["containerStatuses"][0]["restartCount"].as_i64() >= Some(1)).then_some(())
    });
    assert_eq!(
        server.kubectl_ok(&["logs", "crasher", "--previous"]),
        "run-output\n"
    );

    // exec: output, stderr, exit codes; stdin that ends.
    let out = server.kubectl(&[
        "exec",
        "ticker",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("err\n"));
    let out = server.kubectl_stdin(&["exec", "-i", "ticker", "--", "cat"], "through stdin\n");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "through stdin\n");

    // cp to and from the pod (tar through exec with and without stdin).
    let local = base_file(server, "upload.txt", "copied content\n");
    server.kubectl_ok(&["cp", &local, "ticker:/tmp/upload.txt"]);
    assert_eq!(
        server.kubectl_ok(&["exec", "ticker", "--", "cat", "/tmp/upload.txt"]),
        "copied content\n"
    );
    let back = server.data_dir().join("download.txt");
    server.kubectl_ok(&["cp", "ticker:/tmp/upload.txt", &back.to_string_lossy()]);
    assert_eq!(
        std::fs::read_to_string(&back).expect("downloaded"),
        "copied content\n"
    );

    // attach streams the main process's output.
    apply(
        server,
        &busybox_pod(
            "chatty",
            &[(
                "main",
                "i=0; while true; do echo chat $i; i=$((i+1)); sleep 0.3; done",
            )],
            "Always",
        ),
    );
    wait_running(server, "chatty");
    let attached = stream_until(
        server,
        &["attach", "chatty"],
        Duration::from_secs(30),
        |attached| attached.matches("chat ").count() >= 3,
    );
    assert!(attached.matches("chat ").count() >= 3, "{attached:?}");

    // port-forward: an HTTP GET through the forwarded port.
    wait_running(server, "web");
    let local_port = super::support::free_port();
    // kubectl's own account of the session, shown when the forward fails.
    let forward_log = server.data_dir().join("port-forward.log");
    let mut forward = server
        .admin()
        .command(&["port-forward", "pod/web", &format!("{local_port}:8080")])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&forward_log).expect("port-forward log"))
        .spawn()
        .expect("kubectl port-forward");
    let deadline = Instant::now() + Duration::from_secs(30);
    let reply = loop {
        let attempt = forwarded_get(local_port);
        match attempt {
            Ok(reply) if reply.contains("hello-from-httpd") => break reply,
            _ if Instant::now() < deadline => {}
            last => {
                let said = std::fs::read_to_string(&forward_log).unwrap_or_default();
                panic!(
                    "no answer through port-forward; last attempt {last:?}; kubectl said: {said}"
                );
            }
        }
        if let Ok(Some(status)) = forward.try_wait() {
            let said = std::fs::read_to_string(&forward_log).unwrap_or_default();
            panic!("kubectl port-forward exited ({status}): {said}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = forward.kill();
    let _ = forward.wait();
    assert!(reply.starts_with("HTTP/1.1 200 OK"), "{reply}");

    // The Python client: exec (WebSocket) and port-forward.
    python_ok(
        &server.kubeconfig(),
        "streaming.py",
        &["default", "web", "8080"],
    );

    // Errors as upstream: a missing pod is 404, a pod without a node 400.
    let err = server.kubectl_err(&["get", "--raw", "/api/v1/namespaces/default/pods/nope/log"]);
    assert!(
        err.contains("NotFound") && err.contains("\"nope\" not found"),
        "{err}"
    );
    let unscheduled = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "floating"},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": BUSYBOX_IMAGE}]}});
    apply(server, &unscheduled.to_string());
    let err = server.kubectl_err(&[
        "get",
        "--raw",
        "/api/v1/namespaces/default/pods/floating/log",
    ]);
    assert!(
        err.contains("BadRequest") && err.contains("pod floating does not have a host assigned"),
        "{err}"
    );
    let err = server.kubectl_err(&["exec", "floating", "--", "true"]);
    assert_contains(&err, "does not have a host assigned");
}

/// One HTTP GET through a forwarded local port: the whole reply.
fn forwarded_get(local_port: u16) -> std::io::Result<String> {
    let mut tcp = TcpStream::connect(("127.0.0.1", local_port))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    tcp.write_all(b"GET /index.html HTTP/1.0\r\nHost: web\r\n\r\n")?;
    let mut reply = String::new();
    tcp.read_to_string(&mut reply)?;
    Ok(reply)
}

/// Writes a file under the server's data dir; returns its path.
fn base_file(server: &Server, name: &str, content: &str) -> String {
    let path = server.data_dir().join(name);
    std::fs::write(&path, content).expect("write local file");
    path.to_string_lossy().into_owned()
}
