//! One strategy per kind, as upstream's registry strategies: everything the
//! generic handlers do differently for one kind of object lives in that
//! kind's module here — defaults, validation (with the name rule), the
//! status a new object starts with, what an update may not change, how
//! deletion goes, allocations, create-time admission that reads server
//! state, the Scale view, and what the admission plugins look at in it
//! (its pod template for Pod Security, what NodeRestriction checks when a
//! node writes it). How a kind prints is not a rule of it: its registry
//! entry names its Table columns, as upstream's storage its TableConvertor.
//!
//! Each resource's [`ResourceInfo`] carries its strategy, chosen once where
//! the registry is built (`registry/builtin.rs` for built-ins, `crd/` for
//! custom resources); handlers call `info.strategy` and never match on
//! group or resource names; nor do the admission plugins, which ask the
//! strategy what to check. Strategies must not write the store: they say
//! what to write, the handlers and `handlers/storage.rs` write it.
//!
//! Code that must name one resource rather than ask a strategy (finding its
//! watch cache, the Node authorizer deciding on request attributes before
//! any strategy is looked up) uses the kind's typed [`GroupResource`]
//! constant, `<Strategy>::RESOURCE` (declared with the strategy by
//! `named_kind!`), never a pair of strings.

/// Declares a kind's strategy type, a unit struct, with the typed
/// [`GroupResource`] of its k8s-openapi type as `RESOURCE`: the shape of
/// every kind that code outside this module must name.
macro_rules! named_kind {
    (
        $(#[$kind_doc:meta])*
        $kind:ident = $object:ty;
    ) => {
        $(#[$kind_doc])*
        #[derive(Debug)]
        pub(crate) struct $kind;

        impl $kind {
            /// The kind's group and resource, what code outside `kinds/`
            /// (the Node authorizer, admission, the watch cache) names it by.
            pub(crate) const RESOURCE: $crate::kinds::GroupResource<'static> =
                $crate::kinds::GroupResource::of::<$object>();
        }
    };
}

mod admission_policies;
mod api_services;
mod autoscaling;
mod certificates;
mod config;
mod coordination;
mod custom;
mod default;
mod defined;
mod discovery;
mod disruption_budgets;
mod events;
mod flowcontrol;
mod ingresses;
mod namespaces;
mod networking;
mod nodes;
mod pods;
mod quota;
mod rbac;
mod runtime_classes;
mod scale;
mod scheduling;
mod service_accounts;
mod services;
mod storage;
mod volumes;
mod webhooks;
mod workloads;

use std::fmt;

use async_trait::async_trait;
use serde_json::Value;

use crate::authn::UserInfo;
use crate::registry::ResourceInfo;
use crate::server::Inner;
use crate::service_alloc::AllocationGuard;
use crate::status::{ApiError, FieldError};
use crate::validation::NameRule;
use crate::watch_cache::CacheForm;

pub(crate) use admission_policies::{
    VALIDATING_ADMISSION_POLICIES, VALIDATING_ADMISSION_POLICY_BINDINGS,
};
pub(crate) use api_services::API_SERVICES;
pub(crate) use autoscaling::HorizontalPodAutoscalers;
pub(crate) use certificates::CertificateSigningRequests;
pub(crate) use config::{ConfigMaps, Secrets};
pub(crate) use coordination::Leases;
pub(crate) use custom::{CustomResourceDefinitions, CustomResources};
pub(crate) use default::PLAIN;
pub(crate) use discovery::{EndpointSlices, Endpoints};
pub(crate) use disruption_budgets::PodDisruptionBudgets;
pub(crate) use events::Events;
pub(crate) use flowcontrol::{FLOW_SCHEMAS, PRIORITY_LEVEL_CONFIGURATIONS};
pub(crate) use ingresses::Ingresses;
pub(crate) use namespaces::Namespaces;
pub(crate) use networking::{IngressClasses, NetworkPolicies};
pub(crate) use nodes::Nodes;
pub(crate) use pods::Pods;
pub(crate) use quota::{LimitRanges, ResourceQuotas};
pub(crate) use rbac::Rbac;
pub(crate) use runtime_classes::RuntimeClasses;
pub(crate) use scale::scale_of;
pub(crate) use scheduling::PriorityClasses;
pub(crate) use service_accounts::ServiceAccounts;
pub(crate) use services::Services;
pub(crate) use storage::{CsiDrivers, CsiNodes, StorageClasses, VolumeAttachments};
pub(crate) use volumes::{PersistentVolumeClaims, PersistentVolumes};
pub(crate) use webhooks::{MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS};
pub(crate) use workloads::{
    CronJobs, DAEMON_SETS, DEPLOYMENTS, Jobs, PodTemplates, REPLICA_SETS, ReplicationControllers,
    STATEFUL_SETS,
};

/// What the status of a new object of a kind with a status subresource
/// starts as (status belongs to controllers, so a client's is not kept).
#[derive(Debug, Clone, Copy)]
pub(crate) enum InitialStatus {
    /// Whatever the client sent stays (nodes report their own status).
    Kept,
    /// No status at all.
    Cleared,
    /// `{"phase": …}` and nothing else.
    Phase(&'static str),
    /// Exactly the object this returns (a Service's empty
    /// `{"loadBalancer": {}}`, which upstream always writes).
    Empty(fn() -> Value),
}

/// A resource named by its API group and plural name. Each kind that code
/// outside this module must name has one as `<Strategy>::RESOURCE`, built
/// from its k8s-openapi type ([`GroupResource::of`]) so the names cannot be
/// misspelt; it matches as a pattern against [`GroupResource::new`] of a
/// request's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GroupResource<'a> {
    /// The API group; empty for the core group.
    pub(crate) group: &'a str,
    /// The plural resource name.
    pub(crate) resource: &'a str,
}

impl<'a> GroupResource<'a> {
    /// The resource `resource` of `group`, as a request names it.
    pub(crate) const fn new(group: &'a str, resource: &'a str) -> Self {
        Self { group, resource }
    }
}

impl GroupResource<'static> {
    /// The resource of the k8s-openapi type `T`.
    pub(crate) const fn of<T: k8s_openapi::Resource>() -> Self {
        Self::new(T::GROUP, T::URL_PATH_SEGMENT)
    }
}

/// What Pod Security admission checks in an object of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PodSecurityCheck {
    /// Nothing: the kind holds no pod spec.
    Nothing,
    /// A namespace's `pod-security.kubernetes.io/*` labels.
    NamespaceLabels,
    /// The pod itself, refused when it fails the enforced level.
    Pod,
    /// The pod template at this path, warned and audited about but never
    /// refused (the pods made from it are checked when they are created).
    Template(&'static [&'static str]),
}

