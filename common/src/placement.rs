//! Whether a pod may be on a node, as the API's placement fields say: a
//! toleration against a taint, and the pod's node selector with its
//! required node affinity against the node's labels and name. The
//! DaemonSet controller, the node-lifecycle controller's taint eviction, the
//! scheduler and the node agent's admission all judge by these.

use k8s_openapi::api::core::v1::{
    Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};

/// True if `toleration` tolerates `taint`: the effects match (an empty one
/// tolerates every effect), and either the operator is `Exists` (an empty
/// key tolerates every key) or key and value are equal.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect_ok = toleration
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect);
    if !effect_ok {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            !key.is_empty()
                && toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// Whether `spec`'s `nodeSelector` and required node affinity (any of its
/// terms) admit `node`.
pub fn required_affinity_matches(spec: &PodSpec, node: &Node) -> bool {
    let labels = node.metadata.labels.as_ref();
    let label = |key: &str| labels.and_then(|l| l.get(key));
    if let Some(selector) = &spec.node_selector
        && selector.iter().any(|(k, v)| label(k) != Some(v))
    {
        return false;
    }
    required_node_affinity(spec)
        .is_none_or(|r| r.node_selector_terms.iter().any(|t| term_matches(t, node)))
}

/// `spec`'s required node affinity
/// (`requiredDuringSchedulingIgnoredDuringExecution`), if it has one.
pub fn required_node_affinity(spec: &PodSpec) -> Option<&NodeSelector> {
    let node_affinity = spec.affinity.as_ref()?.node_affinity.as_ref()?;
    node_affinity
        .required_during_scheduling_ignored_during_execution
        .as_ref()
}

/// Whether `node` meets every requirement of `term` (labels by
/// `matchExpressions`, its name by `matchFields` on `metadata.name`); a term
/// with none matches nothing, as upstream's.
pub fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let labels = node.metadata.labels.as_ref();
    let exprs = term.match_expressions.iter().flatten();
    let fields = term.match_fields.iter().flatten();
    let mut any = false;
    for req in exprs {
        any = true;
        if !requirement_matches(req, labels.and_then(|l| l.get(&req.key))) {
            return false;
        }
    }
    for req in fields {
        any = true;
        let name = node.metadata.name.as_ref();
        let value = (req.key == "metadata.name").then_some(name).flatten();
        if !requirement_matches(req, value) {
            return false;
        }
    }
    any
}

fn requirement_matches(req: &NodeSelectorRequirement, value: Option<&String>) -> bool {
    let values = req.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (
                value.and_then(|v| number(v)),
                values.first().and_then(|b| number(b)),
            ) else {
                return false;
            };
            if req.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: effect.into(),
            ..Default::default()
        }
    }

    fn tol(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Toleration {
            key: some(key),
            operator: some(op),
            value: some(value),
            effect: some(effect),
            ..Default::default()
        }
    }

    #[test]
    fn toleration_matching_table() {
        let t = taint("dedicated", "gpu", "NoSchedule");
        let cases = [
            (tol("dedicated", "Equal", "gpu", "NoSchedule"), true),
            (tol("dedicated", "", "gpu", ""), true),
            (tol("dedicated", "Equal", "cpu", "NoSchedule"), false),
            (tol("dedicated", "Exists", "", "NoSchedule"), true),
            (tol("dedicated", "Exists", "", "NoExecute"), false),
            (tol("", "Exists", "", ""), true),
            (tol("", "Equal", "", ""), false),
            (tol("other", "Exists", "", ""), false),
        ];
        for (tl, want) in cases {
            assert_eq!(tolerates(&tl, &t), want, "{tl:?}");
        }
    }

    #[test]
    fn selector_and_required_terms_judge_labels_and_name() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "labels": {"disk": "ssd", "cores": "8"}}
        }))
        .expect("node");
        let spec = |v: serde_json::Value| -> PodSpec { serde_json::from_value(v).expect("spec") };
        let term = |exprs: serde_json::Value, fields: serde_json::Value| {
            spec(
                serde_json::json!({"containers": [], "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": exprs, "matchFields": fields}]}}}}),
            )
        };
        let cases = [
            (
                spec(serde_json::json!({"containers": [], "nodeSelector": {"disk": "ssd"}})),
                true,
            ),
            (
                spec(serde_json::json!({"containers": [], "nodeSelector": {"disk": "hdd"}})),
                false,
            ),
            (
                term(
                    serde_json::json!([{"key": "cores", "operator": "Gt", "values": ["4"]}]),
                    serde_json::json!([]),
                ),
                true,
            ),
            (
                term(
                    serde_json::json!([{"key": "gpu", "operator": "Exists"}]),
                    serde_json::json!([]),
                ),
                false,
            ),
            (
                term(
                    serde_json::json!([]),
                    serde_json::json!([{"key": "metadata.name", "operator": "In", "values": ["n1"]}]),
                ),
                true,
            ),
            (term(serde_json::json!([]), serde_json::json!([])), false),
        ];
        for (i, (spec, want)) in cases.into_iter().enumerate() {
            assert_eq!(required_affinity_matches(&spec, &node), want, "case {i}");
        }
    }
}
