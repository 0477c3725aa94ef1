//! NodeRestriction, as upstream's admission plugin: a node (user
//! `system:node:<name>` in `system:nodes`) may write only what concerns
//! itself — its own Node (without steering labels, taints or a config
//! source), the status of pods bound to it, mirror pods bound to it, its
//! own Lease and CSINode, evictions and deletions of its own pods, claim
//! status, and tokens bound to its own pods. The Node authorizer decides
//! what a node may read; this plugin looks at the objects written.
//!
//! Which of these checks a write gets is the written kind's strategy's to
//! say (`KindStrategy::node_writes`). It reads the pods and nodes it
//! compares against from the watch caches and never writes; users that are
//! not nodes pass untouched.

use serde_json::{Map, Value};

use super::{Operation, WriteRequest};
use crate::authz::node::{Kind, NODE_LEASE_NAMESPACE, node_name, references};
use crate::handlers::storage;
use crate::kinds::NodeWrites;
use crate::object::meta_str;
use crate::registry::Subresource;
use crate::server::Inner;
use crate::status::ApiError;

/// The annotation that marks a mirror pod (a static pod's API copy).
pub(crate) const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Label namespace only administrators may set on nodes.
const RESTRICTED_LABEL_NAMESPACE: &str = "node-restriction.kubernetes.io";

/// Well-known labels a kubelet may set on its own Node.
const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
];

/// Label namespaces (and their subdomains) a kubelet may use freely.
const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

/// Refuses a node's write that does not concern it.
pub(crate) fn admit(inner: &Inner, request: &WriteRequest<'_>) -> Result<(), ApiError> {
    let Some(node) = node_name(request.user) else {
        return Ok(());
    };
    // The object the write is about: the pod an eviction or the account a
    // token request names, else what is written.
    let object = match request.subresource {
        Some(Subresource::Eviction | Subresource::Token) => request.old,
        _ => request.new.or(request.old),
    }
    .unwrap_or(&Value::Null);
    let refuse = |detail: String| {
        Err(storage::forbidden(
            request.info,
            meta_str(object, "name").unwrap_or(""),
            detail,
        ))
    };
    if node.is_empty() {
        return refuse(format!(
            "could not determine node from user \"{}\"",
            request.user.name
        ));
    }
    let check = Check {
        inner,
        node,
        request,
        object,
        namespace: meta_str(object, "namespace").unwrap_or(""),
    };
    let verdict = match request.info.strategy.node_writes() {
        NodeWrites::OwnPods => check.pod(),
        NodeWrites::OwnNode => check.node(),
        NodeWrites::ClaimStatus => check.claim(),
        NodeWrites::PodTokens => check.token(),
        NodeWrites::OwnLease => check.lease(),
        NodeWrites::OwnName(what) => check.own_name(what),
        NodeWrites::Unchecked => Ok(()),
    };
    match verdict {
        Ok(()) => Ok(()),
        Err(Refusal::Forbidden(detail)) => refuse(detail),
        Err(Refusal::Api(error)) => Err(error),
    }
}

/// Why a write is refused.
enum Refusal {
    /// A 403 with this detail.
    Forbidden(String),
    /// Another error (the pod asked about does not exist, …).
    Api(ApiError),
}

type Verdict = Result<(), Refusal>;

fn forbid(detail: impl Into<String>) -> Verdict {
    Err(Refusal::Forbidden(detail.into()))
}

/// One write by `node`.
struct Check<'a> {
    inner: &'a Inner,
    node: &'a str,
    request: &'a WriteRequest<'a>,
    /// What the write is about (see [`admit`]).
    object: &'a Value,
    namespace: &'a str,
}

