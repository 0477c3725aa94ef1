//! The resource registry: every group/version/resource the server serves, with
//! what discovery advertises about it (verbs, short names, categories,
//! subresources) and what the handlers need to treat it right (scope, storage
//! prefix, typed decoding, version conversion, field selectors).

mod builtin;
mod conversion;
mod intern;
mod live;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

pub(crate) use conversion::{Conversion, event_v1_to_core};
pub(crate) use intern::{intern, intern_list};
pub(crate) use live::LiveRegistry;

/// A subresource served under `<resource>/<name>/<subresource>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// `status`: get/update/patch of `.status` only.
    Status,
    /// `scale`: autoscaling/v1 Scale view of `spec.replicas`.
    Scale,
    /// `pods/binding`: assigns a pod to a node once.
    Binding,
    /// `pods/eviction`: deletes a pod subject to disruption budgets.
    Eviction,
    /// `namespaces/finalize`: edits `spec.finalizers` of a namespace.
    Finalize,
    /// `certificatesigningrequests/approval`: edits approval conditions.
    Approval,
    /// `pods/log`: a container's log, from the pod's node.
    Log,
    /// `pods/exec`: a command in a container (upgraded stream).
    Exec,
    /// `pods/attach`: a container's main process (upgraded stream).
    Attach,
    /// `pods/portforward`: ports of the pod (upgraded stream).
    PortForward,
    /// `serviceaccounts/token`: a TokenRequest for the account.
    Token,
    /// `pods/ephemeralcontainers`: adds ephemeral containers to a running
    /// pod (what `kubectl debug` writes); nothing else of the pod changes.
    EphemeralContainers,
    /// `pods/resize`: changes the CPU and memory of a pod's containers in
    /// place; nothing else of the pod changes.
    Resize,
    /// `pods/proxy`, `services/proxy`, `nodes/proxy`: any request passed on
    /// to the pod, one of the service's pods, or the node's server.
    Proxy,
}

impl Subresource {
    /// The path segment naming this subresource.
    pub fn name(self) -> &'static str {
        match self {
            Subresource::Status => "status",
            Subresource::Scale => "scale",
            Subresource::Binding => "binding",
            Subresource::Eviction => "eviction",
            Subresource::Finalize => "finalize",
            Subresource::Approval => "approval",
            Subresource::Log => "log",
            Subresource::Exec => "exec",
            Subresource::Attach => "attach",
            Subresource::PortForward => "portforward",
            Subresource::Token => "token",
            Subresource::Proxy => "proxy",
            Subresource::EphemeralContainers => "ephemeralcontainers",
            Subresource::Resize => "resize",
        }
    }

    /// Verbs discovery lists for it.
    pub fn verbs(self) -> &'static [&'static str] {
        match self {
            Subresource::Status
            | Subresource::Scale
            | Subresource::Approval
            | Subresource::EphemeralContainers
            | Subresource::Resize => &["get", "patch", "update"],
            Subresource::Binding | Subresource::Eviction | Subresource::Token => &["create"],
            Subresource::Finalize => &["update"],
            Subresource::Log => &["get"],
            Subresource::Exec | Subresource::Attach | Subresource::PortForward => {
                &["create", "get"]
            }
            Subresource::Proxy => &["create", "delete", "get", "patch", "update"],
        }
    }

    /// The kind the subresource speaks, as `(group, version, kind)`; `None`
    /// means the parent's own kind.
    pub fn kind(self) -> Option<(&'static str, &'static str, &'static str)> {
        match self {
            Subresource::Scale => Some(("autoscaling", "v1", "Scale")),
            Subresource::Binding => Some(("", "v1", "Binding")),
            Subresource::Eviction => Some(("policy", "v1", "Eviction")),
            Subresource::Exec => Some(("", "v1", "PodExecOptions")),
            Subresource::Attach => Some(("", "v1", "PodAttachOptions")),
            Subresource::PortForward => Some(("", "v1", "PodPortForwardOptions")),
            Subresource::Token => Some(("authentication.k8s.io", "v1", "TokenRequest")),
            _ => None,
        }
    }

    /// The kind discovery names for the subresource of `parent`: its own
    /// kind, else upstream's `<Kind>ProxyOptions` for a proxy, else the
    /// parent's.
    pub fn discovery_kind(self, parent: &ResourceInfo) -> (&'static str, &'static str, String) {
        match (self, self.kind()) {
            (_, Some((g, v, k))) => (g, v, k.to_string()),
            (Subresource::Proxy, None) => ("", "v1", format!("{}ProxyOptions", parent.kind)),
            (_, None) => (parent.group, parent.version, parent.kind.to_string()),
        }
    }
}

