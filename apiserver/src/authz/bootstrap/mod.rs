//! The default RBAC policy, created and reconciled at every start as
//! upstream's API server does: a missing default role or binding is
//! created; an existing one annotated
//! `rbac.authorization.kubernetes.io/autoupdate: "true"` gets back what it
//! lacks (labels, annotations, rules not covered, aggregation selectors,
//! subjects; a binding whose role reference changed is recreated) and keeps
//! whatever the admin added; one annotated `"false"` is left alone. Then the
//! aggregated roles (`admin`, `edit`, `view`, …) are filled, so they work
//! from the first request rather than once the aggregation controller runs.
//!
//! Everything goes through the API (the in-process client of the caller's
//! choosing, normally `system:apiserver` in `system:masters`), so the
//! usual admission, validation and watch-cache paths apply. It never
//! removes permissions an admin granted.

mod aggregate;
pub mod controllers;
pub mod roles;
pub mod table;

use std::collections::{BTreeMap, HashMap};

use futures::future::try_join_all;
use http::Method;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use self::aggregate::aggregated_rules;
use self::table::AUTOUPDATE;
use crate::authz::rbac::{GROUP, Rule, rule::uncovered};

/// A default object (RBAC policy, priority and fairness configuration)
/// could not be read or written through the in-process client.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// An API request for a policy object failed.
    #[error("{action} {what}: {source}")]
    Api {
        /// The request, e.g. "listing".
        action: &'static str,
        /// The object or kind the request was about.
        what: String,
        /// The API's error.
        #[source]
        source: kube::Error,
    },
    /// A policy object did not convert to JSON.
    #[error("encoding {what}: {source}")]
    Encode {
        /// The object.
        what: String,
        /// The conversion's error.
        #[source]
        source: serde_json::Error,
    },
}

/// The whole default policy: every ClusterRole, ClusterRoleBinding, Role
/// and RoleBinding the server keeps.
pub struct DefaultPolicy {
    /// The default ClusterRoles.
    pub cluster_roles: Vec<ClusterRole>,
    /// The default ClusterRoleBindings.
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
    /// The default Roles.
    pub roles: Vec<Role>,
    /// The default RoleBindings.
    pub role_bindings: Vec<RoleBinding>,
}

/// The default policy as code.
pub fn default_policy() -> DefaultPolicy {
    let cluster_roles = roles::cluster_roles()
        .into_iter()
        .chain(controllers::cluster_roles())
        .map(|spec| spec.cluster_role())
        .collect();
    let cluster_role_bindings = roles::cluster_role_bindings()
        .into_iter()
        .chain(controllers::cluster_role_bindings())
        .map(|spec| spec.cluster_role_binding())
        .collect();
    DefaultPolicy {
        cluster_roles,
        cluster_role_bindings,
        roles: roles::roles().iter().map(|s| s.role()).collect(),
        role_bindings: roles::role_bindings()
            .iter()
            .map(|s| s.role_binding())
            .collect(),
    }
}

/// Creates or reconciles the default policy through `client`, then fills
/// the aggregated ClusterRoles.
pub async fn ensure(client: &kube::Client) -> Result<(), BootstrapError> {
    let policy = default_policy();
    // Independent objects: written concurrently, so one group commit of
    // the store carries many of them.
    futures::try_join!(
        ensure_all(client, policy.cluster_roles),
        ensure_all(client, policy.cluster_role_bindings),
        ensure_all(client, policy.roles),
        ensure_all(client, policy.role_bindings),
    )?;
    fill_aggregated(client).await
}

/// What reconciling one existing object asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing to do (up to date, or protected by `autoupdate: "false"`).
    Keep,
    /// Store the reconciled object.
    Update,
    /// Delete and create the expected object (a binding's role reference
    /// cannot be changed in place).
    Recreate,
}

/// One kind of default policy object.
/// The metadata and the plural resource name (`URL_PATH_SEGMENT`) come
/// from k8s-openapi's own traits.
pub trait PolicyObject:
    k8s_openapi::Metadata<Ty = ObjectMeta>
    + k8s_openapi::Resource
    + Serialize
    + DeserializeOwned
    + Clone
    + Send
    + Sync
{
    /// Brings the kind-specific parts of `self` (the stored object) toward
    /// `expected`; true when that cannot be done in place (recreate).
    fn merge_body(&mut self, expected: &Self) -> bool;
}

