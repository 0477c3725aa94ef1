//! The Node authorizer: what a kubelet (user `system:node:<name>` in group
//! `system:nodes`) may do, as upstream's. Objects that hold data for pods —
//! Secrets, ConfigMaps, PersistentVolumeClaims and the PersistentVolumes
//! they are bound to, ServiceAccounts and their tokens, VolumeAttachments —
//! are readable by a node only while a pod bound to it (`spec.nodeName`)
//! refers to them; its Lease and CSINode only under its own name; skiff's
//! own `local-path` volumes pinned to it alone it may also read, and
//! delete once Released with reclaim policy `Delete` (the node holds their
//! directories and reclaims them; no node may list volumes); anything
//! else as upstream's `system:node` rules grant. Users that are not nodes
//! get no opinion. Like upstream's, it switches on the resource a request
//! names, before any strategy is looked up, so it matches the kinds' typed
//! `RESOURCE` constants.
//!
//! Relationships are found by scanning the API server's watch caches on
//! each request (the pods of the object's namespace; for a volume, the
//! claims bound to it): no index to keep, and cheap at skiff's scale. It
//! must never read the store.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use super::{Attributes, Authorizer, Decision, RequestKind, ResourceAttributes, RulesReview};
use crate::authn::UserInfo;
use crate::kinds::{
    ConfigMaps, CsiNodes, GroupResource, Leases, PersistentVolumeClaims, PersistentVolumes,
    Secrets, ServiceAccounts, VolumeAttachments,
};
use crate::watch_cache::WatchCache;

/// The prefix of node user names.
pub const NODE_USER_PREFIX: &str = "system:node:";
/// The group every node belongs to.
pub const NODES_GROUP: &str = "system:nodes";
/// Where node leases live.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The node a user is, when it is one: `Some("")` for a node user without
/// a name (which is refused).
pub fn node_name(user: &UserInfo) -> Option<&str> {
    let name = user.name.strip_prefix(NODE_USER_PREFIX)?;
    user.groups.iter().any(|g| g == NODES_GROUP).then_some(name)
}

/// One rule of upstream's `system:node` role.
struct Rule {
    verbs: &'static [&'static str],
    group: &'static str,
    /// `resource` or `resource/subresource`.
    resources: &'static [&'static str],
}

const READ: &[&str] = &["get", "list", "watch"];

/// What upstream's `system:node` ClusterRole grants, for the resources the
/// relationship checks below do not cover. (Endpoints are readable in full,
/// as skiff's node agent runs the service proxy beside it.)
const NODE_RULES: &[Rule] = &[
    Rule {
        verbs: &["create"],
        group: "authentication.k8s.io",
        resources: &["tokenreviews"],
    },
    Rule {
        verbs: &["create"],
        group: "authorization.k8s.io",
        resources: &["subjectaccessreviews", "localsubjectaccessreviews"],
    },
    Rule {
        verbs: READ,
        group: "",
        resources: &["services", "endpoints"],
    },
    Rule {
        verbs: &["create", "get", "list", "watch", "update", "patch"],
        group: "",
        resources: &["nodes"],
    },
    Rule {
        verbs: &["update", "patch"],
        group: "",
        resources: &["nodes/status"],
    },
    Rule {
        verbs: &["create", "update", "patch"],
        group: "",
        resources: &["events"],
    },
    Rule {
        verbs: &["create", "update", "patch"],
        group: "events.k8s.io",
        resources: &["events"],
    },
    Rule {
        verbs: &["get", "list", "watch", "create", "delete"],
        group: "",
        resources: &["pods"],
    },
    Rule {
        verbs: &["update", "patch"],
        group: "",
        resources: &["pods/status"],
    },
    Rule {
        verbs: &["create"],
        group: "",
        resources: &["pods/eviction"],
    },
    Rule {
        verbs: &["create", "get", "list", "watch"],
        group: "certificates.k8s.io",
        resources: &["certificatesigningrequests"],
    },
    Rule {
        verbs: &["get", "update", "patch"],
        group: "",
        resources: &["persistentvolumeclaims/status"],
    },
    Rule {
        verbs: READ,
        group: "storage.k8s.io",
        resources: &["csidrivers"],
    },
    Rule {
        verbs: READ,
        group: "node.k8s.io",
        resources: &["runtimeclasses"],
    },
    // Not upstream's: `skiff agent` runs the network policy controller as
    // its node, which reads these (and pods, above) and writes nothing.
    Rule {
        verbs: &["list", "watch"],
        group: "",
        resources: &["namespaces"],
    },
    Rule {
        verbs: &["list", "watch"],
        group: "networking.k8s.io",
        resources: &["networkpolicies"],
    },
    // Not upstream's either: `skiff agent` runs the service proxy as its
    // node (k3s's agents hold a kube-proxy certificate on the same host
    // instead), which reads these besides Services and Nodes (above).
    Rule {
        verbs: &["list", "watch"],
        group: "discovery.k8s.io",
        resources: &["endpointslices"],
    },
];