/// Decodes a JSON object into the typed k8s-openapi struct and back, which
/// both checks its shape and drops fields the type does not know.
pub(crate) type TypedRoundTrip = fn(&Value) -> Result<Value, String>;

/// Everything known about one served group/version/resource.
#[derive(Debug, Clone)]
pub struct ResourceInfo {
    /// The API group; empty for the core group.
    pub group: &'static str,
    /// The version, e.g. `v1`.
    pub version: &'static str,
    /// Plural resource name (URL path segment).
    pub resource: &'static str,
    /// The kind, e.g. `Pod`.
    pub kind: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Short names for kubectl, e.g. `po`.
    pub short_names: &'static [&'static str],
    /// Categories for kubectl, e.g. `all`.
    pub categories: &'static [&'static str],
    /// The subresources served.
    pub subresources: Vec<Subresource>,
    /// `metadata.generation` is maintained (bumped on spec changes).
    pub tracks_generation: bool,
    /// Field selector labels accepted beyond metadata.name/namespace.
    pub field_labels: &'static [&'static str],
    /// PUT may create a missing object (upstream's AllowCreateOnUpdate).
    pub create_on_update: bool,
    /// Key prefix in the store shared by every version of this resource,
    /// ending in `/`.
    pub storage_prefix: String,
    /// Converts between this version and the stored one, when they differ.
    pub conversion: Option<Conversion>,
    pub(crate) roundtrip: TypedRoundTrip,
    /// Set for custom resources: the CRD version this entry serves, with its
    /// schema, printer columns and subresource paths.
    pub custom: Option<Arc<crate::crd::CustomVersion>>,
    /// The rules of this kind (defaults, validation, deletion, ...), which
    /// the handlers follow without knowing which kind it is.
    pub(crate) strategy: &'static dyn crate::kinds::KindStrategy,
    /// The Table columns `kubectl get` shows, named with the entry as
    /// upstream's storage names its TableConvertor; a custom resource's
    /// printer columns (in `custom`) take their place.
    pub(crate) printer: &'static crate::table::Printer,
    /// Set for virtual resources: create-only, answered by this review and
    /// never stored (no watch cache, nothing under the storage prefix).
    pub review: Option<crate::reviews::Review>,
    /// Set for the resource metrics (`metrics.k8s.io`): read-only, answered
    /// from the figures scraped off the nodes and never stored.
    pub metrics: Option<crate::resource_metrics::MetricsResource>,
    /// Set for `componentstatuses`: read-only, answered from the health of
    /// the store and the in-process components, never stored.
    pub component_statuses: bool,
    /// Set for the legacy `bindings` resource: create-only, binding the pod
    /// the body names (as `pods/<name>/binding` does), never stored.
    pub legacy_binding: bool,
}

/// What discovery lists for a stored resource.
const STORED_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

impl ResourceInfo {
    /// Whether this is the resource `resource` (in any version), for code
    /// that must single one out (see [`crate::kinds::GroupResource`]).
    pub(crate) fn is(&self, resource: crate::kinds::GroupResource<'_>) -> bool {
        self.group == resource.group && self.resource == resource.resource
    }

    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `configmaps` or `deployments.apps`, as upstream names resources in messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// Discovery's `singularName`: a CRD's `spec.names.singular`, else the lower-case kind.
    pub fn singular(&self) -> String {
        match &self.custom {
            Some(custom) if !custom.singular.is_empty() => custom.singular.clone(),
            _ => self.kind.to_ascii_lowercase(),
        }
    }

    /// The kind of a list, e.g. `PodList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// A virtual resource: never stored (a review, resource metrics,
    /// component statuses, legacy bindings).
    pub fn is_virtual(&self) -> bool {
        self.review.is_some()
            || self.metrics.is_some()
            || self.component_statuses
            || self.legacy_binding
    }