/// Reconciles the stored `existing` object with `expected`: the object to
/// write and what to do with it.
pub fn reconcile<K: PolicyObject>(existing: &K, expected: &K) -> (Step, K) {
    let protected = existing
        .metadata()
        .annotations
        .as_ref()
        .and_then(|a| a.get(AUTOUPDATE))
        .is_some_and(|v| v == "false");
    if protected {
        return (Step::Keep, existing.clone());
    }
    let mut result = existing.clone();
    if result.merge_body(expected) {
        return (Step::Recreate, expected.clone());
    }
    let mut step = if serde_json::to_value(&result).ok() == serde_json::to_value(existing).ok() {
        Step::Keep
    } else {
        Step::Update
    };
    let meta = result.metadata_mut();
    let expected_meta = expected.metadata();
    if merge_map(&mut meta.labels, &expected_meta.labels)
        | merge_map(&mut meta.annotations, &expected_meta.annotations)
    {
        step = Step::Update;
    }
    (step, result)
}

/// Adds the keys of `expected` that `existing` lacks (existing values
/// win); whether anything was added.
fn merge_map(
    existing: &mut Option<BTreeMap<String, String>>,
    expected: &Option<BTreeMap<String, String>>,
) -> bool {
    let Some(expected) = expected else {
        return false;
    };
    let existing = existing.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in expected {
        if !existing.contains_key(k) {
            existing.insert(k.clone(), v.clone());
            changed = true;
        }
    }
    changed
}

/// Appends the expected rules the existing ones do not fully cover.
fn merge_rules(existing: &mut Option<Vec<PolicyRule>>, expected: &Option<Vec<PolicyRule>>) {
    let held: Vec<Rule> = existing.iter().flatten().map(Rule::from).collect();
    let held_refs: Vec<&Rule> = held.iter().collect();
    let missing: Vec<PolicyRule> = expected
        .iter()
        .flatten()
        .filter(|wanted| !uncovered(&held_refs, &[Rule::from(*wanted)]).is_empty())
        .cloned()
        .collect();
    if !missing.is_empty() {
        existing.get_or_insert_with(Vec::new).extend(missing);
    }
}

/// Appends the expected subjects that are missing (compared by kind,
/// name and namespace).
fn merge_subjects(existing: &mut Option<Vec<Subject>>, expected: &Option<Vec<Subject>>) {
    let same = |a: &Subject, b: &Subject| {
        a.kind == b.kind
            && a.name == b.name
            && a.namespace.as_deref().unwrap_or("") == b.namespace.as_deref().unwrap_or("")
    };
    let missing: Vec<Subject> = expected
        .iter()
        .flatten()
        .filter(|wanted| !existing.iter().flatten().any(|have| same(have, wanted)))
        .cloned()
        .collect();
    if !missing.is_empty() {
        existing.get_or_insert_with(Vec::new).extend(missing);
    }
}

impl PolicyObject for ClusterRole {
    fn merge_body(&mut self, expected: &Self) -> bool {
        merge_rules(&mut self.rules, &expected.rules);
        match (&mut self.aggregation_rule, &expected.aggregation_rule) {
            // Not meant to be aggregated: the aggregation goes.
            (Some(_), None) => self.aggregation_rule = None,
            (None, Some(wanted)) => self.aggregation_rule = Some(wanted.clone()),
            (Some(have), Some(wanted)) => {
                let selectors = have.cluster_role_selectors.get_or_insert_with(Vec::new);
                for selector in wanted.cluster_role_selectors.iter().flatten() {
                    if !selectors.contains(selector) {
                        selectors.push(selector.clone());
                    }
                }
            }
            (None, None) => {}
        }
        false
    }
}

impl PolicyObject for Role {
    fn merge_body(&mut self, expected: &Self) -> bool {
        merge_rules(&mut self.rules, &expected.rules);
        false
    }
}

