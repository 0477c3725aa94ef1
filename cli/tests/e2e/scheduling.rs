//! The scheduler with kubectl on simulated nodes: taints, node affinity,
//! topology spread and the explanation of a pod that cannot be placed.

use std::collections::BTreeMap;
use std::time::Duration;

use super::support::{Server, apply, assert_contains, eventually, json};

/// Node name of every pod with label `app=<app>`, once all are bound.
fn placements(server: &Server, app: &str, expected: usize) -> Vec<String> {
    eventually(Duration::from_secs(30), "pods bound", || {
        let pods =
            json(&server.kubectl_ok(&["get", "pods", "-l", &format!("app={app}"), "-o", "json"]));
        let nodes: Vec<String> = pods["items"]
            .as_array()?
            .iter()
            .filter_map(|p| p["spec"]["nodeName"].as_str().map(String::from))
            .collect();
        (nodes.len() == expected).then_some(nodes)
    })
}

/// Waits until the server's `count` simulated nodes are registered.
fn wait_nodes(server: &Server, count: usize) {
    eventually(Duration::from_secs(20), &format!("{count} nodes"), || {
        (server
            .kubectl_ok(&["get", "nodes", "-o", "name"])
            .lines()
            .count()
            == count)
            .then_some(())
    });
}

fn deployment(name: &str, replicas: u32, pod_spec_extra: &str) -> String {
    format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{name}"}},
          "spec":{{"replicas":{replicas},"selector":{{"matchLabels":{{"app":"{name}"}}}},
            "template":{{"metadata":{{"labels":{{"app":"{name}"}}}},
              "spec":{{"containers":[{{"name":"c","image":"busybox:1"}}]{pod_spec_extra}}}}}}}}}"#
    )
}

#[test]
fn taints_affinity_and_spread_place_pods_as_upstream() {
    let server = Server::start_with(&["--disable-agent", "--simulated-nodes", "3"]);
    wait_nodes(&server, 3);
    server.kubectl_ok(&["taint", "node", "sim-node-0", "dedicated=infra:NoSchedule"]);
    server.kubectl_ok(&[
        "label",
        "node",
        "sim-node-1",
        "topology.kubernetes.io/zone=a",
    ]);
    server.kubectl_ok(&[
        "label",
        "node",
        "sim-node-2",
        "topology.kubernetes.io/zone=b",
    ]);
    server.kubectl_ok(&[
        "label",
        "node",
        "sim-node-0",
        "topology.kubernetes.io/zone=c",
    ]);

    // No toleration: never on the tainted node.
    apply(&server, &deployment("plain", 6, ""));
    let nodes = placements(&server, "plain", 6);
    assert!(nodes.iter().all(|n| n != "sim-node-0"), "{nodes:?}");

    // Node affinity pins to zone b.
    apply(
        &server,
        &deployment(
            "pinned",
            3,
            r#","affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"topology.kubernetes.io/zone","operator":"In","values":["b"]}]}]}}}"#,
        ),
    );
    assert_eq!(placements(&server, "pinned", 3), vec!["sim-node-2"; 3]);

    // Tolerating the taint and spreading hard over zones: one pod per zone.
    apply(
        &server,
        &deployment(
            "spread",
            3,
            r#","tolerations":[{"key":"dedicated","operator":"Equal","value":"infra","effect":"NoSchedule"}],
               "topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"app":"spread"}}}]"#,
        ),
    );
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for node in placements(&server, "spread", 3) {
        *per_node.entry(node).or_default() += 1;
    }
    assert_eq!(per_node.len(), 3, "one per zone: {per_node:?}");
}

#[test]
fn unschedulable_pod_is_explained() {
    let server = Server::start_with(&["--disable-agent", "--simulated-nodes", "2"]);
    wait_nodes(&server, 2);
    apply(
        &server,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"huge"},
            "spec":{"containers":[{"name":"c","image":"busybox:1","resources":{"requests":{"cpu":"64"}}}]}}"#,
    );
    let condition = eventually(Duration::from_secs(30), "PodScheduled=False", || {
        let pod = json(&server.kubectl_ok(&["get", "pod", "huge", "-o", "json"]));
        pod["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")
            .cloned()
    });
    assert_eq!(condition["reason"], "Unschedulable");
    let message = condition["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("0/2 nodes are available: 2 Insufficient cpu."),
        "{message}"
    );
    let describe = eventually(Duration::from_secs(30), "FailedScheduling event", || {
        let out = server.kubectl_ok(&["describe", "pod", "huge"]);
        out.contains("FailedScheduling").then_some(out)
    });
    assert_contains(&describe, "Insufficient cpu");
    // An event's SOURCE reads `component, host`: the scheduler has no host,
    // so its column is the component alone, as upstream's.
    let events = server.events_with("reason=FailedScheduling", &["-o", "wide"]);
    let line = events.lines().nth(1).unwrap_or_default();
    assert!(
        line.contains(" default-scheduler ") && !line.contains("default-scheduler,"),
        "{events}"
    );
    assert!(!line.contains("<unknown>"), "the event's times: {events}");
    // Every pod tolerates a not-ready or unreachable node for 300 s, as upstream's
    // DefaultTolerationSeconds admission sets it.
    assert_contains(
        &describe,
        "node.kubernetes.io/not-ready:NoExecute op=Exists for 300s",
    );
    assert_contains(
        &describe,
        "node.kubernetes.io/unreachable:NoExecute op=Exists for 300s",
    );
}