    /// The verbs discovery lists for the resource itself.
    pub fn verbs(&self) -> &'static [&'static str] {
        if self.metrics.is_some() || self.component_statuses {
            &["get", "list"]
        } else if self.is_virtual() {
            &["create"]
        } else if !self.strategy.deletes_collections() {
            &[
                "create", "delete", "get", "list", "patch", "update", "watch",
            ]
        } else {
            STORED_VERBS
        }
    }

    /// Whether `sub` is served.
    pub fn has(&self, sub: Subresource) -> bool {
        self.subresources.contains(&sub)
    }

    /// The store key of one object.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{}{ns}/{name}", self.storage_prefix),
            _ => format!("{}{name}", self.storage_prefix),
        }
    }

    /// The namespace (when namespaced) and name a storage key names.
    pub fn names_in_key<'k>(&self, key: &'k str) -> Option<(Option<&'k str>, &'k str)> {
        let rest = key.strip_prefix(self.storage_prefix.as_str())?;
        if self.namespaced {
            let (namespace, name) = rest.split_once('/')?;
            Some((Some(namespace), name))
        } else {
            Some((None, rest))
        }
    }

    /// The key prefix of a collection, optionally limited to one namespace.
    pub fn collection_prefix(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{}{ns}/", self.storage_prefix),
            _ => self.storage_prefix.clone(),
        }
    }

    /// Checks the object's shape against the typed struct and normalises it;
    /// a custom object comes back pruned to its schema, so what the round
    /// trip drops is what field validation calls unknown. A built-in kind's
    /// quantities must also parse as upstream parses them, and come back in
    /// its canonical form.
    pub fn roundtrip(&self, object: &Value) -> Result<Value, String> {
        if let Some(custom) = &self.custom {
            return Ok(custom.pruned(object));
        }
        let mut typed = (self.roundtrip)(object)?;
        crate::protobuf::settle_quantities(&self.api_version(), self.kind, &mut typed)
            .map_err(|refused| refused.to_string())?;
        Ok(typed)
    }

    /// The objects of `request` as a Table with this resource's columns.
    pub(crate) fn table(&self, request: crate::table::TableRequest<'_>) -> Value {
        match &self.custom {
            Some(custom) => crate::crd::printer::table(&custom.columns, request),
            None => crate::table::render(self.printer, request),
        }
    }

    /// Converts a stored object to this version (identity when they agree).
    // Named for the direction it converts in, beside `to_storage`.
    #[allow(clippy::wrong_self_convention)]
    pub fn from_storage(&self, object: Value) -> Value {
        self.convert(object, crate::crd::CustomVersion::from_storage, |c| {
            c.from_storage
        })
    }

    /// Converts an object of this version to the stored version.
    pub fn to_storage(&self, object: Value) -> Value {
        self.convert(object, crate::crd::CustomVersion::to_storage, |c| {
            c.to_storage
        })
    }

    /// One direction of conversion: the CRD version's `custom` step for a
    /// custom resource, else the built-in `conversion`'s step, else none.
    fn convert(
        &self,
        object: Value,
        custom: fn(&crate::crd::CustomVersion, Value) -> Value,
        builtin: fn(&Conversion) -> fn(Value) -> Value,
    ) -> Value {
        if let Some(version) = &self.custom {
            return custom(version, object);
        }
        match &self.conversion {
            Some(conversion) => builtin(conversion)(object),
            None => object,
        }
    }
}

/// One API group with its versions, newest preferred first.
#[derive(Debug, Clone)]
pub(crate) struct GroupInfo {
    /// The group's name; empty for the core group.
    pub name: &'static str,
    /// The versions served.
    pub versions: Vec<&'static str>,
}

/// All served resources, looked up by group, version and plural name.
#[derive(Debug)]
pub(crate) struct Registry {
    resources: Vec<Arc<ResourceInfo>>,
    /// Keyed by the resource's own (static) names, so a lookup borrows the
    /// caller's strings instead of allocating a key: every request looks up
    /// several resources.
    by_gvr: HashMap<(&'static str, &'static str, &'static str), Arc<ResourceInfo>>,
    groups: Vec<GroupInfo>,
}

impl Registry {
    /// The built-in Kubernetes resources of k8s-openapi's v1.33 API.
    pub(crate) fn builtin() -> Self {
        Self::from_resources(builtin::resources().into_iter().map(Arc::new).collect())
    }

