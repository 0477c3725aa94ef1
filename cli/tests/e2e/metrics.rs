//! Prometheus metrics as a user scrapes them (issue #18): `kubectl get
//! --raw /metrics` on the API server shows the API server's, the
//! scheduler's and the controllers' work queues' metrics from the one
//! process; only a caller granted `get` on the path reads them (anonymous:
//! 401, a user without the right: 403); the cluster DNS serves CoreDNS's
//! metrics on its own plain-HTTP port.

use std::net::UdpSocket;
use std::time::Duration;

use skiff_common::metrics::exposition::{self, Sample};

use super::support::{Server, assert_contains, eventually, free_port};

/// The samples of an exposition page (panics when it is not valid).
pub(super) fn samples(text: &str) -> Vec<Sample> {
    exposition::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The summed value of the matching samples, 0 when none.
pub(super) fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    exposition::value(samples, name, labels).unwrap_or(0.0)
}

/// A DNS query for `name` (type A) to `server`; the answer's rcode.
fn ask(server: &str, name: &str) -> u8 {
    let mut query = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.trim_end_matches('.').split('.') {
        query.push(label.len() as u8);
        query.extend_from_slice(label.as_bytes());
    }
    query.extend_from_slice(&[0, 0, 1, 0, 1]);
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a UDP socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    socket.send_to(&query, server).expect("send the query");
    let mut answer = [0u8; 512];
    let n = socket.recv(&mut answer).expect("a DNS answer");
    assert!(n >= 12, "short answer");
    answer[3] & 0x0f
}

#[test]
fn kubectl_reads_every_components_metrics_and_strangers_are_refused() {
    let dns_port = free_port();
    let dns_metrics_port = free_port();
    let dns_listen = format!("127.0.0.1:{dns_port}");
    let dns_metrics = format!("127.0.0.1:{dns_metrics_port}");
    let server = Server::start_with(&[
        "--disable-agent",
        "--cluster-dns-listen",
        &dns_listen,
        "--cluster-dns-metrics-listen",
        &dns_metrics,
    ]);
    server.kubectl_ok(&["create", "configmap", "scraped", "--from-literal=k=v"]);
    // No node to run on: the scheduler tries and fails.
    server.kubectl_ok(&["run", "nowhere", "--image=busybox", "--restart=Never"]);

    let page = eventually(Duration::from_secs(20), "an unschedulable attempt", || {
        let page = server.kubectl_ok(&["get", "--raw", "/metrics"]);
        let found = samples(&page);
        (value(
            &found,
            "scheduler_schedule_attempts_total",
            &[
                ("result", "unschedulable"),
                ("profile", "default-scheduler"),
            ],
        ) >= 1.0)
            .then_some(page)
    });
    let found = samples(&page);
    assert_contains(&page, "# TYPE apiserver_request_total counter");
    let created = [
        ("verb", "POST"),
        ("dry_run", ""),
        ("group", ""),
        ("version", "v1"),
        ("resource", "configmaps"),
        ("subresource", ""),
        ("scope", "resource"),
        ("component", "apiserver"),
        ("code", "201"),
    ];
    assert!(
        value(&found, "apiserver_request_total", &created) >= 1.0,
        "{page}"
    );
    assert!(
        value(
            &found,
            "apiserver_storage_objects",
            &[("resource", "configmaps")]
        ) >= 1.0
    );
    assert!(
        value(
            &found,
            "scheduler_pending_pods",
            &[("queue", "unschedulable")]
        ) >= 1.0,
        "{page}"
    );
    // The controllers' queues, named after their controllers.
    assert!(
        value(
            &found,
            "workqueue_adds_total",
            &[("name", "serviceaccount")]
        ) >= 1.0,
        "{page}"
    );
    assert!(
        found
            .iter()
            .any(|s| s.name == "workqueue_work_duration_seconds_bucket")
    );

    // Who may read it: upstream's system:monitoring group, not any user.
    let err = server.kubectl_err(&["get", "--raw", "/metrics", "--as=alice"]);
    assert!(
        err.contains("Error from server (Forbidden)")
            && err.contains("User \"alice\" cannot get path \"/metrics\""),
        "{err}"
    );
    let monitor = server.kubectl_ok(&[
        "get",
        "--raw",
        "/metrics",
        "--as=prometheus",
        "--as-group=system:monitoring",
    ]);
    assert!(monitor.contains("apiserver_request_total{"));
    let anonymous = std::process::Command::new("curl")
        .args(["-sk", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("https://127.0.0.1:{}/metrics", server.port))
        .output()
        .expect("run curl");
    assert_eq!(String::from_utf8_lossy(&anonymous.stdout), "401");

    // The cluster DNS's metrics on its own port, CoreDNS's way.
    assert_eq!(
        ask(&dns_listen, "nope.default.svc.cluster.local."),
        3,
        "NXDOMAIN"
    );
    let dns = std::process::Command::new("curl")
        .args(["-sf"])
        .arg(format!("http://{dns_metrics}/metrics"))
        .output()
        .expect("run curl");
    let dns_page = String::from_utf8_lossy(&dns.stdout).into_owned();
    let dns_found = samples(&dns_page);
    let server_label = format!("dns://:{dns_port}");
    let nxdomain = [
        ("server", server_label.as_str()),
        ("rcode", "NXDOMAIN"),
        ("plugin", "kubernetes"),
    ];
    assert_eq!(
        value(&dns_found, "coredns_dns_responses_total", &nxdomain),
        1.0,
        "{dns_page}"
    );
    assert!(
        dns_found.iter().all(|s| s.name.starts_with("coredns_")),
        "{dns_page}"
    );
}
