//! Small helpers the controllers share: the clock, owner references, label
//! selectors, timestamps, deleting exactly one object, a sync's outcome
//! after its write, the error of a request that failed, a Node's
//! addresses, and rolling-update limits given as a number or a percentage.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeAddress};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::core::{Selector, SelectorExt};

/// A sync's outcome once it wrote its object: done, also when the object
/// is gone by now (its informer brings the deletion); any other failure is
/// `error`'s.
pub(crate) fn done_or_gone<T, E>(
    written: kube::Result<T>,
    error: impl FnOnce(kube::Error) -> E,
) -> Result<skiff_informer::Action, E> {
    match written {
        Ok(_) => Ok(skiff_informer::Action::Done),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(skiff_informer::Action::Done),
        Err(source) => Err(error(source)),
    }
}

/// Whether `claim` still needs a volume: live and naming none.
pub(crate) fn unbound_claim(claim: &k8s_openapi::api::core::v1::PersistentVolumeClaim) -> bool {
    claim.metadata.deletion_timestamp.is_none()
        && claim
            .spec
            .as_ref()
            .is_none_or(|s| s.volume_name.as_deref().unwrap_or_default().is_empty())
}

/// Writes `finalizers` to `object` through `api`, guarded by the
/// resourceVersion the caller judged (a conflict means it changed since):
/// how the protection controllers add and take off their finalizers.
pub(crate) async fn write_finalizers<K>(
    api: &kube::Api<K>,
    object: &K,
    finalizers: Vec<String>,
) -> kube::Result<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    use kube::ResourceExt as _;
    let patch = serde_json::json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": object.resource_version(),
    }});
    let params = kube::api::PatchParams::default();
    api.patch(
        &object.name_any(),
        &params,
        &kube::api::Patch::Merge(&patch),
    )
    .await
}

/// Delete options that delete only the object `meta` describes (by uid):
/// one re-created meanwhile under the same name, which the caller did not
/// judge, stays.
pub(crate) fn delete_exactly(meta: &ObjectMeta) -> kube::api::DeleteParams {
    kube::api::DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: meta.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    }
}

/// A request to the API server that failed: what it did, the object it was
/// about and the API's error, for the controllers whose errors are only
/// these (one shape, one message: `deleting pod ns/name: ...`).
#[derive(Debug, thiserror::Error)]
#[error("{action} {object}: {source}")]
pub struct RequestFailed {
    /// The request that failed, e.g. "deleting pod".
    pub action: &'static str,
    /// The object the request was about.
    pub object: String,
    /// The API's error.
    #[source]
    pub source: kube::Error,
}

impl RequestFailed {
    /// The failure of `action` on `object`, given the API's error (for
    /// `map_err`).
    pub fn of(action: &'static str, object: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let object = object.into();
        move |source| Self {
            action,
            object,
            source,
        }
    }
}

/// An API write of a workload controller that failed, for the object it
/// syncs: `creating pod for daemonset ns/name: ...`.
#[derive(Debug, thiserror::Error)]
#[error("{what} for {kind} {key}: {source}")]
pub(crate) struct WriteFailed {
    /// The write that failed, e.g. "creating job".
    pub what: &'static str,
    /// The synced object's kind, as the message names it ("daemonset").
    pub kind: &'static str,
    /// The synced object's namespace/name.
    pub key: String,
    /// The API's error.
    #[source]
    pub source: kube::Error,
}

impl WriteFailed {
    /// The failure of `what` while syncing the `kind` object `key`.
    pub(crate) fn new(
        kind: &'static str,
        key: &str,
        what: &'static str,
        source: kube::Error,
    ) -> Self {
        Self {
            what,
            kind,
            key: key.to_owned(),
            source,
        }
    }
}

/// Merges `patch` into the status of `pod` (gone already counts as done):
/// the status writes node lifecycle and pod GC make to pods they judge.
pub(crate) async fn patch_pod_status(
    client: &kube::Client,
    pod: &k8s_openapi::api::core::v1::Pod,
    patch: &serde_json::Value,
    action: &'static str,
) -> Result<(), RequestFailed> {
    use kube::ResourceExt as _;
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
    let params = kube::api::PatchParams::default();
    match api
        .patch_status(&pod.name_any(), &params, &kube::api::Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(source) => Err(RequestFailed::of(action, pod.name_any())(source)),
    }
}

/// Merges `status` into the status of the object `name` through `api`:
/// `Ok(false)` when the object is gone (its sync is then done).
pub(crate) async fn write_status<K>(
    api: &kube::Api<K>,
    name: &str,
    status: serde_json::Value,
) -> Result<bool, kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = kube::api::Patch::Merge(serde_json::json!({ "status": status }));
    match api
        .patch_status(name, &kube::api::PatchParams::default(), &patch)
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// The message of an API error: the Status's own words when the server
/// sent one, as upstream's controllers print an error in events and
/// conditions (`pods "x" is forbidden: exceeded quota: …`), not kube's
/// wrapping of it.
pub(crate) fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