/// The Node authorizer over the API server's watch caches.
pub struct NodeAuthorizer {
    pods: Arc<WatchCache>,
    claims: Arc<WatchCache>,
    volumes: Arc<WatchCache>,
    attachments: Arc<WatchCache>,
}

/// What a node may do with a local-path volume pinned to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OwnVolume {
    /// Read it.
    Read,
    /// Read it and delete it (Released, reclaim policy `Delete`).
    Reclaim,
}

impl NodeAuthorizer {
    /// Reads pods, claims, volumes and volume attachments from these caches.
    pub(crate) fn new(
        pods: Arc<WatchCache>,
        claims: Arc<WatchCache>,
        volumes: Arc<WatchCache>,
        attachments: Arc<WatchCache>,
    ) -> Self {
        Self {
            pods,
            claims,
            volumes,
            attachments,
        }
    }

    /// What `node` may do with volume `name` as the node holding its
    /// directory: only a volume skiff's local-path provisioner made and
    /// pinned to `node` alone (what the node agent's reclaim judges too).
    fn own_volume(&self, node: &str, name: &str) -> Option<OwnVolume> {
        use k8s_openapi::api::core::v1::PersistentVolume;
        use skiff_common::local_path;
        let key = format!("{}{name}", self.volumes.prefix());
        let cached = self.volumes.get(&key)?;
        let volume: PersistentVolume = serde_json::from_value(cached.to_value()).ok()?;
        if !local_path::provisioned_by_us(&volume) || local_path::pinned_node(&volume) != Some(node)
        {
            return None;
        }
        Some(if local_path::to_reclaim(&volume) {
            OwnVolume::Reclaim
        } else {
            OwnVolume::Read
        })
    }

    /// A request about one PersistentVolume: a get of one a pod here uses
    /// (through its claim), or of a local-path volume pinned here; a
    /// delete of such a volume once it is to be reclaimed.
    fn volume(&self, node: &str, verb: &str, r: &ResourceAttributes) -> Decision {
        let own = || self.own_volume(node, &r.name);
        match verb {
            "get" if r.subresource.is_empty() && own().is_some() => Decision::Allow(String::new()),
            "get" => self.get_one(node, verb, r, Kind::Volume),
            "delete" if r.subresource.is_empty() && own() == Some(OwnVolume::Reclaim) => {
                Decision::Allow(String::new())
            }
            "delete" => Decision::NoOpinion(format!(
                "node '{node}' can only delete a Released local-path volume pinned to it"
            )),
            _ => Decision::NoOpinion("can only get individual resources of this type".into()),
        }
    }

    /// Whether a pod bound to `node` in `namespace` satisfies `refers`.
    fn any_pod(&self, node: &str, namespace: &str, refers: impl Fn(&Value) -> bool) -> bool {
        let prefix = format!("{}{namespace}/", self.pods.prefix());
        let snapshot = self.pods.snapshot();
        snapshot.under(&prefix).any(|(_, pod)| {
            let pod = pod.value();
            pod["spec"]["nodeName"] == node && refers(&pod)
        })
    }

