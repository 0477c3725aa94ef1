//! What an aggregated ClusterRole's rules are: for each of its selectors
//! in order, the ClusterRoles it matches (by name, itself excluded), and
//! their rules in order without repeats — as upstream's
//! clusterrole-aggregation controller computes them. The server uses it to
//! fill the aggregated roles at start; the controller in skiff-controllers
//! keeps them filled afterwards.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};

use crate::selectors::label::LabelSelector;

/// The rules `role` aggregates from `all`, or `None` when it has no
/// aggregation rule (or a selector that cannot be read).
pub fn aggregated_rules(role: &ClusterRole, all: &[ClusterRole]) -> Option<Vec<PolicyRule>> {
    let selectors = role
        .aggregation_rule
        .as_ref()?
        .cluster_role_selectors
        .as_ref();
    let mut sorted: Vec<&ClusterRole> = all.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut rules: Vec<PolicyRule> = Vec::new();
    for selector in selectors.into_iter().flatten() {
        let selector = serde_json::to_value(selector)
            .ok()
            .and_then(|v| LabelSelector::from_object(&v).ok())?;
        for other in &sorted {
            if other.metadata.name == role.metadata.name {
                continue;
            }
            let labels = serde_json::json!({"metadata": {"labels": other.metadata.labels}});
            if !selector.matches(&labels) {
                continue;
            }
            for rule in other.rules.iter().flatten() {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    Some(rules)
}
