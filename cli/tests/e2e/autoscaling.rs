//! HorizontalPodAutoscalers through kubectl: `kubectl autoscale` makes one,
//! `kubectl get hpa` prints upstream's columns, and the controller (at a
//! one-second sync period) reports on it. With no node agent, the metrics
//! API serves no PodMetrics: the controller says so in its condition and
//! Events and scales nothing;
//! on real containerd, a Deployment whose pod burns CPU above its target is
//! scaled up from the figures skiff's own metrics API serves.

use std::time::Duration;

use skiff_node::images::BUSYBOX_IMAGE;

use super::containerd::{import_busybox, run_with_node, wait_node_ready};
use super::support::{Server, apply, assert_contains, eventually, json, rows};

#[test]
fn kubectl_autoscale_and_get_hpa() {
    let server = Server::start_with(&[
        "--disable-agent",
        "--simulated-nodes",
        "1",
        "--horizontal-pod-autoscaler-sync-period",
        "1s",
    ]);
    server.kubectl_ok(&["create", "deployment", "web", "--image=busybox"]);
    server.kubectl_ok(&[
        "set",
        "resources",
        "deployment",
        "web",
        "--requests=cpu=20m",
    ]);
    server.kubectl_ok(&[
        "autoscale",
        "deployment",
        "web",
        "--cpu-percent=50",
        "--min=1",
        "--max=4",
    ]);
    let table = rows(&server.kubectl_ok(&["get", "hpa"]));
    assert_eq!(
        table[0],
        [
            "NAME",
            "REFERENCE",
            "TARGETS",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE"
        ]
    );
    assert_eq!(
        table[1][..6],
        ["web", "Deployment/web", "cpu:", "<unknown>/50%", "1", "4"]
    );
    let jsonpath =
        |path: &str| server.kubectl_ok(&["get", "hpa", "web", "-o", &format!("jsonpath={path}")]);
    eventually(Duration::from_secs(30), "the controller's report", || {
        let reason = jsonpath(r#"{.status.conditions[?(@.type=="ScalingActive")].reason}"#);
        (reason == "FailedGetResourceMetric").then_some(())
    });
    assert_eq!(jsonpath("{.status.currentReplicas}"), "1");
    assert_eq!(
        jsonpath(r#"{.status.conditions[?(@.type=="AbleToScale")].reason}"#),
        "SucceededGetScale"
    );
    let events = server.events("involvedObject.kind=HorizontalPodAutoscaler");
    assert_contains(&events, "FailedGetResourceMetric");
    assert_contains(&events, "no metrics returned from resource metrics API");
    // A minimum of zero needs a gate skiff does not have (kubectl
    // autoscale reads --min=0 as unset, so the object is sent whole).
    let stderr = server.kubectl_stdin_err(
        &["create", "-f", "-"],
        r#"{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"zero"},
            "spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},
            "minReplicas":0,"maxReplicas":2}}"#,
    );
    assert_contains(
        &stderr,
        "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
    );
}

const NODE: &str = "e2e-hpa";

#[test]
fn hpa_scales_a_cpu_burning_deployment_on_containerd() {
    run_with_node(
        "skh",
        "10.233.41.0/24",
        NODE,
        &[
            "--kubelet-port",
            "0",
            "--metric-resolution",
            "2s",
            "--horizontal-pod-autoscaler-sync-period",
            "2s",
        ],
        |server| cpu_scale_up(server),
    );
}

fn cpu_scale_up(server: &Server) {
    wait_node_ready(server, NODE);
    import_busybox(server);
    // One pod that burns all the CPU its limit allows: four times its
    // request, far above the 50 % target, so the controller wants more.
    let deployment = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "burn"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "burn"}},
            "template": {"metadata": {"labels": {"app": "burn"}},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "main",
                    "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "while :; do :; done"],
                    "resources": {"requests": {"cpu": "50m"}, "limits": {"cpu": "200m"}}}]}}}});
    apply(server, &deployment.to_string());
    let hpa = serde_json::json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "burn"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "burn"},
            "minReplicas": 1, "maxReplicas": 3,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50}}}]}});
    apply(server, &hpa.to_string());

    // A count the Deployment reports at `path`, once it is above one.
    let above_one = |path: &str| {
        server
            .kubectl_ok(&[
                "get",
                "deployment",
                "burn",
                "-o",
                &format!("jsonpath={path}"),
            ])
            .parse::<u32>()
            .ok()
            .filter(|&n| n > 1)
    };
    let replicas = eventually(Duration::from_secs(120), "the Deployment scaled up", || {
        above_one("{.spec.replicas}")
    });
    assert!(replicas <= 3, "above maxReplicas: {replicas}");
    // The added pods really run on the node.
    eventually(
        Duration::from_secs(120),
        "more than one burn pod ready",
        || above_one("{.status.readyReplicas}"),
    );

    // The HPA's status carries the CPU utilization it acted on.
    let status = json(&server.kubectl_ok(&["get", "hpa", "burn", "-o", "json"]))["status"].clone();
    let current = status["currentMetrics"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["type"] == "Resource"))
        .unwrap_or_else(|| panic!("no Resource metric in {status}"));
    assert_eq!(current["resource"]["name"], "cpu", "{status}");
    let utilization = current["resource"]["current"]["averageUtilization"]
        .as_i64()
        .unwrap_or_else(|| panic!("no averageUtilization in {status}"));
    assert!(utilization > 50, "{status}");
    assert!(
        status["desiredReplicas"].as_i64().unwrap_or(0) > 1,
        "{status}"
    );

    // kubectl shows the figure against the target, and the rescale Event.
    let row = server.kubectl_ok(&["get", "hpa", "burn", "--no-headers"]);
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[..2], ["burn", "Deployment/burn"], "{row}");
    assert!(
        cells[3].ends_with("%/50%") && !cells[3].starts_with("<unknown>"),
        "{row}"
    );
    let events =
        server.events("involvedObject.kind=HorizontalPodAutoscaler,involvedObject.name=burn");
    assert_contains(&events, "SuccessfulRescale");
    assert_contains(&events, "New size:");
    assert_contains(
        &events,
        "cpu resource utilization (percentage of request) above target",
    );
}