    /// A registry of exactly these resources, in this (discovery) order;
    /// a later entry with the group/version/resource of an earlier one is
    /// left out.
    pub(crate) fn from_resources(resources: Vec<Arc<ResourceInfo>>) -> Self {
        let mut by_gvr = HashMap::new();
        let mut groups: Vec<GroupInfo> = Vec::new();
        let mut kept = Vec::with_capacity(resources.len());
        for r in resources {
            let gvr = (r.group, r.version, r.resource);
            if by_gvr.contains_key(&gvr) {
                continue;
            }
            by_gvr.insert(gvr, r.clone());
            kept.push(r.clone());
            match groups.iter_mut().find(|g| g.name == r.group) {
                Some(g) if !g.versions.contains(&r.version) => g.versions.push(r.version),
                Some(_) => {}
                None => groups.push(GroupInfo {
                    name: r.group,
                    versions: vec![r.version],
                }),
            }
        }
        Self {
            resources: kept,
            by_gvr,
            groups,
        }
    }

    /// The resource served at `group/version/resource`, if any.
    pub(crate) fn get(
        &self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<Arc<ResourceInfo>> {
        // The map is covariant in its keys, so it can be read with keys that
        // live only as long as this call.
        let by_gvr: &HashMap<(&str, &str, &str), Arc<ResourceInfo>> = &self.by_gvr;
        by_gvr.get(&(group, version, resource)).cloned()
    }

    /// Every served resource, in discovery order.
    pub(crate) fn resources(&self) -> &[Arc<ResourceInfo>] {
        &self.resources
    }

    /// Resources of one group version, in discovery order.
    pub(crate) fn in_group_version<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
    ) -> impl Iterator<Item = &'a Arc<ResourceInfo>> {
        self.resources
            .iter()
            .filter(move |r| r.group == group && r.version == version)
    }

    /// Groups with their versions (the core group has the empty name).
    pub(crate) fn groups(&self) -> &[GroupInfo] {
        &self.groups
    }

    /// The distinct storage prefixes (one watch cache each) of the stored
    /// resources.
    pub(crate) fn storage_prefixes(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in self.resources.iter().filter(|r| !r.is_virtual()) {
            if !out.contains(&r.storage_prefix) {
                out.push(r.storage_prefix.clone());
            }
        }
        out
    }

    /// How the watch cache of `prefix` holds its objects: encoded only when
    /// every resource stored there asks for it.
    pub(crate) fn cache_form(&self, prefix: &str) -> crate::watch_cache::CacheForm {
        use crate::watch_cache::CacheForm;
        let mut stored_here = self
            .resources
            .iter()
            .filter(|r| !r.is_virtual() && r.storage_prefix == prefix)
            .peekable();
        if stored_here.peek().is_some()
            && stored_here.all(|r| r.strategy.cache_form() == CacheForm::Encoded)
        {
            CacheForm::Encoded
        } else {
            CacheForm::Decoded
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_registry_has_expected_shapes() {
        let reg = Registry::builtin();
        let pods = reg.get("", "v1", "pods").unwrap();
        assert!(pods.namespaced);
        assert_eq!(pods.kind, "Pod");
        assert_eq!(pods.short_names, &["po"]);
        assert!(pods.has(Subresource::Binding));
        let ns = reg.get("", "v1", "namespaces").unwrap();
        assert!(!ns.namespaced);
        assert_eq!(ns.key(None, "default"), "/registry/core/namespaces/default");
        let deploy = reg.get("apps", "v1", "deployments").unwrap();
        assert_eq!(deploy.key(Some("a"), "b"), "/registry/apps/deployments/a/b");
        assert_eq!(deploy.qualified(), "deployments.apps");
        let ev2 = reg.get("events.k8s.io", "v1", "events").unwrap();
        assert_eq!(ev2.storage_prefix, "/registry/core/events/");
        let sar = reg
            .get("authorization.k8s.io", "v1", "subjectaccessreviews")
            .unwrap();
        assert!(sar.is_virtual() && !sar.namespaced);
        assert_eq!(sar.verbs(), &["create"]);
        assert!(!reg.storage_prefixes().contains(&sar.storage_prefix));
        let lsar = reg
            .get("authorization.k8s.io", "v1", "localsubjectaccessreviews")
            .unwrap();
        assert!(lsar.is_virtual() && lsar.namespaced);
        assert!(!pods.is_virtual());
        assert_eq!(pods.verbs().len(), 8);
        let autoscaling = reg
            .groups()
            .iter()
            .find(|g| g.name == "autoscaling")
            .unwrap();
        assert_eq!(autoscaling.versions, vec!["v2", "v1"]);
    }
}