    /// Whether `node` runs a pod using a claim bound to volume `name`.
    fn uses_volume(&self, node: &str, name: &str) -> bool {
        let snapshot = self.claims.snapshot();
        snapshot
            .objects
            .values()
            .map(|claim| claim.value())
            .filter(|claim| claim["spec"]["volumeName"] == name)
            .any(|claim| {
                let namespace = claim["metadata"]["namespace"].as_str().unwrap_or("");
                let claim_name = claim["metadata"]["name"].as_str().unwrap_or("");
                self.any_pod(node, namespace, |pod| {
                    references(pod, Kind::Claim).iter().any(|n| n == claim_name)
                })
            })
    }

    /// Whether the attachment `name` is for `node`.
    fn attachment_on(&self, node: &str, name: &str) -> bool {
        let key = format!("{}{name}", self.attachments.prefix());
        self.attachments
            .get(&key)
            .is_some_and(|a| a.value()["spec"]["nodeName"] == node)
    }

    /// A read (or token request) that needs a relationship.
    fn related(&self, node: &str, r: &ResourceAttributes, kind: Kind) -> Decision {
        if r.name.is_empty() {
            return Decision::NoOpinion("No Object name found".into());
        }
        let found = match kind {
            Kind::Volume => self.uses_volume(node, &r.name),
            Kind::Attachment => self.attachment_on(node, &r.name),
            _ => self.any_pod(node, &r.namespace, |pod| {
                references(pod, kind).iter().any(|n| *n == r.name)
            }),
        };
        if found {
            Decision::Allow(String::new())
        } else {
            Decision::NoOpinion(format!(
                "no relationship found between node '{node}' and this object"
            ))
        }
    }

    /// A read of one Secret or ConfigMap (`kind`) of a namespace.
    fn read_namespaced(
        &self,
        node: &str,
        verb: &str,
        r: &ResourceAttributes,
        kind: Kind,
    ) -> Decision {
        if !READ.contains(&verb) {
            return Decision::NoOpinion("can only read resources of this type".into());
        }
        if !r.subresource.is_empty() {
            return Decision::NoOpinion("cannot read subresource".into());
        }
        if r.namespace.is_empty() {
            return Decision::NoOpinion("can only read namespaced object of this type".into());
        }
        self.related(node, r, kind)
    }

    /// A get of one claim or volume (`kind`).
    fn get_one(&self, node: &str, verb: &str, r: &ResourceAttributes, kind: Kind) -> Decision {
        if verb != "get" {
            return Decision::NoOpinion("can only get individual resources of this type".into());
        }
        if !r.subresource.is_empty() {
            return Decision::NoOpinion("cannot get subresource".into());
        }
        self.related(node, r, kind)
    }

    fn decide(&self, node: &str, verb: &str, r: &ResourceAttributes) -> Decision {
        let refused = |why: &str| Decision::NoOpinion(why.to_string());
        match GroupResource::new(&r.group, &r.resource) {
            Secrets::RESOURCE => self.read_namespaced(node, verb, r, Kind::Secret),
            ConfigMaps::RESOURCE => self.read_namespaced(node, verb, r, Kind::ConfigMap),
            PersistentVolumeClaims::RESOURCE if r.subresource == "status" => {
                rules_decision(verb, r)
            }
            PersistentVolumeClaims::RESOURCE => self.get_one(node, verb, r, Kind::Claim),
            PersistentVolumes::RESOURCE => self.volume(node, verb, r),
            ServiceAccounts::RESOURCE => match (verb, r.subresource.as_str()) {
                ("get", "") | ("create", "token") => self.related(node, r, Kind::ServiceAccount),
                _ => refused("can only get service accounts or create their tokens"),
            },
            VolumeAttachments::RESOURCE => {
                if verb != "get" {
                    return refused("can only get individual resources of this type");
                }
                self.related(node, r, Kind::Attachment)
            }
            Leases::RESOURCE => {
                if !["get", "create", "update", "patch", "delete"].contains(&verb) {
                    return refused("can only get, create, update, patch, or delete a node lease");
                }
                if r.namespace != NODE_LEASE_NAMESPACE {
                    return Decision::NoOpinion(format!(
                        "can only access leases in the \"{NODE_LEASE_NAMESPACE}\" system namespace"
                    ));
                }
                // A create names its object only in the body; NodeRestriction
                // checks that name.
                if verb != "create" && r.name != node {
                    return refused(
                        "can only access node lease with the same name as the requesting node",
                    );
                }
                Decision::Allow(String::new())
            }
            CsiNodes::RESOURCE => {
                if !["get", "create", "update", "patch", "delete"].contains(&verb) {
                    return refused("can only get, create, update, patch, or delete a CSINode");
                }
                if verb != "create" && r.name != node {
                    return refused(
                        "can only access CSINode with the same name as the requesting node",
                    );
                }
                Decision::Allow(String::new())
            }
            _ => rules_decision(verb, r),
        }
    }
}