/// How both binding kinds merge: a changed role reference cannot be changed
/// in place (true: recreate); otherwise the missing expected subjects are
/// appended.
fn merge_binding(
    (role_ref, subjects): (&RoleRef, &mut Option<Vec<Subject>>),
    expected: (&RoleRef, &Option<Vec<Subject>>),
) -> bool {
    if role_ref != expected.0 {
        return true;
    }
    merge_subjects(subjects, expected.1);
    false
}

impl PolicyObject for ClusterRoleBinding {
    fn merge_body(&mut self, expected: &Self) -> bool {
        let have = (&self.role_ref, &mut self.subjects);
        merge_binding(have, (&expected.role_ref, &expected.subjects))
    }
}

impl PolicyObject for RoleBinding {
    fn merge_body(&mut self, expected: &Self) -> bool {
        let have = (&self.role_ref, &mut self.subjects);
        merge_binding(have, (&expected.role_ref, &expected.subjects))
    }
}

/// The REST path of `K`'s collection (in `namespace`, if any) or of one
/// object.
fn path<K: PolicyObject>(namespace: Option<&str>, name: Option<&str>) -> String {
    let mut path = format!("/apis/{GROUP}/v1/");
    if let Some(ns) = namespace {
        path.push_str(&format!("namespaces/{ns}/"));
    }
    path.push_str(K::URL_PATH_SEGMENT);
    if let Some(name) = name {
        path.push('/');
        path.push_str(name);
    }
    path
}

fn describe<K: PolicyObject>(object: &K) -> String {
    let meta = object.metadata();
    match &meta.namespace {
        Some(ns) => format!(
            "{} {ns}/{}",
            K::URL_PATH_SEGMENT,
            meta.name.as_deref().unwrap_or("")
        ),
        None => format!(
            "{} {}",
            K::URL_PATH_SEGMENT,
            meta.name.as_deref().unwrap_or("")
        ),
    }
}

async fn call<T: DeserializeOwned>(
    client: &kube::Client,
    method: Method,
    path: String,
    body: Option<Vec<u8>>,
) -> Result<T, kube::Error> {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body.unwrap_or_default())
        .map_err(kube::Error::HttpError)?;
    client.request(request).await
}

fn encode<K: PolicyObject>(object: &K) -> Result<Vec<u8>, BootstrapError> {
    serde_json::to_vec(object).map_err(|source| BootstrapError::Encode {
        what: describe(object),
        source,
    })
}

fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

/// Lists `K` everywhere, keyed by (namespace, name).
async fn list_all<K: PolicyObject>(
    client: &kube::Client,
) -> Result<HashMap<(String, String), K>, BootstrapError> {
    #[derive(serde::Deserialize)]
    #[serde(bound = "K: DeserializeOwned")]
    struct List<K> {
        items: Vec<K>,
    }
    let list: List<K> = call(client, Method::GET, path::<K>(None, None), None)
        .await
        .map_err(|source| BootstrapError::Api {
            action: "listing",
            what: K::URL_PATH_SEGMENT.to_string(),
            source,
        })?;
    Ok(list
        .items
        .into_iter()
        .map(|item| {
            let meta = item.metadata();
            (
                (
                    meta.namespace.clone().unwrap_or_default(),
                    meta.name.clone().unwrap_or_default(),
                ),
                item,
            )
        })
        .collect())
}

async fn ensure_all<K: PolicyObject>(
    client: &kube::Client,
    expected: Vec<K>,
) -> Result<(), BootstrapError> {
    let existing = list_all::<K>(client).await?;
    try_join_all(expected.into_iter().map(|want| {
        let key = (
            want.metadata().namespace.clone().unwrap_or_default(),
            want.metadata().name.clone().unwrap_or_default(),
        );
        let found = existing.get(&key).cloned();
        ensure_one(client, want, found)
    }))
    .await?;
    Ok(())
}

/// How often a reconcile retries when someone else wrote the object in
/// between.
const ATTEMPTS: usize = 5;