/// What NodeRestriction admission allows a node to write of a kind (the
/// checks themselves are `admission_plugins::node_restriction`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeWrites {
    /// Anything the authorizers allowed.
    Unchecked,
    /// Status of pods bound to it, mirror pods bound to it, evictions and
    /// deletions of its own pods.
    OwnPods,
    /// Its own Node, without steering labels, taints or a config source.
    OwnNode,
    /// Claim status, and in it only what a kubelet reports.
    ClaimStatus,
    /// Tokens bound to pods on it.
    PodTokens,
    /// Its own Lease in the node lease namespace.
    OwnLease,
    /// Only the object named after it, called this in refusals.
    OwnName(&'static str),
}

/// An object about to be written, as its kind's checks see it.
#[derive(Clone, Copy)]
pub(crate) struct Written<'a> {
    /// The resource it is written to.
    pub info: &'a ResourceInfo,
    /// The object as it will be stored.
    pub object: &'a Value,
    /// The stored object, on updates.
    pub old: Option<&'a Value>,
    /// The subresource written through, if any (`pods/resize` changes what
    /// a pod update may change).
    pub subresource: Option<crate::registry::Subresource>,
}

impl Written<'_> {
    /// Whether this is a write of the status subresource, which keeps the
    /// stored spec (`admission::prepare_status_update`). Kinds skip their
    /// spec checks then, as upstream's status strategies validate the status
    /// alone: a spec stored before a rule existed must not stop its
    /// controller (or the kubelet) from reporting progress.
    pub(crate) fn status_only(&self) -> bool {
        self.subresource == Some(crate::registry::Subresource::Status)
    }
}

/// Upstream's create-time warning for a name that `subject` (its pods'
/// names, a pod's hostname) takes but that is not a DNS label: the label
/// rule's messages, as Go prints a `[]string`.
pub(crate) fn name_warning(object: &Value, subject: &str) -> Option<String> {
    let name = object["metadata"]["name"].as_str()?;
    let found = crate::validation::validate_name(crate::validation::NameRule::Label, name, "");
    if found.is_empty() {
        return None;
    }
    let details: Vec<&str> = found.iter().map(|e| e.detail.as_str()).collect();
    Some(format!(
        "metadata.name: this is used in {subject}, which can result in surprising behavior; a DNS label is recommended: [{}]",
        details.join(" ")
    ))
}

