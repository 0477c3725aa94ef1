//! The built-in ingress on real containerd (issue #18): two busybox
//! `httpd` pods behind a Service, an Ingress routing `web.example` to it
//! (reached from the host with `curl --resolve` on the server's ingress
//! port, both pods answering in turn), a TLS Ingress serving its Secret's
//! certificate for `secure.example` (curl trusting only that Secret's CA),
//! `status.loadBalancer` filled with the node's address as kubectl shows
//! it, and the default IngressClass `skiff`. Needs root (containerd, runc,
//! CNI, nft).

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use skiff_testkit::pki::TestCa;

use super::containerd::{import_busybox, internal_ip, run_cidr, run_with_node, wait_node_ready};
use super::services::backend_deployment;
use super::support::{Server, apply, assert_contains, eventually, json};

const NODE: &str = "e2e-ingress";

#[test]
fn ingress_routes_hosts_to_pods_and_serves_tls_from_secrets() {
    let service_cidr = run_cidr(240);
    run_with_node(
        "ski",
        &run_cidr(239),
        NODE,
        &["--service-cidr", &service_cidr],
        scenario,
    );
}

/// `curl` from the host: the status code and body of `url`, with `host`
/// resolved to 127.0.0.1 on `port`.
fn curl(host: &str, port: u16, url: &str, extra: &[&str]) -> (String, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5", "-w", "\n%{http_code}"])
        .args(["--resolve", &format!("{host}:{port}:127.0.0.1")])
        .args(extra)
        .arg(url)
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    let error = String::from_utf8_lossy(&out.stderr).into_owned();
    (code.to_string(), format!("{}{error}", body.trim()))
}

/// A CA and a certificate it signed for `host`, as PEM files in `dir`:
/// (CA certificate, certificate, key).
fn certificates(dir: &std::path::Path, host: &str) -> (String, String, String) {
    let ca = TestCa::new();
    let (cert, key) = ca.serving(&[host]);
    let write = |name: &str, pem: &str| {
        let path = dir.join(name);
        std::fs::write(&path, pem).expect("write PEM");
        path.to_string_lossy().into_owned()
    };
    (
        write("ingress-ca.crt", &ca.pem),
        write("secure.crt", &cert),
        write("secure.key", &key),
    )
}

fn scenario(server: &mut Server) {
    let node = wait_node_ready(server, NODE);
    let node_ip = internal_ip(&node);
    import_busybox(server);
    let (http, https) = server.ingress_ports;

    // The default class exists, as k3s's traefik class does.
    let classes = server.kubectl_ok(&["get", "ingressclass"]);
    assert!(
        classes
            .lines()
            .any(|l| l.starts_with("skiff ") && l.contains("skiff.io/ingress")),
        "{classes}"
    );
    let class = json(&server.kubectl_ok(&["get", "ingressclass", "skiff", "-o", "json"]));
    assert_eq!(
        class["metadata"]["annotations"]["ingressclass.kubernetes.io/is-default-class"],
        "true"
    );

    apply(server, &backend_deployment("web", 2));
    apply(
        server,
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},
            "spec":{"selector":{"app":"web"},"ports":[{"name":"http","port":80,"targetPort":"http"}]}}"#,
    );
    // No class named: admission gives it the default class, skiff.
    apply(
        server,
        r#"{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"web"},
            "spec":{"rules":[{"host":"web.example","http":{"paths":[{"path":"/","pathType":"Prefix",
              "backend":{"service":{"name":"web","port":{"number":80}}}}]}}]}}"#,
    );

    // Both pods answer through the ingress, in turn.
    let url = format!("http://web.example:{http}/");
    let hostnames = eventually(
        Duration::from_secs(120),
        "both pods behind web.example",
        || {
            let mut seen = BTreeSet::new();
            for _ in 0..4 {
                let (code, body) = curl("web.example", http, &url, &[]);
                if code != "200" {
                    return None;
                }
                seen.insert(body);
            }
            (seen.len() == 2).then_some(seen)
        },
    );
    assert!(
        hostnames.iter().all(|h| h.starts_with("web-")),
        "{hostnames:?}"
    );
    let (code, _) = curl(
        "other.example",
        http,
        &format!("http://other.example:{http}/"),
        &[],
    );
    assert_eq!(code, "404", "no rule for other.example");

    // The address is the node's, as kubectl shows it.
    let row = eventually(Duration::from_secs(30), "the Ingress's ADDRESS", || {
        let table = server.kubectl_ok(&["get", "ingress", "web"]);
        table.contains(&node_ip).then_some(table)
    });
    let header = row.lines().next().unwrap_or("");
    for column in ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"] {
        assert!(header.contains(column), "{row}");
    }
    let cells: Vec<&str> = row
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    // NAME CLASS HOSTS ADDRESS PORTS AGE; the class is the default one,
    // given by DefaultIngressClass admission.
    assert_eq!(
        &cells[..5],
        ["web", "skiff", "web.example", node_ip.as_str(), "80"],
        "{row}"
    );

    // TLS: the Secret's certificate for secure.example.
    let (ca, cert, key) = certificates(server.data_dir(), "secure.example");
    server.kubectl_ok(&[
        "create",
        "secret",
        "tls",
        "secure-tls",
        "--cert",
        &cert,
        "--key",
        &key,
    ]);
    apply(
        server,
        r#"{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"secure"},
            "spec":{"ingressClassName":"skiff",
              "tls":[{"hosts":["secure.example"],"secretName":"secure-tls"}],
              "rules":[{"host":"secure.example","http":{"paths":[{"path":"/","pathType":"Prefix",
                "backend":{"service":{"name":"web","port":{"name":"http"}}}}]}}]}}"#,
    );
    let secure_url = format!("https://secure.example:{https}/");
    let body = eventually(Duration::from_secs(30), "secure.example over TLS", || {
        let (code, body) = curl("secure.example", https, &secure_url, &["--cacert", &ca]);
        (code == "200").then_some(body)
    });
    assert!(body.starts_with("web-"), "{body}");
    // Another name gets the default certificate, which that CA did not sign.
    let (code, error) = curl(
        "other.example",
        https,
        &format!("https://other.example:{https}/"),
        &["--cacert", &ca],
    );
    assert_eq!(
        code, "000",
        "the default certificate is not trusted: {error}"
    );
    let row = server.kubectl_ok(&["get", "ingress", "secure", "--no-headers"]);
    assert_contains(&row, "80, 443");
}
