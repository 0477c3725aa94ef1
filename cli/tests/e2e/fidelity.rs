//! kubectl flows that depend on the server writing what upstream writes:
//! EndpointSlice port names that kubectl's describe reads unguarded.

use std::time::Duration;

use super::support::{Server, eventually};

#[test]
fn describe_service_with_endpoints_through_kubectl() {
    let server = Server::start_with(&["--disable-agent", "--simulated-nodes", "1"]);
    eventually(Duration::from_secs(30), "a Ready node", || {
        let out = server.kubectl(&["get", "node", "sim-node-0"]);
        (out.status.success() && String::from_utf8_lossy(&out.stdout).contains(" Ready"))
            .then_some(())
    });
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","labels":{"app":"web"}},
        "spec":{"nodeName":"sim-node-0","containers":[{"name":"main","image":"busybox"}]}}"#;
    let out = server.kubectl_stdin(&["apply", "-f", "-"], pod);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // An unnamed Service port: its slice port's name is the empty string.
    server.kubectl_ok(&["expose", "pod", "web", "--port=80", "--target-port=8080"]);
    let slice = eventually(Duration::from_secs(30), "a slice with the pod", || {
        let out = server.kubectl_ok(&[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=web",
            "-o",
            "json",
        ]);
        let list: serde_json::Value = serde_json::from_str(&out).ok()?;
        let slice = list["items"].get(0)?.clone();
        slice["endpoints"]
            .as_array()
            .is_some_and(|e| !e.is_empty())
            .then_some(slice)
    });
    assert_eq!(slice["ports"][0]["name"], "", "{slice}");
    let described = server.kubectl_ok(&["describe", "svc", "web"]);
    let endpoints = described
        .lines()
        .find(|l| l.starts_with("Endpoints:"))
        .unwrap_or_else(|| panic!("no Endpoints line in\n{described}"));
    assert!(endpoints.contains(":8080"), "{described}");
}
