//! ClusterRole aggregation, as upstream's clusterrole-aggregation
//! controller: a ClusterRole with an `aggregationRule` has its `rules`
//! kept equal to the rules of the ClusterRoles its selectors match — for
//! each selector in order, the matching roles by name (itself excluded),
//! their rules in order, each rule once. Any ClusterRole change requeues
//! every aggregated role, so nested aggregation (`admin` gathering `edit`
//! gathering `view`) settles over a few rounds.
//!
//! It only ever writes the `rules` of aggregated roles, with the
//! resourceVersion it read (a conflict is retried with backoff).

use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::PostParams;
use kube::core::Selector;
use kube::{Api, ResourceExt};
use skiff_informer::{Action, Cache, Controller, HandlerFns, ObjectKey, WorkQueue};

use crate::controller_utils::{done_or_gone, selects};
use crate::manager::{Context, Stop, stopped};

/// Errors of the aggregation controller.
#[derive(Debug, thiserror::Error)]
pub enum AggregationError {
    /// An aggregation selector is not a valid label selector.
    #[error("clusterrole {role}: invalid aggregation selector: {message}")]
    Selector {
        /// The aggregating ClusterRole.
        role: String,
        /// Why the selector was refused.
        message: String,
    },
    /// Writing the aggregated rules failed (a conflict included).
    #[error("updating the rules of clusterrole {role}: {source}")]
    Api {
        /// The aggregating ClusterRole.
        role: String,
        #[source]
        /// The API's error.
        source: kube::Error,
    },
}

/// The rules `role` aggregates from `all`; `Ok(None)` when it has no
/// aggregation rule.
pub fn aggregated_rules(
    role: &ClusterRole,
    all: &[Arc<ClusterRole>],
) -> Result<Option<Vec<PolicyRule>>, AggregationError> {
    let Some(aggregation) = &role.aggregation_rule else {
        return Ok(None);
    };
    let mut sorted: Vec<&Arc<ClusterRole>> = all.iter().collect();
    sorted.sort_by_key(|role| role.name_any());
    let mut rules: Vec<PolicyRule> = Vec::new();
    for selector in aggregation.cluster_role_selectors.iter().flatten() {
        let selector =
            Selector::try_from(selector.clone()).map_err(|e| AggregationError::Selector {
                role: role.name_any(),
                message: e.to_string(),
            })?;
        for other in &sorted {
            if other.name_any() == role.name_any() || !selects(&selector, &other.metadata) {
                continue;
            }
            for rule in other.rules.iter().flatten() {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    Ok(Some(rules))
}

/// Runs the controller until `stop`.
pub async fn run(ctx: Context, stop: Stop) {
    let roles = ctx.factory.informer::<ClusterRole>();
    let queue = WorkQueue::<ObjectKey>::new();
    let enqueue_aggregated = {
        let (queue, cache) = (queue.clone(), roles.cache().clone());
        move || {
            for role in cache.list() {
                if role.aggregation_rule.is_some() {
                    queue.add(ObjectKey::from_object(role.as_ref()));
                }
            }
        }
    };
    let (e1, e2, e3) = (
        enqueue_aggregated.clone(),
        enqueue_aggregated.clone(),
        enqueue_aggregated,
    );
    let handler = HandlerFns::new()
        .on_add(move |_: &Arc<ClusterRole>| e1())
        .on_update(move |_, _: &Arc<ClusterRole>| e2())
        .on_delete(move |_: &Arc<ClusterRole>| e3());
    if let Err(error) = roles.add_event_handler(handler) {
        tracing::error!(%error, "clusterrole-aggregation: cannot watch clusterroles");
        return;
    }
    // A stop before the first list ends the wait too.
    tokio::select! {
        _ = roles.wait_for_sync() => {}
        _ = stopped(stop.clone()) => return,
    }
    let cache = roles.cache().clone();
    let client = ctx.client.clone();
    Controller::new("clusterrole-aggregation", queue)
        .run_until(
            move |key: ObjectKey| {
                let (client, cache) = (client.clone(), cache.clone());
                async move { sync(&client, &cache, &key).await }
            },
            stopped(stop),
        )
        .await;
}

async fn sync(
    client: &kube::Client,
    cache: &Cache<ClusterRole>,
    key: &ObjectKey,
) -> Result<Action, AggregationError> {
    let Some(role) = cache.get("", &key.name) else {
        return Ok(Action::Done);
    };
    let Some(rules) = aggregated_rules(&role, &cache.list())? else {
        return Ok(Action::Done);
    };
    if role.rules.as_deref().unwrap_or_default() == rules.as_slice() {
        return Ok(Action::Done);
    }
    let mut updated = (*role).clone();
    updated.rules = Some(rules);
    let api: Api<ClusterRole> = Api::all(client.clone());
    let written = api
        .replace(&key.name, &PostParams::default(), &updated)
        .await
        .inspect(|_| tracing::info!(clusterrole = %key.name, "aggregated rules updated"));
    done_or_gone(written, |source| AggregationError::Api {
        role: key.name.clone(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn role(value: serde_json::Value) -> Arc<ClusterRole> {
        Arc::new(serde_json::from_value(value).unwrap())
    }

    fn resources(rules: &[PolicyRule]) -> Vec<String> {
        rules
            .iter()
            .flat_map(|r| r.resources.clone().unwrap_or_default())
            .collect()
    }

    #[test]
    fn selectors_gather_rules_in_order_once_without_the_role_itself() {
        let all = vec![
            role(
                json!({"metadata": {"name": "agg", "labels": {"to-agg": "true"}},
                "aggregationRule": {"clusterRoleSelectors": [
                    {"matchLabels": {"to-agg": "true"}},
                    {"matchExpressions": [{"key": "extra", "operator": "Exists"}]}]},
                "rules": [{"apiGroups": [""], "resources": ["stale"], "verbs": ["get"]}]}),
            ),
            role(
                json!({"metadata": {"name": "z", "labels": {"to-agg": "true"}},
                "rules": [{"apiGroups": [""], "resources": ["z"], "verbs": ["get"]},
                          {"apiGroups": [""], "resources": ["shared"], "verbs": ["get"]}]}),
            ),
            role(
                json!({"metadata": {"name": "a", "labels": {"to-agg": "true"}},
                "rules": [{"apiGroups": [""], "resources": ["shared"], "verbs": ["get"]}]}),
            ),
            role(json!({"metadata": {"name": "b", "labels": {"extra": "1"}},
                "rules": [{"apiGroups": [""], "resources": ["b"], "verbs": ["get"]}]})),
            role(
                json!({"metadata": {"name": "c", "labels": {"to-agg": "false"}},
                "rules": [{"apiGroups": [""], "resources": ["c"], "verbs": ["get"]}]}),
            ),
        ];
        let rules = aggregated_rules(&all[0], &all).unwrap().unwrap();
        // First selector's matches by name (a, z), then the second's (b);
        // `shared` once; its own stale rule and `c` not at all.
        assert_eq!(resources(&rules), ["shared", "z", "b"]);
        assert!(aggregated_rules(&all[1], &all).unwrap().is_none());
        let bad = role(
            json!({"metadata": {"name": "bad"}, "aggregationRule": {"clusterRoleSelectors": [
            {"matchExpressions": [{"key": "k", "operator": "Sideways"}]}]}}),
        );
        assert!(aggregated_rules(&bad, &all).is_err());
    }
}
