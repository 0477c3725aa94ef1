//! HorizontalPodAutoscalers through kubectl: `kubectl autoscale` makes one,
//! `kubectl get hpa` prints upstream's columns, and the controller (at a
//! one-second sync period) reports on it. Without a metrics API serving
//! PodMetrics, it says so in its condition and Events and scales nothing.

use std::time::Duration;

use super::support::{Server, eventually};

fn rows(output: &str) -> Vec<Vec<String>> {
    output
        .lines()
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

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
    let events = server.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.kind=HorizontalPodAutoscaler",
    ]);
    assert!(events.contains("FailedGetResourceMetric"), "{events}");
    assert!(
        events.contains("unable to fetch metrics from resource metrics API"),
        "{events}"
    );
    // A minimum of zero needs a gate skiff does not have (kubectl
    // autoscale reads --min=0 as unset, so the object is sent whole).
    let refused = server.kubectl_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"zero"},
            "spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},
            "minReplicas":0,"maxReplicas":2}}"#,
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("spec.minReplicas: Invalid value: 0: must be greater than or equal to 1"),
        "{stderr}"
    );
}
