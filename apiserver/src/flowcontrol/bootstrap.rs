//! Upstream's mandatory and suggested FlowSchemas and
//! PriorityLevelConfigurations, created at every start and kept as the
//! `apf.kubernetes.io/autoupdate-spec` annotation says: the mandatory ones
//! (`exempt`, `catch-all`) always get their spec back; a suggested one gets
//! it back when annotated `"true"`, or when unannotated and never changed
//! since it was created (generation 1); `"false"` leaves it to the admin.
//! An object annotated `"true"` that is no longer in the set is deleted.
//!
//! Everything goes through the in-process client (as `system:apiserver`),
//! so admission, validation and the watch caches see these writes like any
//! other. The objects are written out here as data; nothing else decides
//! what the default configuration is.

use std::collections::HashSet;

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::definition::{CATCH_ALL, EXEMPT};
// The RBAC defaults' error: both write default objects through the
// in-process client and fail the same two ways.
use crate::authz::bootstrap::BootstrapError;

/// The annotation saying whether the server keeps an object's spec.
pub(crate) const AUTOUPDATE: &str = "apf.kubernetes.io/autoupdate-spec";

/// Whether the server always restores an object or honours the annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Always gets its spec back (`exempt`, `catch-all`).
    Mandatory,
    /// Gets its spec back when annotated `"true"`, or unannotated and
    /// unchanged since it was created.
    Suggested,
}

/// One bootstrap object: its name, whether it is mandatory, and its spec.
#[derive(Debug, Clone)]
pub(crate) struct Bootstrap {
    /// The object's name.
    pub name: &'static str,
    /// Whether it is mandatory or suggested.
    pub kind: Kind,
    /// The object's spec.
    pub spec: Value,
}

const ALL: &str = "*";

fn limited(shares: i64, lendable: i64, queuing: Option<(i64, i64, i64)>) -> Value {
    let response = match queuing {
        Some((queues, hand_size, length)) => json!({
            "type": "Queue",
            "queuing": {"queues": queues, "handSize": hand_size, "queueLengthLimit": length},
        }),
        None => json!({"type": "Reject"}),
    };
    json!({"type": "Limited", "limited": {
        "nominalConcurrencyShares": shares,
        "lendablePercent": lendable,
        "limitResponse": response,
    }})
}

/// The priority levels, mandatory first.
pub(crate) fn priority_levels() -> Vec<Bootstrap> {
    let level = |name, kind, spec| Bootstrap { name, kind, spec };
    let suggested = |name, spec| level(name, Kind::Suggested, spec);
    vec![
        level(
            EXEMPT,
            Kind::Mandatory,
            json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}),
        ),
        level(CATCH_ALL, Kind::Mandatory, limited(5, 0, None)),
        suggested("system", limited(30, 33, Some((64, 6, 50)))),
        suggested("node-high", limited(40, 25, Some((64, 6, 50)))),
        suggested("leader-election", limited(10, 0, Some((16, 4, 50)))),
        suggested("workload-high", limited(40, 50, Some((128, 6, 50)))),
        suggested("workload-low", limited(100, 90, Some((128, 6, 50)))),
        suggested("global-default", limited(20, 50, Some((128, 6, 50)))),
    ]
}

fn group(name: &str) -> Value {
    json!({"kind": "Group", "group": {"name": name}})
}
fn user(name: &str) -> Value {
    json!({"kind": "User", "user": {"name": name}})
}
fn kube_system_sa(name: &str) -> Value {
    json!({"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": name}})
}

/// Every resource in every namespace and at cluster scope, every verb.
fn all_resources() -> Value {
    json!([{"verbs": [ALL], "apiGroups": [ALL], "resources": [ALL], "clusterScope": true, "namespaces": [ALL]}])
}
fn all_non_resources() -> Value {
    json!([{"verbs": [ALL], "nonResourceURLs": [ALL]}])
}
fn everything(subjects: Vec<Value>) -> Value {
    json!({"subjects": subjects, "resourceRules": all_resources(), "nonResourceRules": all_non_resources()})
}
fn lease_writes(subjects: Vec<Value>) -> Value {
    json!({"subjects": subjects, "resourceRules": [{
        "verbs": ["get", "create", "update"], "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"], "namespaces": [ALL],
    }]})
}

fn schema(
    name: &'static str,
    kind: Kind,
    level: &str,
    precedence: i64,
    distinguisher: Option<&str>,
    rules: Vec<Value>,
) -> Bootstrap {
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": rules,
    });
    if let Some(method) = distinguisher {
        spec["distinguisherMethod"] = json!({"type": method});
    }
    Bootstrap { name, kind, spec }
}

