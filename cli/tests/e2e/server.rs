//! The `skiff server` process itself: certificates, kubeconfig, authentication,
//! clean shutdown.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use super::support::{Kubectl, Server, assert_contains, output_with_stdin, refused_server};

fn curl(server: &Server, path: &str, extra: &[&str]) -> (u16, String) {
    let ca = server.data_dir().join("tls/ca.crt");
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            r#"
import ssl, sys, urllib.request, urllib.error
ctx = ssl.create_default_context(cafile=sys.argv[1])
req = urllib.request.Request(sys.argv[2])
if len(sys.argv) > 3:
    req.add_header("Authorization", "Bearer " + sys.argv[3])
try:
    with urllib.request.urlopen(req, context=ctx) as r:
        print(r.status); print(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code); print(e.read().decode())
"#,
        )
        .arg(ca)
        .arg(format!("https://localhost:{}{path}", server.port))
        .args(extra)
        .output()
        .expect("python3");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (code, body) = text.split_once('\n').unwrap_or((&text, ""));
    (
        code.trim().parse().unwrap_or_else(|_| {
            panic!(
                "no status from python: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        }),
        body.to_string(),
    )
}

#[test]
fn log_written_to_a_file_has_no_colour_codes() {
    let mut server = Server::start();
    assert!(server.terminate().success());
    let log = std::fs::read(server.log_path()).expect("server log");
    let text = String::from_utf8_lossy(&log);
    assert_contains(&text, "skiff server started");
    assert_contains(&text, "stopped");
    assert!(
        !log.contains(&0x1b),
        "escape sequences in a log file:\n{text}"
    );
}

#[test]
fn kubeconfig_is_private_and_certificates_are_reused_across_restarts() {
    let mut server = Server::start();
    let mode = std::fs::metadata(server.kubeconfig())
        .expect("kubeconfig")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "kubeconfig must be 0600");
    assert!(
        server.log().contains("kubeconfig.yaml"),
        "log says where the kubeconfig is"
    );
    let ca_before = std::fs::read(server.data_dir().join("tls/ca.crt")).expect("ca");
    let status = server.terminate();
    assert!(status.success(), "SIGTERM exits 0, got {status}");
    server.restart();
    let ca_after = std::fs::read(server.data_dir().join("tls/ca.crt")).expect("ca");
    assert_eq!(ca_before, ca_after, "the CA is reused");
    server.kubectl_ok(&["get", "namespaces"]);
}

#[test]
fn a_kubeconfig_for_users_and_a_node_port_range_are_taken_from_k3s_flags() {
    let outside = tempfile::tempdir().expect("dir");
    let copy = outside.path().join("etc/skiff/admin.yaml");
    let copy_arg = copy.to_string_lossy().into_owned();
    let server = Server::start_with(&[
        "--disable-agent",
        "-o",
        &copy_arg,
        "--write-kubeconfig-mode",
        "644",
        "--service-node-port-range",
        "31000-31001",
    ]);
    let mode =
        |p: &std::path::Path| std::fs::metadata(p).expect("mode").permissions().mode() & 0o777;
    // The user's copy has the mode asked for, in directories others can
    // enter; the data dir's own stays the owner's alone.
    assert_eq!(mode(&copy), 0o644);
    assert_eq!(mode(copy.parent().expect("dir")), 0o755);
    assert_eq!(mode(&server.kubeconfig()), 0o600);
    let user = Kubectl::new(&copy);
    user.ok(&["get", "namespaces"]);

    // NodePorts come from the range; one outside it is refused as upstream
    // words it, and a full range says so.
    for name in ["a", "b"] {
        user.ok(&["create", "service", "nodeport", name, "--tcp=80:80"]);
        let port = user.ok(&[
            "get",
            "service",
            name,
            "-o",
            "jsonpath={.spec.ports[0].nodePort}",
        ]);
        let port: u16 = port.trim().parse().expect("a node port");
        assert!((31000..=31001).contains(&port), "{name}: {port}");
    }
    let err = user.err(&[
        "create",
        "service",
        "nodeport",
        "c",
        "--tcp=80:80",
        "--node-port=30080",
    ]);
    assert_contains(
        &err,
        "provided port is not in the valid range. The range of valid ports is 31000-31001",
    );
    let err = user.err(&["create", "service", "nodeport", "d", "--tcp=80:80"]);
    assert_contains(
        &err,
        "Internal error occurred: failed to allocate a nodePort: range is full",
    );
}

#[test]
fn anonymous_requests_are_refused_except_health_and_version() {
    let server = Server::start();
    for path in ["/healthz", "/livez", "/readyz", "/version"] {
        let (code, _) = curl(&server, path, &[]);
        assert_eq!(code, 200, "{path} is public");
    }
    // Without credentials the caller is system:anonymous, which the
    // default RBAC policy lets read nothing else: it is asked to
    // authenticate.
    let (code, body) = curl(&server, "/api/v1/namespaces", &[]);
    assert_eq!(code, 401);
    assert_contains(&body, "\"reason\":\"Unauthorized\"");
    let (code, _) = curl(&server, "/api/v1/namespaces", &["not-a-token"]);
    assert_eq!(code, 401, "a wrong token is refused");
    let tokens = std::fs::read_to_string(server.data_dir().join("token.csv")).expect("token file");
    let token = tokens.split(',').next().expect("token");
    let (code, body) = curl(&server, "/api/v1/namespaces", &[token]);
    assert_eq!(code, 200, "{body}");
    assert_contains(&body, "NamespaceList");
}

#[test]
fn anonymous_requests_can_be_refused_everywhere_or_let_in_by_path() {
    let admin_token = |server: &Server| {
        let tokens =
            std::fs::read_to_string(server.data_dir().join("token.csv")).expect("token file");
        tokens.split(',').next().expect("token").to_string()
    };
    // k3s's way, through its pass-through flag: no request without
    // credentials gets anywhere, not even the health checks.
    let closed = Server::start_with(&[
        "--disable-agent",
        "--kube-apiserver-arg=anonymous-auth=false",
    ]);
    for path in [
        "/healthz",
        "/livez",
        "/readyz",
        "/version",
        "/api/v1/namespaces",
    ] {
        let (code, body) = curl(&closed, path, &[]);
        assert_eq!(code, 401, "{path}: {body}");
    }
    // What a joining agent fetches before it has credentials stays open,
    // as k3s's supervisor serves it.
    let (code, body) = curl(&closed, "/cacerts", &[]);
    assert_eq!(code, 200, "{body}");
    assert_contains(&body, "BEGIN CERTIFICATE");
    let token = admin_token(&closed);
    let (code, body) = curl(&closed, "/healthz", &[&token]);
    assert_eq!((code, body.trim()), (200, "ok"));
    drop(closed);

    // The authentication configuration's `anonymous` section: only the
    // listed paths, exactly.
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("authn.yaml");
    std::fs::write(
        &config,
        "apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
anonymous:
  enabled: true
  conditions:
  - path: /livez
  - path: /readyz
",
    )
    .expect("write config");
    let config_arg = config.to_str().expect("utf-8 path");
    let some = Server::start_with(&["--disable-agent", "--authentication-config", config_arg]);
    for path in ["/livez", "/readyz"] {
        let (code, body) = curl(&some, path, &[]);
        assert_eq!((code, body.trim()), (200, "ok"), "{path}");
    }
    for path in ["/healthz", "/version", "/livez/ping", "/api/v1/namespaces"] {
        let (code, body) = curl(&some, path, &[]);
        assert_eq!(code, 401, "{path}: {body}");
    }
    let token = admin_token(&some);
    let (code, body) = curl(&some, "/version", &[&token]);
    assert_eq!(code, 200, "{body}");
    drop(some);

    // The section and the flag together: refused at start, as upstream.
    let data = tempfile::tempdir().expect("tempdir");
    let stderr = refused_server(
        data.path(),
        &[
            "--disable-agent",
            "--authentication-config",
            config_arg,
            "--anonymous-auth=false",
        ],
        Duration::from_secs(30),
        "the server started with --anonymous-auth and an anonymous section",
    );
    assert_contains(
        &stderr,
        "--anonymous-auth flag cannot be set when anonymous field is configured in authentication configuration file",
    );
}

#[test]
fn serving_certificate_names_the_extra_tls_sans() {
    let server = Server::start_with(&["--disable-agent", "--tls-san", "skiff.example.test"]);
    let pem = std::fs::read_to_string(server.data_dir().join("tls/serving.crt")).expect("cert");
    let out = output_with_stdin(
        Command::new("openssl").args(["x509", "-noout", "-ext", "subjectAltName"]),
        pem.as_bytes(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_contains(&text, "skiff.example.test");
    assert_contains(&text, "127.0.0.1");
    assert_contains(&text, "localhost");
}
