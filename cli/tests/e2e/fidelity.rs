//! kubectl flows that depend on the server writing what upstream writes:
//! EndpointSlice port names that kubectl's describe reads unguarded, and a
//! Terminating namespace's conditions that `describe` shows.

use std::time::Duration;

use super::support::{Server, apply, assert_contains, endpoint_slices, eventually};

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
    apply(&server, pod);
    // An unnamed Service port: its slice port's name is the empty string.
    server.kubectl_ok(&["expose", "pod", "web", "--port=80", "--target-port=8080"]);
    let slice = eventually(Duration::from_secs(30), "a slice with the pod", || {
        let slices = endpoint_slices(&server, "default", "kubernetes.io/service-name=web");
        let slice = slices.into_iter().next()?;
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

#[test]
fn describe_namespace_says_what_blocks_its_deletion() {
    let server = Server::start();
    server.kubectl_ok(&["create", "namespace", "held"]);
    let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"sticky",
        "namespace":"held","finalizers":["example.com/hold"]}}"#;
    apply(&server, cm);
    server.kubectl_ok(&["delete", "namespace", "held", "--wait=false"]);

    // kubectl describe lists the conditions as TYPE STATUS TIME REASON MESSAGE.
    let described = eventually(Duration::from_secs(30), "the blocking conditions", || {
        let out = server.kubectl_ok(&["describe", "namespace", "held"]);
        out.contains("SomeFinalizersRemain").then_some(out)
    });
    assert_contains(&described, "Status:       Terminating");
    let line = |type_: &str| {
        described
            .lines()
            .find(|l| l.trim_start().starts_with(type_))
            .unwrap_or_else(|| panic!("no {type_} in\n{described}"))
            .to_string()
    };
    let content = line("NamespaceContentRemaining");
    assert_contains(&content, "True");
    assert_contains(
        &content,
        "Some resources are remaining: configmaps. has 1 resource instances",
    );
    let finalizers = line("NamespaceFinalizersRemaining");
    assert_contains(
        &finalizers,
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances",
    );
    for settled in [
        "NamespaceDeletionDiscoveryFailure",
        "NamespaceDeletionGroupVersionParsingFailure",
        "NamespaceDeletionContentFailure",
    ] {
        assert!(line(settled).contains("False"), "{described}");
    }

    // Releasing the object lets the namespace finish.
    server.kubectl_ok(&[
        "patch",
        "configmap",
        "sticky",
        "-n",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    eventually(Duration::from_secs(30), "the namespace gone", || {
        let out = server.kubectl(&["get", "namespace", "held"]);
        (!out.status.success()).then_some(())
    });
}