/// The pod template at `path` of `object` (null when it has none).
pub(super) fn template_of<'a>(object: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(object, |v, key| &v[*key])
}

/// The rules of one kind. Every method has the behaviour most kinds share
/// as its default, so a kind's module only says how it differs.
#[async_trait]
pub(crate) trait KindStrategy: fmt::Debug + Send + Sync {
    /// The rule `metadata.name` must follow.
    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    /// The status a new object starts with, when the kind has a status
    /// subresource.
    fn initial_status(&self) -> InitialStatus {
        InitialStatus::Cleared
    }

    /// Create-only changes after the status reset, before defaults (a CRD's
    /// cleanup finalizer, a pod's AppArmor annotations and fields), with
    /// the request's notes for any warning they give.
    fn on_create(&self, _object: &mut Value, _notes: &crate::request_notes::RequestNotes) {}

    /// Create-only changes that record who creates (a
    /// CertificateSigningRequest's requester), right after [`Self::on_create`].
    fn on_create_by(&self, _object: &mut Value, _user: &UserInfo) {}

    /// Fills defaults. Runs on every create and update, and on the stored
    /// object an update is compared with, so it must be idempotent. Unless
    /// a kind says otherwise, those of its `spec` (see
    /// [`KindStrategy::apply_spec_defaults`]).
    fn apply_defaults(&self, info: &ResourceInfo, object: &mut Value) {
        if let Some(spec) = spec_of(object) {
            self.apply_spec_defaults(info, spec);
        }
    }

    /// Fills the defaults of an object's `spec`, for the kinds whose
    /// defaults all live there; not called for an object without a spec.
    /// The same rules as [`KindStrategy::apply_defaults`].
    fn apply_spec_defaults(&self, _info: &ResourceInfo, _spec: &mut Value) {}

    /// The last step of a create, after defaults, built-in admission and
    /// mutating webhooks: fields upstream derives from the final object in
    /// its PrepareForCreate (a pod's QoS class).
    fn finish_create(&self, _object: &mut Value) {}