/// The flow schemas, mandatory first.
pub(crate) fn flow_schemas() -> Vec<Bootstrap> {
    use Kind::*;
    let by_user = Some("ByUser");
    let by_namespace = Some("ByNamespace");
    let everyone = || {
        vec![
            group("system:unauthenticated"),
            group("system:authenticated"),
        ]
    };
    vec![
        schema(
            EXEMPT,
            Mandatory,
            EXEMPT,
            1,
            None,
            vec![everything(vec![group("system:masters")])],
        ),
        schema(
            CATCH_ALL,
            Mandatory,
            CATCH_ALL,
            10_000,
            by_user,
            vec![everything(everyone())],
        ),
        schema(
            "probes",
            Suggested,
            EXEMPT,
            2,
            None,
            vec![json!({"subjects": everyone(), "nonResourceRules": [{
                "verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"],
            }]})],
        ),
        schema(
            "system-leader-election",
            Suggested,
            "leader-election",
            100,
            by_user,
            vec![lease_writes(vec![
                user("system:kube-controller-manager"),
                user("system:kube-scheduler"),
            ])],
        ),
        schema(
            "endpoint-controller",
            Suggested,
            "workload-high",
            150,
            by_user,
            vec![json!({
                "subjects": [user("system:kube-controller-manager"), kube_system_sa("endpoint-controller")],
                "resourceRules": [{"verbs": [ALL], "apiGroups": [""], "resources": ["endpoints"], "namespaces": [ALL]}],
            })],
        ),
        schema(
            "workload-leader-election",
            Suggested,
            "leader-election",
            200,
            by_user,
            vec![lease_writes(vec![kube_system_sa(ALL)])],
        ),
        schema(
            "system-node-high",
            Suggested,
            "node-high",
            400,
            by_user,
            vec![
                json!({"subjects": [group("system:nodes")], "resourceRules": [
                    {"verbs": [ALL], "apiGroups": [""], "resources": ["nodes", "nodes/status"], "clusterScope": true},
                    {"verbs": [ALL], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "namespaces": [ALL]},
                ]}),
            ],
        ),
        schema(
            "system-nodes",
            Suggested,
            "system",
            500,
            by_user,
            vec![everything(vec![group("system:nodes")])],
        ),
        schema(
            "kube-controller-manager",
            Suggested,
            "workload-high",
            800,
            by_namespace,
            vec![everything(vec![user("system:kube-controller-manager")])],
        ),
        schema(
            "kube-scheduler",
            Suggested,
            "workload-high",
            800,
            by_namespace,
            vec![everything(vec![user("system:kube-scheduler")])],
        ),
        schema(
            "kube-system-service-accounts",
            Suggested,
            "workload-high",
            900,
            by_namespace,
            vec![everything(vec![kube_system_sa(ALL)])],
        ),
        schema(
            "service-accounts",
            Suggested,
            "workload-low",
            9000,
            by_user,
            vec![everything(vec![group("system:serviceaccounts")])],
        ),
        schema(
            "global-default",
            Suggested,
            "global-default",
            9900,
            by_user,
            vec![everything(everyone())],
        ),
    ]
}

/// What to do with a stored bootstrap object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Leave it (up to date, or the admin's).
    Keep,
    /// Write this object back.
    Update(Value),
}

/// Decides whether the stored `existing` object (JSON) gets `expected`'s
/// spec back.
pub(crate) fn reconcile(existing: &Value, expected: &Bootstrap) -> Action {
    let annotation = existing["metadata"]["annotations"][AUTOUPDATE].as_str();
    let takes_update = match expected.kind {
        Kind::Mandatory => true,
        Kind::Suggested => match annotation {
            Some(value) => value == "true",
            None => existing["metadata"]["generation"].as_i64() == Some(1),
        },
    };
    if !takes_update {
        return Action::Keep;
    }
    if existing["spec"] == expected.spec && annotation == Some("true") {
        return Action::Keep;
    }
    let mut updated = existing.clone();
    updated["spec"] = expected.spec.clone();
    if !updated["metadata"]["annotations"].is_object() {
        updated["metadata"]["annotations"] = json!({});
    }
    updated["metadata"]["annotations"][AUTOUPDATE] = json!("true");
    Action::Update(updated)
}

fn new_object(kind: &str, item: &Bootstrap) -> Value {
    json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": item.name, "annotations": {AUTOUPDATE: "true"}},
        "spec": item.spec,
    })
}

fn typed<K: DeserializeOwned>(value: Value, what: &str) -> Result<K, BootstrapError> {
    serde_json::from_value(value).map_err(|source| BootstrapError::Encode {
        what: what.to_string(),
        source,
    })
}

fn untyped<K: Serialize>(object: &K, what: &str) -> Result<Value, BootstrapError> {
    serde_json::to_value(object).map_err(|source| BootstrapError::Encode {
        what: what.to_string(),
        source,
    })
}