impl Check<'_> {
    fn new_object(&self) -> &Value {
        self.request.new.unwrap_or(&Value::Null)
    }

    fn old_object(&self) -> &Value {
        self.request.old.unwrap_or(&Value::Null)
    }

    /// The stored pod `name` of the write's namespace (404 when missing).
    fn pod_named(&self, name: &str) -> Result<Value, Refusal> {
        crate::tokens::read_core_found(self.inner, "pods", self.namespace, name)
            .map_err(Refusal::Api)
    }

    /// A write to a status subresource, which a node may only update:
    /// `check` judges the update from the old and the new object.
    fn status_update(
        &self,
        operation: Operation,
        check: impl FnOnce(&Value, &Value) -> Verdict,
    ) -> Verdict {
        match operation {
            Operation::Update => check(self.old_object(), self.new_object()),
            operation => forbid(format!("unexpected operation \"{operation:?}\"")),
        }
    }

    fn bound_here(&self, pod: &Value) -> bool {
        pod["spec"]["nodeName"] == self.node
    }

    fn pod(&self) -> Verdict {
        let node = self.node;
        match (self.request.subresource, self.request.operation) {
            (None, Operation::Create) => self.mirror_pod(),
            (None, Operation::Delete) => {
                if self.bound_here(self.old_object()) {
                    Ok(())
                } else {
                    forbid(format!(
                        "node \"{node}\" can only delete pods with spec.nodeName set to itself"
                    ))
                }
            }
            (None, operation) => forbid(format!(
                "unexpected operation \"{operation:?}\", node \"{node}\" can only create and delete mirror pods"
            )),
            (Some(Subresource::Status), operation) => self.status_update(operation, |old, new| {
                if !self.bound_here(old) {
                    return forbid(format!(
                        "node \"{node}\" can only update pod status for pods with spec.nodeName set to itself"
                    ));
                }
                if labels(old) != labels(new) {
                    return forbid(format!(
                        "node \"{node}\" cannot update labels through pod status"
                    ));
                }
                Ok(())
            }),
            (Some(Subresource::Eviction), _) => {
                if self.bound_here(self.object) {
                    Ok(())
                } else {
                    forbid(format!(
                        "node {node} can only evict pods with spec.nodeName set to itself"
                    ))
                }
            }
            (Some(other), _) => forbid(format!(
                "unexpected pod subresource \"{}\", only 'status' and 'eviction' are allowed",
                other.name()
            )),
        }
    }

    /// A node may create only a mirror pod of its own that refers to
    /// nothing else in the API.
    fn mirror_pod(&self) -> Verdict {
        let node = self.node;
        let pod = self.new_object();
        if pod["metadata"]["annotations"][MIRROR_POD_ANNOTATION].is_null() {
            return forbid(format!(
                "pod does not have \"{MIRROR_POD_ANNOTATION}\" annotation, node \"{node}\" can only create mirror pods"
            ));
        }
        if !self.bound_here(pod) {
            return forbid(format!(
                "node \"{node}\" can only create pods with spec.nodeName set to itself"
            ));
        }
        let owners = pod["metadata"]["ownerReferences"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let owner = match owners {
            [] => {
                return forbid(format!(
                    "node \"{node}\" can only create pods with an owner reference set to itself"
                ));
            }
            [owner] => owner,
            _ => {
                return forbid(format!(
                    "node \"{node}\" can only create pods with a single owner reference set to itself"
                ));
            }
        };
        if owner["apiVersion"] != "v1" || owner["kind"] != "Node" || owner["name"] != node {
            return forbid(format!(
                "node \"{node}\" can only create pods with an owner reference set to itself"
            ));
        }
        if owner["controller"] != true {
            return forbid(format!(
                "node \"{node}\" can only create pods with a controller owner reference set to itself"
            ));
        }
        if owner["blockOwnerDeletion"] == true {
            return forbid(format!(
                "node \"{node}\" must not set blockOwnerDeletion on an owner reference"
            ));
        }
        let stored =
            crate::tokens::read_core_found(self.inner, "nodes", "", node).map_err(Refusal::Api)?;
        let uid = meta_str(&stored, "uid").unwrap_or("");
        let claimed = owner["uid"].as_str().unwrap_or("");
        if claimed != uid {
            return forbid(format!(
                "node {node} UID mismatch: expected {claimed} got {uid}"
            ));
        }
        let spec = &pod["spec"];
        if spec["serviceAccountName"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
        {
            return forbid(format!(
                "node \"{node}\" can not create pods that reference a service account"
            ));
        }
        for (kind, what) in [(Kind::Secret, "secrets"), (Kind::ConfigMap, "configmaps")] {
            if !references(pod, kind).is_empty() {
                return forbid(format!(
                    "node \"{node}\" can not create pods that reference {what}"
                ));
            }
        }
        if uses_trust_bundles(pod) {
            return forbid(format!(
                "node \"{node}\" can not create pods that reference clustertrustbundles"
            ));
        }
        if !references(pod, Kind::Claim).is_empty() {
            return forbid(format!(
                "node \"{node}\" can not create pods that reference persistentvolumeclaims"
            ));
        }
        Ok(())
    }

    fn node(&self) -> Verdict {
        let node = self.node;
        let object = self.new_object();
        let target = meta_str(self.object, "name").unwrap_or("");
        if target != node {
            return forbid(format!(
                "node \"{node}\" is not allowed to modify node \"{target}\""
            ));
        }
        match self.request.operation {
            Operation::Create => {
                if !object["spec"]["configSource"].is_null() {
                    return forbid(format!(
                        "node \"{node}\" is not allowed to create pods with a non-nil configSource"
                    ));
                }
                let forbidden = forbidden_labels(labels(object), &Map::new());
                if !forbidden.is_empty() {
                    return forbid(format!(
                        "node \"{node}\" is not allowed to set the following labels: {}",
                        forbidden.join(", ")
                    ));
                }
                Ok(())
            }
            Operation::Update => {
                let old = self.old_object();
                let source = &object["spec"]["configSource"];
                if !source.is_null() && *source != old["spec"]["configSource"] {
                    return forbid(format!(
                        "node \"{node}\" is not allowed to update configSource to a new non-nil configSource"
                    ));
                }
                if taints(object) != taints(old) {
                    return forbid(format!("node \"{node}\" is not allowed to modify taints"));
                }
                let forbidden = forbidden_labels(labels(object), labels(old));
                if !forbidden.is_empty() {
                    return forbid(format!(
                        "is not allowed to modify labels: {}",
                        forbidden.join(", ")
                    ));
                }
                Ok(())
            }
            Operation::Delete => Ok(()),
        }
    }

    /// Only claim status, and in it only what a kubelet reports.
    fn claim(&self) -> Verdict {
        let node = self.node;
        match (self.request.subresource, self.request.operation) {
            (Some(Subresource::Status), operation) => self.status_update(operation, |old, new| {
                if reported_by_others(old) != reported_by_others(new) {
                    return forbid(format!(
                        "node \"{node}\" is not allowed to update fields other than status.capacity and status.conditions"
                    ));
                }
                Ok(())
            }),
            _ => forbid("may only update PVC status"),
        }
    }

    /// A token a node asks for must be bound to a pod on that node.
    fn token(&self) -> Verdict {
        if self.request.operation != Operation::Create
            || self.request.subresource != Some(Subresource::Token)
        {
            return Ok(());
        }
        let reference = &self.new_object()["spec"]["boundObjectRef"];
        let name = reference["name"].as_str().unwrap_or("");
        if reference["apiVersion"] != "v1" || reference["kind"] != "Pod" || name.is_empty() {
            return forbid("node requested token not bound to a pod");
        }
        let uid = reference["uid"].as_str().unwrap_or("");
        if uid.is_empty() {
            return forbid("node requested token with a pod binding without a uid");
        }
        let pod = self.pod_named(name)?;
        if meta_str(&pod, "uid") != Some(uid) {
            return forbid(format!(
                "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
            ));
        }
        if !self.bound_here(&pod) {
            return forbid("node requested token bound to a pod scheduled on a different node");
        }
        Ok(())
    }

    fn lease(&self) -> Verdict {
        if self.namespace != NODE_LEASE_NAMESPACE {
            return forbid(format!(
                "can only access leases in the \"{NODE_LEASE_NAMESPACE}\" system namespace"
            ));
        }
        self.own_name("node lease")
    }

    /// Objects named after the node that only it may touch.
    fn own_name(&self, what: &str) -> Verdict {
        if meta_str(self.object, "name") != Some(self.node) {
            return forbid(format!(
                "can only access {what} with the same name as the requesting node"
            ));
        }
        Ok(())
    }
}

fn labels(object: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
    object["metadata"]["labels"].as_object().unwrap_or(&EMPTY)
}

/// A node's taints; absent and empty are the same.
fn taints(node: &Value) -> &[Value] {
    node["spec"]["taints"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// A claim without what its node may report (capacity, conditions, the
/// expansion state) and without write bookkeeping.
fn reported_by_others(claim: &Value) -> Value {
    let mut rest = claim.clone();
    if let Some(meta) = rest["metadata"].as_object_mut() {
        meta.remove("resourceVersion");
        meta.remove("managedFields");
    }
    if let Some(status) = rest["status"].as_object_mut() {
        for field in [
            "capacity",
            "conditions",
            "allocatedResources",
            "allocatedResourceStatuses",
        ] {
            status.remove(field);
        }
    }
    rest
}

/// The label keys added, removed or changed that a node may not touch,
/// sorted.
fn forbidden_labels(new: &Map<String, Value>, old: &Map<String, Value>) -> Vec<String> {
    let mut changed: Vec<&String> = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(v))
        .map(|(k, _)| k)
        .chain(old.keys().filter(|k| !new.contains_key(*k)))
        .collect();
    changed.sort();
    changed.dedup();
    changed
        .into_iter()
        .filter(|key| {
            let namespace = label_namespace(key);
            in_namespace(namespace, RESTRICTED_LABEL_NAMESPACE)
                || (is_kubernetes_label(namespace) && !is_kubelet_label(key))
        })
        .cloned()
        .collect()
}

fn label_namespace(key: &str) -> &str {
    key.split_once('/').map(|(ns, _)| ns).unwrap_or("")
}

/// `namespace` is `base` or one of its subdomains.
fn in_namespace(namespace: &str, base: &str) -> bool {
    namespace == base
        || namespace
            .strip_suffix(base)
            .is_some_and(|head| head.ends_with('.'))
}

fn is_kubernetes_label(namespace: &str) -> bool {
    in_namespace(namespace, "kubernetes.io") || in_namespace(namespace, "k8s.io")
}

fn is_kubelet_label(key: &str) -> bool {
    KUBELET_LABELS.contains(&key)
        || KUBELET_LABEL_NAMESPACES
            .iter()
            .any(|base| in_namespace(label_namespace(key), base))
}

/// Whether a pod takes anything from a cluster trust bundle.
fn uses_trust_bundles(pod: &Value) -> bool {
    pod["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|v| v["projected"]["sources"].as_array().into_iter().flatten())
        .any(|source| !source["clusterTrustBundle"].is_null())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn nodes_keep_to_the_kubelet_label_set() {
        let none = Map::new();
        assert!(
            forbidden_labels(
                &map(json!({
                    "kubernetes.io/hostname": "n1",
                    "kubernetes.io/os": "linux",
                    "node.kubernetes.io/exclude-from-external-load-balancers": "",
                    "kubelet.kubernetes.io/x": "y",
                    "example.com/team": "a",
                    "plain": "b",
                })),
                &none
            )
            .is_empty()
        );
        assert_eq!(
            forbidden_labels(
                &map(json!({
                    "node-restriction.kubernetes.io/trusted": "yes",
                    "a.node-restriction.kubernetes.io/x": "yes",
                    "node-role.kubernetes.io/control-plane": "",
                    "k8s.io/thing": "1",
                })),
                &none
            ),
            vec![
                "a.node-restriction.kubernetes.io/x",
                "k8s.io/thing",
                "node-restriction.kubernetes.io/trusted",
                "node-role.kubernetes.io/control-plane",
            ]
        );
        // Unchanged labels are no concern; removing one is a change.
        let old = map(json!({"node-role.kubernetes.io/worker": "", "x": "1"}));
        assert!(
            forbidden_labels(
                &map(json!({"node-role.kubernetes.io/worker": "", "x": "2"})),
                &old
            )
            .is_empty()
        );
        assert_eq!(
            forbidden_labels(&map(json!({"x": "1"})), &old),
            vec!["node-role.kubernetes.io/worker"]
        );
        assert!(!in_namespace(
            "evilnode-restriction.kubernetes.io",
            RESTRICTED_LABEL_NAMESPACE
        ));
    }

    #[test]
    fn trust_bundles_are_seen_in_projected_volumes() {
        let pod = |volumes: Value| json!({"spec": {"volumes": volumes}});
        assert!(!uses_trust_bundles(&pod(
            json!([{"name": "v", "projected": {"sources": [{"configMap": {"name": "c"}}]}}])
        )));
        assert!(uses_trust_bundles(&pod(
            json!([{"name": "v", "projected": {"sources": [{"clusterTrustBundle": {"name": "b"}}]}}])
        )));
    }

    #[test]
    fn claim_status_may_change_only_in_what_a_node_reports() {
        let old = json!({"metadata": {"name": "c", "resourceVersion": "1", "labels": {"a": "b"}},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}});
        let mut grown = old.clone();
        grown["status"]["capacity"]["storage"] = json!("2Gi");
        grown["metadata"]["resourceVersion"] = json!("2");
        assert_eq!(reported_by_others(&old), reported_by_others(&grown));
        let mut relabelled = old.clone();
        relabelled["metadata"]["labels"]["a"] = json!("c");
        assert_ne!(reported_by_others(&old), reported_by_others(&relabelled));
    }
}
