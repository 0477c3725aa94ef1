//! Where a DaemonSet's pods belong: node selector, required node affinity
//! and taints against tolerations (plus the tolerations upstream adds to
//! every daemon pod), and the node-name affinity that pins a pod to its node.

use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodSpec, Toleration,
};
use skiff_common::placement::{required_affinity_matches, tolerates};

/// Tolerations every daemon pod gets, as upstream adds them.
pub(super) fn default_tolerations(host_network: bool) -> Vec<Toleration> {
    let t = |key: &str, effect: &str| Toleration {
        key: Some(key.to_owned()),
        operator: Some("Exists".into()),
        effect: Some(effect.to_owned()),
        ..Default::default()
    };
    let mut list = vec![
        t("node.kubernetes.io/not-ready", "NoExecute"),
        t("node.kubernetes.io/unreachable", "NoExecute"),
        t("node.kubernetes.io/disk-pressure", "NoSchedule"),
        t("node.kubernetes.io/memory-pressure", "NoSchedule"),
        t("node.kubernetes.io/pid-pressure", "NoSchedule"),
        t("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if host_network {
        list.push(t("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    list
}

/// True when a pod with `spec` should run on `node`: selector, required
/// affinity and NoSchedule/NoExecute taints (with the daemon tolerations).
pub(super) fn should_run(spec: &PodSpec, node: &Node) -> bool {
    if !required_affinity_matches(spec, node) {
        return false;
    }
    let mut tolerations = spec.tolerations.clone().unwrap_or_default();
    tolerations.extend(default_tolerations(spec.host_network == Some(true)));
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .all(|taint| tolerations.iter().any(|t| tolerates(t, taint)))
}

/// Pins `spec` to `node_name` through required node affinity on
/// metadata.name (the scheduler then binds it there), and adds the daemon
/// tolerations.
pub(super) fn pin_to_node(spec: &mut PodSpec, node_name: &str) {
    let requirement = NodeSelectorRequirement {
        key: "metadata.name".into(),
        operator: "In".into(),
        values: Some(vec![node_name.to_owned()]),
    };
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    let required = node_affinity
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(NodeSelector::default);
    if required.node_selector_terms.is_empty() {
        required
            .node_selector_terms
            .push(NodeSelectorTerm::default());
    }
    for term in &mut required.node_selector_terms {
        term.match_fields = Some(vec![requirement.clone()]);
    }
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for t in default_tolerations(spec.host_network == Some(true)) {
        if !tolerations
            .iter()
            .any(|x| x.key == t.key && x.effect == t.effect)
        {
            tolerations.push(t);
        }
    }
}

/// The node a daemon pod is for: its nodeName once bound, else the node its
/// affinity pins it to.
pub(super) fn node_of(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.clone().filter(|n| !n.is_empty()) {
        return Some(n);
    }
    spec.affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|r| r.key == "metadata.name" && r.operator == "In")
        .and_then(|r| r.values.as_ref()?.first().cloned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, labels: serde_json::Value, taints: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints}
        }))
        .unwrap()
    }

    fn spec(v: serde_json::Value) -> PodSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn selectors_affinity_and_taints_decide_placement() {
        let plain = node("a", json!({"disk": "ssd"}), json!([]));
        let tainted = node(
            "b",
            json!({}),
            json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]),
        );
        let not_ready = node(
            "c",
            json!({}),
            json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]),
        );
        let preferred = node(
            "d",
            json!({}),
            json!([{"key": "x", "effect": "PreferNoSchedule"}]),
        );
        let empty = spec(json!({"containers": []}));
        assert!(should_run(&empty, &plain));
        assert!(!should_run(&empty, &tainted));
        assert!(should_run(&empty, &not_ready), "default tolerations");
        assert!(should_run(&empty, &preferred));
        let tolerant = spec(
            json!({"containers": [], "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]}),
        );
        assert!(should_run(&tolerant, &tainted));
        let selective = spec(json!({"containers": [], "nodeSelector": {"disk": "ssd"}}));
        assert!(should_run(&selective, &plain));
        assert!(!should_run(&selective, &preferred));
        let affine = spec(
            json!({"containers": [], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "disk", "operator": "NotIn", "values": ["ssd"]}]}]}}}}),
        );
        assert!(!should_run(&affine, &plain));
        assert!(should_run(&affine, &preferred));
    }

    #[test]
    fn pinned_pods_name_their_node() {
        let mut s = spec(json!({"containers": []}));
        pin_to_node(&mut s, "n1");
        let pod = Pod {
            spec: Some(s.clone()),
            ..Default::default()
        };
        assert_eq!(node_of(&pod).as_deref(), Some("n1"));
        assert!(
            s.tolerations
                .unwrap()
                .iter()
                .any(|t| t.key.as_deref() == Some("node.kubernetes.io/unschedulable"))
        );
    }
}