async fn ensure_kind<K>(
    api: Api<K>,
    kind: &'static str,
    wanted: Vec<Bootstrap>,
) -> Result<(), BootstrapError>
where
    K: kube::Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let api_error = |action, what: &str| {
        let what = format!("{kind} {what}");
        move |source| BootstrapError::Api {
            action,
            what,
            source,
        }
    };
    let stored = api
        .list(&ListParams::default())
        .await
        .map_err(api_error("listing", "objects"))?;
    let mut known = HashSet::new();
    for item in &wanted {
        known.insert(item.name);
        let existing = stored
            .items
            .iter()
            .find(|o| o.meta().name.as_deref() == Some(item.name));
        match existing {
            None => {
                let object: K = typed(new_object(kind, item), item.name)?;
                match api.create(&PostParams::default(), &object).await {
                    Ok(_) => {}
                    // Another writer was first; the next start reconciles.
                    Err(kube::Error::Api(status)) if status.code == 409 => {}
                    Err(e) => return Err(api_error("creating", item.name)(e)),
                }
            }
            Some(existing) => {
                let existing = untyped(existing, item.name)?;
                if let Action::Update(updated) = reconcile(&existing, item) {
                    let object: K = typed(updated, item.name)?;
                    match api
                        .replace(item.name, &PostParams::default(), &object)
                        .await
                    {
                        Ok(_) => {}
                        Err(kube::Error::Api(status)) if status.code == 409 => {}
                        Err(e) => return Err(api_error("updating", item.name)(e)),
                    }
                }
            }
        }
    }
    for object in &stored.items {
        let meta = object.meta();
        let name = meta.name.as_deref().unwrap_or_default();
        let managed = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(AUTOUPDATE))
            .is_some_and(|v| v == "true");
        if managed && !known.contains(name) {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => return Err(api_error("deleting", name)(e)),
            }
        }
    }
    Ok(())
}

/// Creates or reconciles every bootstrap priority level and flow schema
/// through `client`.
pub(crate) async fn ensure(client: &kube::Client) -> Result<(), BootstrapError> {
    futures::try_join!(
        ensure_kind(
            Api::<PriorityLevelConfiguration>::all(client.clone()),
            "PriorityLevelConfiguration",
            priority_levels(),
        ),
        ensure_kind(
            Api::<FlowSchema>::all(client.clone()),
            "FlowSchema",
            flow_schemas(),
        ),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flowcontrol::definition;

    #[test]
    fn every_bootstrap_object_is_valid_and_already_defaulted() {
        for (kind, items) in [
            ("PriorityLevelConfiguration", priority_levels()),
            ("FlowSchema", flow_schemas()),
        ] {
            for item in items {
                let object = new_object(kind, &item);
                let mut defaulted = object.clone();
                let mut errors = Vec::new();
                if kind == "FlowSchema" {
                    definition::default_flow_schema(&mut defaulted);
                    definition::validate_flow_schema(&object, &mut errors);
                    let level = object["spec"]["priorityLevelConfiguration"]["name"].as_str();
                    assert!(
                        priority_levels().iter().any(|l| Some(l.name) == level),
                        "{} names a missing level",
                        item.name
                    );
                } else {
                    definition::default_priority_level(&mut defaulted);
                    definition::validate_priority_level(&object, &mut errors);
                }
                assert!(errors.is_empty(), "{}: {errors:?}", item.name);
                // A spec that defaulting changes would look edited on every start.
                assert_eq!(defaulted, object, "{}", item.name);
            }
        }
    }

    #[test]
    fn suggested_objects_follow_the_annotation_and_mandatory_ones_always_return() {
        let levels = priority_levels();
        let system = levels.iter().find(|l| l.name == "system").unwrap();
        let catch_all = levels.iter().find(|l| l.name == CATCH_ALL).unwrap();
        let edited = |annotation: Option<&str>, generation: i64| {
            let mut o = json!({"metadata": {"name": "x", "generation": generation},
                "spec": limited(1, 0, None)});
            if let Some(a) = annotation {
                o["metadata"]["annotations"] = json!({AUTOUPDATE: a});
            }
            o
        };
        assert_eq!(reconcile(&edited(Some("false"), 2), system), Action::Keep);
        assert_eq!(reconcile(&edited(None, 3), system), Action::Keep);
        for (existing, expected) in [
            (edited(Some("true"), 2), system),
            (edited(None, 1), system),
            (edited(Some("false"), 2), catch_all),
        ] {
            let Action::Update(updated) = reconcile(&existing, expected) else {
                panic!("{existing} not restored");
            };
            assert_eq!(updated["spec"], expected.spec);
            assert_eq!(updated["metadata"]["annotations"][AUTOUPDATE], "true");
        }
        let mut current = edited(Some("true"), 2);
        current["spec"] = system.spec.clone();
        assert_eq!(reconcile(&current, system), Action::Keep);
    }
}
