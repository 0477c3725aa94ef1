//! Faults a loaded or starved edge server meets (issue #15): a client that
//! trickles its headers, a resourceVersion from the future, and a data
//! directory on a full disk — each met as upstream meets it, the full disk
//! giving its space back once objects are deleted, and the server stopping
//! promptly afterwards.

use std::process::Command;
use std::time::{Duration, Instant};

use skiff_testkit::tmpfs::Tmpfs;

use super::support::{Server, assert_contains, eventually};

/// Opens TLS to the server, starts a request and sends one header byte per
/// second; prints how many seconds passed until the server hung up.
const TRICKLE: &str = r#"
import socket, ssl, sys, time
port = int(sys.argv[1])
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(["http/1.1"])
raw = socket.create_connection(("127.0.0.1", port))
conn = ctx.wrap_socket(raw, server_hostname="localhost")
start = time.monotonic()
conn.sendall(b"GET /version HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
conn.settimeout(1.0)
try:
    for i in range(120):
        conn.sendall(b"a")
        try:
            if conn.recv(1) == b"":
                break
        except socket.timeout:
            pass
except (ConnectionError, ssl.SSLError, OSError):
    pass
print(round(time.monotonic() - start, 1))
"#;

#[test]
fn a_client_trickling_its_headers_is_cut_at_32_seconds() {
    let server = Server::start();
    let out = Command::new("python3")
        .arg("-c")
        .arg(TRICKLE)
        .arg(server.port.to_string())
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seconds: f64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("seconds");
    assert!(
        (31.0..40.0).contains(&seconds),
        "the trickling client was cut after {seconds} s"
    );
    // The server still serves everyone else.
    server.kubectl_ok(&["get", "--raw", "/version"]);
}

#[test]
fn a_resource_version_from_the_future_fails_as_upstreams_does() {
    let server = Server::start();
    // The ConfigMaps as of a version the store is far from reaching.
    let future = "/api/v1/namespaces/default/configmaps?resourceVersion=99999999";
    let started = Instant::now();
    let watched = server.kubectl_ok(&["get", "--raw", &format!("{future}&watch=1")]);
    assert!(started.elapsed() >= Duration::from_millis(2900));
    assert_contains(&watched, r#""type":"ERROR""#);
    assert_contains(
        &watched,
        "Timeout: Too large resource version: 99999999, current: ",
    );
    assert_contains(&watched, "ResourceVersionTooLarge");

    let listed = server.kubectl_err(&[
        "get",
        "--raw",
        &format!("{future}&resourceVersionMatch=NotOlderThan"),
    ]);
    assert_contains(&listed, "Too large resource version");
}

/// `count` ConfigMaps of about 120 KiB each, as one List for `kubectl create -f -`.
fn fillers(first: usize, count: usize) -> String {
    let blob = "x".repeat(120 * 1024);
    let items: Vec<serde_json::Value> = (first..first + count)
        .map(|i| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("fill-{i}"), "labels": {"fill": "yes"}},
                "data": {"blob": blob}})
        })
        .collect();
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

#[test]
fn a_full_disk_refuses_writes_keeps_reads_and_deletes_reclaims_and_stops_promptly() {
    let disk = Tmpfs::mount(24);
    let mut server = Server::start_in(disk.path(), &["--disable-agent", "--store-reserve-mb", "8"]);
    server.kubectl_ok(&["create", "configmap", "before", "--from-literal=kept=yes"]);

    // Fill the disk until the server refuses.
    let mut created = 0;
    let refusal = loop {
        let out = server.kubectl_stdin(&["create", "-f", "-"], &fillers(created, 10));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        created += String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.ends_with("created"))
            .count();
        if !out.status.success() {
            break stderr;
        }
        assert!(created < 400, "the disk never filled");
    };
    assert!(
        refusal.contains("InsufficientStorage") && refusal.contains("storage space exhausted"),
        "{refusal}"
    );
    assert!(
        refusal.contains(&server.data_dir().display().to_string()),
        "the refusal names the data directory: {refusal}"
    );
    assert!(created >= 10, "only {created} objects fitted");

    // Reads work, /readyz names the failing check, and other writes are refused.
    let names = server.kubectl_ok(&["get", "configmaps", "-l", "fill=yes", "-o", "name"]);
    assert_eq!(names.lines().count(), created);
    let readyz = server.kubectl_err(&["get", "--raw", "/readyz"]);
    assert_contains(&readyz, "[-]etcd failed");
    let refused = server.kubectl_err(&["create", "configmap", "small", "--from-literal=a=b"]);
    assert_contains(&refused, "storage space exhausted");

    // Deletes work.
    let deleted = server.kubectl(&["delete", "configmaps", "-l", "fill=yes", "--wait=false"]);
    assert!(
        deleted.status.success(),
        "deletes refused: {}\n{}",
        String::from_utf8_lossy(&deleted.stderr),
        server.log()
    );
    let left = server.kubectl_ok(&["get", "configmaps", "-l", "fill=yes", "-o", "name"]);
    assert_eq!(left.trim(), "");

    // The store gives the deleted objects' space back by itself, and writes
    // resume; what was there before the disk filled is still there.
    eventually(Duration::from_secs(60), "writes resuming", || {
        server
            .kubectl(&["create", "configmap", "after", "--from-literal=a=b"])
            .status
            .success()
            .then_some(())
    });
    let log = server.log();
    let reclaimed = log
        .lines()
        .find(|l| l.contains("reclaimed space on the short disk"));
    assert!(reclaimed.is_some(), "{log}");
    eprintln!("{}", reclaimed.unwrap_or_default());
    let readyz = server.kubectl_ok(&["get", "--raw", "/readyz"]);
    assert_eq!(readyz.trim(), "ok");
    let kept = server.kubectl_ok(&["get", "configmap", "before", "-o", "jsonpath={.data.kept}"]);
    assert_eq!(kept, "yes");

    // SIGTERM stops it well within ten seconds.
    let stopping = Instant::now();
    let status = server.terminate();
    let took = stopping.elapsed();
    assert!(took < Duration::from_secs(10), "stopping took {took:?}");
    assert!(status.code().is_some(), "{status}\n{}", server.log());
}