/// Allow when upstream's `system:node` rules grant the request.
fn rules_decision(verb: &str, r: &ResourceAttributes) -> Decision {
    let resource = r.combined_resource();
    let granted = NODE_RULES.iter().any(|rule| {
        rule.group == r.group && rule.verbs.contains(&verb) && rule.resources.contains(&&*resource)
    });
    if granted {
        Decision::Allow(String::new())
    } else {
        Decision::NoOpinion(String::new())
    }
}

impl Authorizer for NodeAuthorizer {
    fn authorize(&self, attributes: &Attributes) -> Decision {
        let Some(node) = node_name(&attributes.user) else {
            return Decision::NoOpinion(String::new());
        };
        if node.is_empty() {
            return Decision::NoOpinion(format!(
                "unknown node for user \"{}\"",
                attributes.user.name
            ));
        }
        match &attributes.request {
            RequestKind::Resource(r) => self.decide(node, &attributes.verb, r),
            RequestKind::NonResource { .. } => Decision::NoOpinion(String::new()),
        }
    }

    fn rules_for(&self, user: &UserInfo, _namespace: &str) -> RulesReview {
        if node_name(user).is_none() {
            return RulesReview::default();
        }
        // Most of a node's rights depend on the object asked about.
        RulesReview {
            incomplete: true,
            evaluation_error: "node authorizer does not support user rule resolution".into(),
            ..RulesReview::default()
        }
    }
}

/// What a pod may refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Secret,
    ConfigMap,
    Claim,
    ServiceAccount,
    /// A PersistentVolume (through a claim).
    Volume,
    /// A VolumeAttachment (through its node).
    Attachment,
}

/// The names of the objects of `kind` a pod refers to (upstream's
/// VisitPodSecretNames and its kin): the one list of a pod's references,
/// also used by NodeRestriction.
pub(crate) fn references(pod: &Value, kind: Kind) -> Vec<Cow<'_, str>> {
    let spec = &pod["spec"];
    let mut names: Vec<&str> = Vec::new();
    let mut made: Vec<Cow<'_, str>> = Vec::new();
    let volumes = || spec["volumes"].as_array().into_iter().flatten();
    match kind {
        Kind::Secret => {
            for secret in spec["imagePullSecrets"].as_array().into_iter().flatten() {
                names.extend(secret["name"].as_str());
            }
            data_refs(
                spec,
                ["secretKeyRef", "secretRef", "secret", "secretName"],
                &mut names,
            );
            for volume in volumes() {
                // Volume plugins that log in with a secret.
                for plugin in [
                    "csi",
                    "cephfs",
                    "rbd",
                    "flexVolume",
                    "iscsi",
                    "scaleIO",
                    "storageos",
                ] {
                    names.extend(volume[plugin]["secretRef"]["name"].as_str());
                    names.extend(volume[plugin]["nodePublishSecretRef"]["name"].as_str());
                }
                names.extend(volume["azureFile"]["secretName"].as_str());
            }
        }
        Kind::ConfigMap => {
            data_refs(
                spec,
                ["configMapKeyRef", "configMapRef", "configMap", "name"],
                &mut names,
            );
        }
        Kind::Claim => {
            let pod_name = pod["metadata"]["name"].as_str().unwrap_or("");
            for volume in volumes() {
                names.extend(volume["persistentVolumeClaim"]["claimName"].as_str());
                if volume["ephemeral"].is_object() {
                    // The claim of a generic ephemeral volume is named
                    // after the pod and the volume.
                    let name = volume["name"].as_str().unwrap_or("");
                    made.push(Cow::Owned(format!("{pod_name}-{name}")));
                }
            }
        }
        Kind::ServiceAccount => {
            let account = spec["serviceAccountName"]
                .as_str()
                .or(spec["serviceAccount"].as_str());
            names.extend(account);
        }
        Kind::Volume | Kind::Attachment => {}
    }
    made.extend(names.into_iter().map(Cow::Borrowed));
    made
}