    /// The kind's own field checks of an object about to be written;
    /// metadata is checked for every kind.
    fn validate(&self, _written: &Written<'_>, _errors: &mut Vec<FieldError>) {}

    /// Warnings about a valid object that is likely wrong, which the client
    /// prints (upstream's WarningsOnCreate and WarningsOnUpdate). By default:
    /// on create, a name its pods take that is not a DNS label
    /// ([`KindStrategy::names_pods`]); the kind's pod template's, when it is
    /// new or changed; then the kind's own ([`KindStrategy::spec_warnings`]).
    fn warnings(&self, written: &Written<'_>) -> Vec<String> {
        if written.status_only() {
            return Vec::new();
        }
        let mut out = Vec::new();
        if written.old.is_none() && self.names_pods() {
            out.extend(name_warning(written.object, "Pod names and hostnames"));
        }
        if let Some(template) = self.pod_template() {
            let found = template_of(written.object, template);
            if written
                .old
                .is_none_or(|old| template_of(old, template) != found)
            {
                out.extend(crate::validation::pod_warnings::warnings(
                    found,
                    &template.join("."),
                ));
            }
        }
        out.extend(self.spec_warnings(written));
        out
    }

    /// Whether the object's name becomes part of its pods' names and
    /// hostnames (a Deployment's, a Job's), so a name that is not a DNS
    /// label is warned of when it is created.
    fn names_pods(&self) -> bool {
        false
    }

    /// Warnings about the kind's own spec beyond its pod template, on every
    /// write but a status write.
    fn spec_warnings(&self, _written: &Written<'_>) -> Vec<String> {
        Vec::new()
    }

    /// Carries from `old` into `new` what an update of the main resource may
    /// not change beyond system metadata and status (a namespace's
    /// `spec.finalizers`, a Service's allocations).
    fn carry_on_update(&self, _old: &Value, _new: &mut Value) {}

    /// Whether an update from `old` to `new` (both defaulted) starts a new
    /// generation, for kinds that track one: upstream's strategies count a
    /// change of anything but metadata and status.
    fn generation_changed(&self, old: &Value, new: &Value) -> bool {
        changed_outside_metadata(old, new)
    }

    /// Create-time admission that reads server state (a pod's service
    /// account, priority and API-access volume), before defaults and
    /// validation.
    async fn admit_create(
        &self,
        _inner: &Inner,
        _info: &ResourceInfo,
        _object: &mut Value,
    ) -> Result<(), ApiError> {
        Ok(())
    }

    /// Fills what the object at `key` needs from a shared pool (a Service's
    /// cluster IP and node ports) after admission. The returned guard must
    /// be held until the object is stored, so nothing else takes the same.
    async fn allocate<'i>(
        &self,
        _inner: &'i Inner,
        _info: &ResourceInfo,
        _key: &str,
        _object: &mut Value,
    ) -> Result<Option<AllocationGuard<'i>>, ApiError> {
        Ok(None)
    }

    /// After the object was deleted from the store (`last` is its final
    /// state): gives back what it held from a shared pool.
    async fn deleted(&self, _inner: &Inner, _last: &Value) {}

    /// Whether a DELETE on the collection is served (upstream serves none
    /// for namespaces: each is deleted, and emptied, on its own).
    fn deletes_collections(&self) -> bool {
        true
    }

    /// Refuses to delete objects that must stay (system namespaces).
    fn check_delete(&self, _info: &ResourceInfo, _name: &str) -> Result<(), ApiError> {
        Ok(())
    }

    /// The grace period a deletion of `object` gets, given the one the
    /// request asked for; `None` for kinds deleted without one.
    fn deletion_grace(&self, _object: &Value, _requested: Option<i64>) -> Option<i64> {
        None
    }

    /// Whether something in the object itself, beyond
    /// `metadata.finalizers`, keeps it from going once deletion started
    /// (a namespace's `spec.finalizers`).
    fn held(&self, _object: &Value) -> bool {
        false
    }

    /// What else marks an object whose deletion starts (a namespace's
    /// Terminating phase).
    fn mark_deleting(&self, _object: &mut Value) {}

    /// The autoscaling/v1 Scale view of an object, for kinds with a scale
    /// subresource.
    fn scale(&self, _info: &ResourceInfo, object: &Value) -> Value {
        scale::view(object, scale::label_selector(object))
    }

    /// Sets the replica count a Scale write asked for.
    fn set_replicas(&self, _info: &ResourceInfo, object: &mut Value, replicas: i64) {
        scale::set_spec_replicas(object, replicas);
    }

    /// Where an object of this kind keeps the pod template its pods are
    /// made from (a workload's `spec.template`); `None` when it has none.
    fn pod_template(&self) -> Option<&'static [&'static str]> {
        None
    }

    /// What Pod Security admission checks in objects of this kind: by
    /// default their pod template, when they have one.
    fn pod_security(&self) -> PodSecurityCheck {
        self.pod_template()
            .map_or(PodSecurityCheck::Nothing, PodSecurityCheck::Template)
    }

    /// What NodeRestriction admission lets a node write of this kind.
    fn node_writes(&self) -> NodeWrites {
        NodeWrites::Unchecked
    }

    /// How the watch cache holds objects of this kind: decoded for kinds
    /// the server reads on its own hot paths, encoded for bulk data that is
    /// mostly served as it is.
    fn cache_form(&self) -> CacheForm {
        CacheForm::Decoded
    }
}

/// The `spec` of an object, when it is an object.
fn spec_of(object: &mut Value) -> Option<&mut Value> {
    crate::object::path_mut(object, &["spec"]).filter(|s| s.is_object())
}

/// Sets `field` of an object unless it is already there.
fn set_default(target: &mut Value, field: &str, value: Value) {
    if let Some(map) = target.as_object_mut() {
        map.entry(field).or_insert(value);
    }
}

/// Whether `old` and `new` differ in anything but metadata and status: what
/// a generation counts by default.
pub(crate) fn changed_outside_metadata(old: &Value, new: &Value) -> bool {
    let rest = |object: &Value| {
        let mut copy = object.clone();
        if let Some(m) = copy.as_object_mut() {
            m.remove("metadata");
            m.remove("status");
        }
        copy
    };
    rest(old) != rest(new)
}

/// `field` of an object, an empty object first when it is missing: where
/// the defaults of a nested object go.
fn default_object<'a>(target: &'a mut Value, field: &str) -> Option<&'a mut Value> {
    set_default(target, field, Value::Object(serde_json::Map::new()));
    crate::object::path_mut(target, &[field])
}