/// The addresses `node`'s status reports; none when it reports none.
pub(crate) fn node_addresses(node: &Node) -> &[NodeAddress] {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_deref())
        .unwrap_or_default()
}

/// The current time as an API timestamp.
pub(crate) fn now() -> Time {
    Time(Timestamp::now())
}

/// A controller owner reference to `owner` (controller and blockOwnerDeletion
/// set, as upstream's workload controllers write them).
pub(crate) fn controller_owner_ref<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: owner.meta().name.clone().unwrap_or_default(),
        uid: owner.meta().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The owner reference marked `controller: true`, if any.
pub(crate) fn controller_ref(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// The objects `cache` holds in `namespace` whose controller is the object
/// with `uid`: what a CronJob's Jobs, a Job's pods or a StatefulSet's
/// revisions are, without adopting or releasing anything.
pub(crate) fn controlled_by<K>(
    cache: &skiff_informer::Cache<K>,
    namespace: &str,
    uid: &str,
) -> Vec<std::sync::Arc<K>>
where
    K: Resource,
{
    cache
        .list_namespace(namespace)
        .into_iter()
        .filter(|o| controller_ref(o.meta()).is_some_and(|r| r.uid == uid))
        .collect()
}

/// Turns a spec's label selector into a matcher. An absent or invalid selector
/// selects nothing (upstream refuses to manage pods with one); an empty one
/// also selects nothing for workloads, which must have a selector.
pub(crate) fn workload_selector(selector: Option<&LabelSelector>) -> Option<Selector> {
    let selector = selector?;
    let parsed = Selector::try_from(selector.clone()).ok()?;
    (!parsed.selects_all()).then_some(parsed)
}

/// True when `selector` matches `meta`'s labels.
pub(crate) fn selects(selector: &Selector, meta: &ObjectMeta) -> bool {
    selector.matches(meta.labels.as_ref().unwrap_or(&BTreeMap::new()))
}

/// The "namespace/name" key of an object.
pub(crate) fn key_of(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or("")
    )
}

/// Seconds between two timestamps (negative when `later` is earlier).
pub(crate) fn seconds_between(earlier: &Time, later: &Time) -> i64 {
    later.0.as_second() - earlier.0.as_second()
}

/// FNV-1a, 32 bits, spelled with upstream's safe alphabet.
pub(crate) fn safe_hash(data: &[u8], collision_count: Option<i32>) -> String {
    let mut hash: u32 = 0x811c9dc5;
    let extra = collision_count.map(i32::to_le_bytes);
    for b in data.iter().chain(extra.iter().flatten()) {
        hash ^= u32::from(*b);
        hash = hash.wrapping_mul(0x01000193);
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    hash.to_string()
        .bytes()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect()
}

/// Resolves an int-or-percent (maxSurge, maxUnavailable) against `total`, rounding percentages up or
/// down. An unparsable percentage counts as zero.
pub(crate) fn scaled_value(
    value: Option<&IntOrString>,
    total: i32,
    round_up: bool,
    default: &str,
) -> i32 {
    let value = value
        .cloned()
        .unwrap_or_else(|| IntOrString::String(default.to_owned()));
    match value {
        IntOrString::Int(i) => i,
        IntOrString::String(s) => {
            let Some(pct) = s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else {
                return s.parse::<i32>().unwrap_or(0);
            };
            let product = pct * i64::from(total);
            let v = if round_up {
                (product + 99).div_euclid(100)
            } else {
                product.div_euclid(100)
            };
            v as i32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;

    #[test]
    fn controller_refs_block_owner_deletion() {
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let r = controller_owner_ref(&rs);
        assert_eq!(
            (r.api_version.as_str(), r.kind.as_str(), r.name.as_str()),
            ("apps/v1", "ReplicaSet", "web")
        );
        assert_eq!(
            (r.controller, r.block_owner_deletion),
            (Some(true), Some(true))
        );
        let meta = ObjectMeta {
            owner_references: Some(vec![
                OwnerReference {
                    controller: None,
                    ..r.clone()
                },
                r.clone(),
            ]),
            ..Default::default()
        };
        assert_eq!(controller_ref(&meta), Some(&r));
    }

    #[test]
    fn empty_or_missing_selectors_select_nothing() {
        assert!(workload_selector(None).is_none());
        assert!(workload_selector(Some(&LabelSelector::default())).is_none());
        let s = workload_selector(Some(&LabelSelector {
            match_labels: Some([("app".to_string(), "web".to_string())].into()),
            ..Default::default()
        }))
        .unwrap();
        let meta = ObjectMeta {
            labels: Some([("app".to_string(), "web".to_string())].into()),
            ..Default::default()
        };
        assert!(selects(&s, &meta));
        assert!(!selects(&s, &ObjectMeta::default()));
    }
}