/// The names of Secrets or ConfigMaps a pod's containers read through
/// `env` and `envFrom` and its volumes mount, directly or projected, given
/// the fields that name them: `[key_ref, env_from, volume, volume_name]`
/// (`secretKeyRef`, `secretRef`, `secret`, `secretName` for Secrets).
fn data_refs<'a>(
    spec: &'a Value,
    [key_ref, env_from, volume, volume_name]: [&str; 4],
    names: &mut Vec<&'a str>,
) {
    let containers = ["containers", "initContainers", "ephemeralContainers"]
        .into_iter()
        .flat_map(|field| spec[field].as_array().into_iter().flatten());
    for container in containers {
        for var in container["env"].as_array().into_iter().flatten() {
            names.extend(var["valueFrom"][key_ref]["name"].as_str());
        }
        for from in container["envFrom"].as_array().into_iter().flatten() {
            names.extend(from[env_from]["name"].as_str());
        }
    }
    for mounted in spec["volumes"].as_array().into_iter().flatten() {
        names.extend(mounted[volume][volume_name].as_str());
        for source in mounted["projected"]["sources"]
            .as_array()
            .into_iter()
            .flatten()
        {
            names.extend(source[volume]["name"].as_str());
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::watch_cache::CacheLimits;

    fn cache(prefix: &str, objects: Vec<(String, Value)>) -> Arc<WatchCache> {
        let limits = CacheLimits {
            history: 10,
            history_max_age: std::time::Duration::from_secs(3600),
            fanout_buffer: 10,
            snapshot_ttl: std::time::Duration::from_secs(1),
        };
        let cache = WatchCache::new(prefix.to_string(), &limits);
        cache.reset(
            objects
                .into_iter()
                .map(|(k, v)| (format!("{prefix}{k}"), Arc::new(v)))
                .collect(),
            1,
        );
        cache
    }

    fn pod(namespace: &str, name: &str, node: &str, spec: Value) -> (String, Value) {
        let mut spec = spec;
        spec["nodeName"] = json!(node);
        (
            format!("{namespace}/{name}"),
            json!({"metadata": {"name": name, "namespace": namespace}, "spec": spec}),
        )
    }

    fn authorizer() -> NodeAuthorizer {
        let pods = cache(
            "/registry/core/pods/",
            vec![
                pod(
                    "a",
                    "web",
                    "n1",
                    json!({
                        "serviceAccountName": "web-sa",
                        "imagePullSecrets": [{"name": "pull"}],
                        "containers": [{"name": "c",
                            "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}},
                                    {"name": "Y", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "k"}}}],
                            "envFrom": [{"configMapRef": {"name": "from-cm"}}]}],
                        "volumes": [
                            {"name": "s", "secret": {"secretName": "vol-secret"}},
                            {"name": "p", "projected": {"sources": [{"configMap": {"name": "proj-cm"}}, {"secret": {"name": "proj-secret"}}]}},
                            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}
                        ]
                    }),
                ),
                pod(
                    "a",
                    "db",
                    "n2",
                    json!({"serviceAccountName": "db-sa", "volumes": [{"name": "s", "secret": {"secretName": "db-secret"}}]}),
                ),
            ],
        );
        let claims = cache(
            "/registry/core/persistentvolumeclaims/",
            vec![(
                "a/data".into(),
                json!({"metadata": {"name": "data", "namespace": "a"}, "spec": {"volumeName": "pv-1"}}),
            )],
        );
        let attachments = cache(
            "/registry/storage.k8s.io/volumeattachments/",
            vec![("att-1".into(), json!({"spec": {"nodeName": "n1"}}))],
        );
        let volumes = cache(
            "/registry/core/persistentvolumes/",
            [
                local_path_volume("pvc-bound", &["n1"], true, "Bound", "Delete"),
                local_path_volume("pvc-released", &["n1"], true, "Released", "Delete"),
                local_path_volume("pvc-retained", &["n1"], true, "Released", "Retain"),
                local_path_volume("pvc-either", &["n1", "n2"], true, "Released", "Delete"),
                local_path_volume("hand-made", &["n1"], false, "Released", "Delete"),
            ]
            .into_iter()
            .map(|v| (v["metadata"]["name"].as_str().unwrap_or("").to_string(), v))
            .collect(),
        );
        NodeAuthorizer::new(pods, claims, volumes, attachments)
    }

    /// A hostPath volume pinned to `nodes`, made by skiff's local-path
    /// provisioner when `ours`.
    fn local_path_volume(
        name: &str,
        nodes: &[&str],
        ours: bool,
        phase: &str,
        policy: &str,
    ) -> Value {
        let annotations = if ours {
            json!({"pv.kubernetes.io/provisioned-by": "skiff.io/local-path"})
        } else {
            json!({})
        };
        json!({
            "metadata": {"name": name, "annotations": annotations},
            "spec": {
                "hostPath": {"path": format!("/var/lib/skiff/storage/{name}_a_data")},
                "persistentVolumeReclaimPolicy": policy,
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": nodes}]}]}}
            },
            "status": {"phase": phase}
        })
    }

    fn node(name: &str) -> UserInfo {
        UserInfo::new(format!("system:node:{name}"), vec![NODES_GROUP.to_string()])
    }

    fn ask(
        user: UserInfo,
        verb: &str,
        group: &str,
        resource: &str,
        ns: &str,
        name: &str,
    ) -> Attributes {
        Attributes {
            user,
            verb: verb.into(),
            request: RequestKind::v1(group, resource, ns, name),
        }
    }

    #[test]
    fn a_node_reads_what_its_pods_refer_to_and_nothing_else() {
        let a = authorizer();
        let n1 = || node("n1");
        for (resource, name) in [
            ("secrets", "pull"),
            ("secrets", "env-secret"),
            ("secrets", "vol-secret"),
            ("secrets", "proj-secret"),
            ("configmaps", "env-cm"),
            ("configmaps", "from-cm"),
            ("configmaps", "proj-cm"),
            ("persistentvolumeclaims", "data"),
            ("persistentvolumeclaims", "web-scratch"),
            ("serviceaccounts", "web-sa"),
        ] {
            assert_eq!(
                a.authorize(&ask(n1(), "get", "", resource, "a", name)),
                Decision::Allow(String::new()),
                "{resource}/{name}"
            );
        }
        // A watch of one object by name is a read too.
        assert_eq!(
            a.authorize(&ask(n1(), "watch", "", "secrets", "a", "vol-secret")),
            Decision::Allow(String::new())
        );
        assert_eq!(
            a.authorize(&ask(n1(), "get", "", "persistentvolumes", "", "pv-1")),
            Decision::Allow(String::new())
        );
        assert_eq!(
            a.authorize(&ask(
                n1(),
                "create",
                "",
                "serviceaccounts/token",
                "a",
                "web-sa"
            )),
            Decision::Allow(String::new())
        );
        assert_eq!(
            a.authorize(&ask(
                n1(),
                "get",
                "storage.k8s.io",
                "volumeattachments",
                "",
                "att-1"
            )),
            Decision::Allow(String::new())
        );

        let unrelated =
            Decision::NoOpinion("no relationship found between node 'n1' and this object".into());
        for (resource, ns, name) in [
            ("secrets", "a", "db-secret"),
            ("secrets", "b", "vol-secret"),
            ("configmaps", "a", "other"),
            ("serviceaccounts", "a", "db-sa"),
        ] {
            assert_eq!(
                a.authorize(&ask(n1(), "get", "", resource, ns, name)),
                unrelated,
                "{resource} {ns}/{name}"
            );
        }
        assert_eq!(
            a.authorize(&ask(node("n2"), "get", "", "persistentvolumes", "", "pv-1")),
            Decision::NoOpinion("no relationship found between node 'n2' and this object".into())
        );
        assert_eq!(
            a.authorize(&ask(node("n2"), "get", "", "secrets", "a", "db-secret")),
            Decision::Allow(String::new())
        );
        // Listing every secret, or writing one, is never a node's business.
        assert!(matches!(
            a.authorize(&ask(n1(), "list", "", "secrets", "a", "")),
            Decision::NoOpinion(_)
        ));
        assert!(matches!(
            a.authorize(&ask(n1(), "update", "", "secrets", "a", "vol-secret")),
            Decision::NoOpinion(_)
        ));
        assert!(matches!(
            a.authorize(&ask(n1(), "list", "", "persistentvolumes", "", "")),
            Decision::NoOpinion(_)
        ));
    }

    #[test]
    fn a_node_reads_its_own_local_path_volumes_and_deletes_only_released_ones() {
        let a = authorizer();
        let allowed = Decision::Allow(String::new());
        for name in ["pvc-bound", "pvc-released", "pvc-retained"] {
            assert_eq!(
                a.authorize(&ask(node("n1"), "get", "", "persistentvolumes", "", name)),
                allowed,
                "{name}"
            );
        }
        assert_eq!(
            a.authorize(&ask(
                node("n1"),
                "delete",
                "",
                "persistentvolumes",
                "",
                "pvc-released"
            )),
            allowed
        );

        // What an attacker holding n1's or n2's credentials must not do.
        let refused_delete = |n: &str| {
            Decision::NoOpinion(format!(
                "node '{n}' can only delete a Released local-path volume pinned to it"
            ))
        };
        for (who, name) in [
            ("n1", "pvc-bound"),    // still in use
            ("n1", "pvc-retained"), // its data is kept
            ("n1", "pvc-either"),   // not pinned to n1 alone
            ("n1", "hand-made"),    // not the provisioner's
            ("n1", "pv-1"),         // used by n1's pod, but not a local-path volume
            ("n1", "missing"),
            ("n2", "pvc-released"), // another node's
        ] {
            assert_eq!(
                a.authorize(&ask(node(who), "delete", "", "persistentvolumes", "", name)),
                refused_delete(who),
                "{who} deleting {name}"
            );
        }
        for (who, name) in [
            ("n2", "pvc-released"),
            ("n1", "pvc-either"),
            ("n1", "hand-made"),
        ] {
            assert_eq!(
                a.authorize(&ask(node(who), "get", "", "persistentvolumes", "", name)),
                Decision::NoOpinion(format!(
                    "no relationship found between node '{who}' and this object"
                )),
                "{who} reading {name}"
            );
        }
        for verb in [
            "list",
            "watch",
            "create",
            "update",
            "patch",
            "deletecollection",
        ] {
            assert_eq!(
                a.authorize(&ask(node("n1"), verb, "", "persistentvolumes", "", "")),
                Decision::NoOpinion("can only get individual resources of this type".into()),
                "{verb}"
            );
        }
        for verb in ["update", "patch"] {
            assert!(
                !matches!(
                    a.authorize(&ask(
                        node("n1"),
                        verb,
                        "",
                        "persistentvolumes",
                        "",
                        "pvc-released"
                    )),
                    Decision::Allow(_)
                ),
                "{verb}"
            );
        }
    }

    #[test]
    fn leases_and_csinodes_only_under_the_nodes_own_name() {
        let a = authorizer();
        let lease = |user, verb, ns, name| {
            a.authorize(&ask(user, verb, "coordination.k8s.io", "leases", ns, name))
        };
        assert_eq!(
            lease(node("n1"), "update", NODE_LEASE_NAMESPACE, "n1"),
            Decision::Allow(String::new())
        );
        assert_eq!(
            lease(node("n1"), "create", NODE_LEASE_NAMESPACE, ""),
            Decision::Allow(String::new())
        );
        assert_eq!(
            lease(node("n1"), "update", NODE_LEASE_NAMESPACE, "n2"),
            Decision::NoOpinion(
                "can only access node lease with the same name as the requesting node".into()
            )
        );
        assert!(matches!(
            lease(node("n1"), "get", "default", "n1"),
            Decision::NoOpinion(_)
        ));
        assert!(matches!(
            lease(node("n1"), "list", NODE_LEASE_NAMESPACE, ""),
            Decision::NoOpinion(_)
        ));
        let csinode = |name| {
            a.authorize(&ask(
                node("n1"),
                "patch",
                "storage.k8s.io",
                "csinodes",
                "",
                name,
            ))
        };
        assert_eq!(csinode("n1"), Decision::Allow(String::new()));
        assert!(matches!(csinode("n2"), Decision::NoOpinion(_)));
    }

    #[test]
    fn other_requests_follow_the_system_node_rules() {
        let a = authorizer();
        let n1 = || node("n1");
        for (verb, group, resource, ns, name) in [
            ("get", "", "nodes", "", "n1"),
            ("list", "", "nodes", "", ""),
            ("patch", "", "nodes/status", "", "n1"),
            ("watch", "", "pods", "", ""),
            ("patch", "", "pods/status", "a", "web"),
            ("create", "", "events", "a", ""),
            ("list", "", "services", "", ""),
            // What its network policy controller reads.
            ("list", "", "namespaces", "", ""),
            ("watch", "networking.k8s.io", "networkpolicies", "", ""),
            // What its service proxy reads.
            ("watch", "discovery.k8s.io", "endpointslices", "", ""),
            (
                "create",
                "authorization.k8s.io",
                "subjectaccessreviews",
                "",
                "",
            ),
            ("create", "authentication.k8s.io", "tokenreviews", "", ""),
        ] {
            assert_eq!(
                a.authorize(&ask(n1(), verb, group, resource, ns, name)),
                Decision::Allow(String::new()),
                "{verb} {resource}"
            );
        }
        for (verb, group, resource) in [
            ("delete", "", "nodes"),
            ("create", "", "namespaces"),
            ("get", "", "namespaces"),
            ("create", "networking.k8s.io", "networkpolicies"),
            ("delete", "networking.k8s.io", "networkpolicies"),
            ("create", "discovery.k8s.io", "endpointslices"),
            ("list", "apps", "deployments"),
            ("create", "", "pods/exec"),
            ("create", "rbac.authorization.k8s.io", "clusterrolebindings"),
        ] {
            assert_eq!(
                a.authorize(&ask(n1(), verb, group, resource, "a", "x")),
                Decision::NoOpinion(String::new()),
                "{verb} {resource}"
            );
        }
    }

    #[test]
    fn only_nodes_are_judged() {
        let a = authorizer();
        // The name alone is not enough: the group must say so too.
        let pretender = UserInfo::new("system:node:n1", Vec::new());
        assert_eq!(
            a.authorize(&ask(pretender, "get", "", "secrets", "a", "vol-secret")),
            Decision::NoOpinion(String::new())
        );
        let nameless = UserInfo::new("system:node:", vec![NODES_GROUP.to_string()]);
        assert_eq!(
            a.authorize(&ask(nameless, "get", "", "nodes", "", "n1")),
            Decision::NoOpinion("unknown node for user \"system:node:\"".into())
        );
        assert!(a.rules_for(&node("n1"), "a").incomplete);
        assert!(
            !a.rules_for(&UserInfo::new("bob", Vec::new()), "a")
                .incomplete
        );
    }
}
