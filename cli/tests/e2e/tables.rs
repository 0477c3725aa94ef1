//! `kubectl get` prints the server's Tables: upstream's columns and cells.

use std::time::Duration;

use super::support::{Server, eventually, rows};

#[test]
fn get_prints_upstream_columns() {
    let server = Server::start_with(&["--disable-agent", "--simulated-nodes", "2"]);

    server.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"two","labels":{"app":"demo"}},"data":{"a":"1","b":"2"}}"#,
    );
    let out = rows(&server.kubectl_ok(&["get", "configmaps", "two"]));
    assert_eq!(out[0], ["NAME", "DATA", "AGE"]);
    assert_eq!(&out[1][..2], ["two", "2"]);
    let labelled = rows(&server.kubectl_ok(&["get", "cm", "two", "-L", "app", "--show-labels"]));
    assert_eq!(labelled[0], ["NAME", "DATA", "AGE", "APP", "LABELS"]);
    assert_eq!(
        labelled[1][3..],
        ["demo".to_string(), "app=demo".to_string()]
    );

    let nodes = eventually(Duration::from_secs(20), "two nodes", || {
        let out = rows(&server.kubectl_ok(&["get", "nodes"]));
        (out.len() == 3).then_some(out)
    });
    assert_eq!(nodes[0], ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]);
    assert_eq!(
        nodes[1][..3],
        ["sim-node-0".to_string(), "Ready".into(), "<none>".into()]
    );
    assert_eq!(nodes[1][4], "v1.33.0-skiff");
    let wide = rows(&server.kubectl_ok(&["get", "nodes", "-o", "wide"]));
    assert_eq!(
        wide[0][5..7],
        ["INTERNAL-IP".to_string(), "EXTERNAL-IP".into()]
    );
    assert!(wide[1].iter().any(|c| c == "simulated://0.1.0"), "{wide:?}");

    server.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},
            "spec":{"nodeName":"sim-node-1","containers":[{"name":"a","image":"busybox"},{"name":"b","image":"busybox"}]}}"#,
    );
    let pods = eventually(Duration::from_secs(20), "web Running", || {
        let out = rows(&server.kubectl_ok(&["get", "pods"]));
        (out.len() == 2 && out[1][2] == "Running").then_some(out)
    });
    assert_eq!(pods[0], ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert_eq!(
        pods[1][..4],
        [
            "web".to_string(),
            "2/2".into(),
            "Running".into(),
            "0".into()
        ]
    );
    let wide = rows(&server.kubectl_ok(&["get", "pods", "-o", "wide"]));
    assert_eq!(
        wide[0],
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED",
            "NODE",
            "READINESS",
            "GATES"
        ]
    );
    assert!(wide[1][5].starts_with("100.64.1."), "{wide:?}");
    assert_eq!(wide[1][6], "sim-node-1");
    let all = rows(&server.kubectl_ok(&["get", "pods", "-A"]));
    assert_eq!(all[0][0], "NAMESPACE");
    assert_eq!(all[1][..2], ["default".to_string(), "web".into()]);

    server.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc"},
            "spec":{"clusterIP":"None","selector":{"app":"web"},"ports":[{"port":80,"protocol":"TCP"}]}}"#,
    );
    let svc = rows(&server.kubectl_ok(&["get", "svc", "svc"]));
    assert_eq!(
        svc[0],
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ]
    );
    assert_eq!(
        svc[1][..5],
        [
            "svc".to_string(),
            "ClusterIP".into(),
            "None".into(),
            "<none>".into(),
            "80/TCP".into()
        ]
    );

    let ns = rows(&server.kubectl_ok(&["get", "ns", "default"]));
    assert_eq!(ns[0], ["NAME", "STATUS", "AGE"]);
    assert_eq!(ns[1][..2], ["default".to_string(), "Active".into()]);
}