async fn ensure_one<K: PolicyObject>(
    client: &kube::Client,
    expected: K,
    mut found: Option<K>,
) -> Result<(), BootstrapError> {
    let namespace = expected.metadata().namespace.clone();
    let name = expected.metadata().name.clone().unwrap_or_default();
    let failed = |action: &'static str, source| BootstrapError::Api {
        action,
        what: describe(&expected),
        source,
    };
    for _ in 0..ATTEMPTS {
        let Some(existing) = found.take() else {
            let created: Result<Value, _> = call(
                client,
                Method::POST,
                path::<K>(namespace.as_deref(), None),
                Some(encode(&expected)?),
            )
            .await;
            match created {
                Ok(_) => return Ok(()),
                Err(e) if is_status(&e, 409) => {
                    found = Some(
                        read(client, &expected)
                            .await
                            .map_err(|e| failed("reading", e))?,
                    );
                    continue;
                }
                Err(e) => return Err(failed("creating", e)),
            }
        };
        let (step, result) = reconcile(&existing, &expected);
        let outcome = match step {
            Step::Keep => return Ok(()),
            Step::Update => {
                tracing::info!(object = %describe(&expected), "reconciling default RBAC object");
                call::<Value>(
                    client,
                    Method::PUT,
                    path::<K>(namespace.as_deref(), Some(&name)),
                    Some(encode(&result)?),
                )
                .await
                .map(|_| ())
            }
            Step::Recreate => {
                tracing::info!(object = %describe(&expected), "recreating default RBAC binding");
                match call::<Value>(
                    client,
                    Method::DELETE,
                    path::<K>(namespace.as_deref(), Some(&name)),
                    None,
                )
                .await
                {
                    Ok(_) => {}
                    Err(e) if is_status(&e, 404) => {}
                    Err(e) => return Err(failed("deleting", e)),
                }
                continue;
            }
        };
        match outcome {
            Ok(()) => return Ok(()),
            Err(e) if is_status(&e, 409) => {
                found = Some(
                    read(client, &expected)
                        .await
                        .map_err(|e| failed("reading", e))?,
                );
            }
            Err(e) => return Err(failed("updating", e)),
        }
    }
    Err(BootstrapError::Api {
        action: "reconciling",
        what: describe(&expected),
        source: kube::Error::Service("kept changing while being reconciled".into()),
    })
}

async fn read<K: PolicyObject>(client: &kube::Client, like: &K) -> Result<K, kube::Error> {
    let meta = like.metadata();
    call(
        client,
        Method::GET,
        path::<K>(meta.namespace.as_deref(), meta.name.as_deref()),
        None,
    )
    .await
}

/// Gives every aggregated ClusterRole the rules of the roles its
/// selectors match, as the aggregation controller will keep doing.
async fn fill_aggregated(client: &kube::Client) -> Result<(), BootstrapError> {
    let mut all: Vec<ClusterRole> = list_all::<ClusterRole>(client)
        .await?
        .into_values()
        .collect();
    let changed = settle_aggregation(&mut all);
    let updates = changed.into_iter().map(|i| all[i].clone());
    try_join_all(updates.map(|role| async move {
        let name = role.metadata.name.clone().unwrap_or_default();
        match call::<Value>(
            client,
            Method::PUT,
            path::<ClusterRole>(None, Some(&name)),
            Some(encode(&role)?),
        )
        .await
        {
            // The aggregation controller will catch up with a newer write.
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 409) => Ok(()),
            Err(source) => Err(BootstrapError::Api {
                action: "filling",
                what: describe(&role),
                source,
            }),
        }
    }))
    .await?;
    Ok(())
}

/// Fills the aggregated roles of `all` in place until nothing changes
/// (an aggregated role may gather another, as `admin` gathers `edit`);
/// returns the indexes of the roles that changed.
pub fn settle_aggregation(all: &mut [ClusterRole]) -> Vec<usize> {
    let mut changed = Vec::new();
    // Each round settles at least one more level of nesting; a cycle of
    // aggregated roles stops growing once every rule has reached it.
    for _ in 0..all.len().max(1) {
        let mut any = false;
        for i in 0..all.len() {
            let Some(rules) = aggregated_rules(&all[i], all) else {
                continue;
            };
            if all[i].rules.as_deref().unwrap_or_default() != rules.as_slice() {
                all[i].rules = Some(rules);
                any = true;
                if !changed.contains(&i) {
                    changed.push(i);
                }
            }
        }
        if !any {
            break;
        }
    }
    changed
}

#[cfg(test)]
mod tests;
