//! Which resources the API serves, as the namespace controller and the
//! garbage collector need them: by scope and verbs, and by group and kind.

use std::collections::HashMap;

use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Discovery, Scope, verbs};

/// Events are never owners or dependents worth tracking, and are the
/// highest-volume resource: upstream's collector ignores them too.
const IGNORED: &[(&str, &str)] = &[("", "events"), ("events.k8s.io", "events")];

/// A snapshot of the API's resources at their preferred versions.
#[derive(Clone, Default)]
pub struct ApiResources {
    preferred: Vec<(ApiResource, ApiCapabilities)>,
    discovery: Option<std::sync::Arc<Discovery>>,
}

impl ApiResources {
    /// Asks the API (legacy discovery: `/api`, `/apis` and each group version).
    pub async fn discover(client: &kube::Client) -> Result<Self, kube::Error> {
        let discovery = Discovery::new(client.clone()).run().await?;
        let preferred = discovery
            .groups()
            .flat_map(|g| g.recommended_resources())
            .collect();
        Ok(Self {
            preferred,
            discovery: Some(std::sync::Arc::new(discovery)),
        })
    }

    /// Every resource at its preferred version.
    pub fn all(&self) -> impl Iterator<Item = &(ApiResource, ApiCapabilities)> {
        self.preferred.iter()
    }

    /// Namespaced resources a namespace's content can be listed and deleted through.
    pub fn namespaced_deletable(&self) -> Vec<(ApiResource, ApiCapabilities)> {
        self.preferred
            .iter()
            .filter(|(_, caps)| {
                caps.scope == Scope::Namespaced
                    && caps.supports_operation(verbs::LIST)
                    && caps.supports_operation(verbs::DELETE)
            })
            .cloned()
            .collect()
    }

    /// Resources the garbage collector watches: listable, watchable,
    /// deletable, and not events.
    pub fn collectable(&self) -> Vec<(ApiResource, ApiCapabilities)> {
        self.preferred
            .iter()
            .filter(|(ar, caps)| {
                !IGNORED.contains(&(ar.group.as_str(), ar.plural.as_str()))
                    && caps.supports_operation(verbs::LIST)
                    && caps.supports_operation(verbs::WATCH)
                    && caps.supports_operation(verbs::DELETE)
            })
            .cloned()
            .collect()
    }

    /// The resource of `kind` in `api_version` (an owner reference's type):
    /// that exact version if served, else the group's preferred one.
    pub fn resolve(&self, api_version: &str, kind: &str) -> Option<(ApiResource, ApiCapabilities)> {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let discovery = self.discovery.as_ref()?;
        let gvk = GroupVersionKind::gvk(group, version, kind);
        discovery
            .resolve_gvk(&gvk)
            .or_else(|| discovery.get(group)?.recommended_kind(kind))
    }

    /// Preferred resources keyed by (group, plural).
    pub fn by_group_resource(&self) -> HashMap<(String, String), ApiResource> {
        self.preferred
            .iter()
            .map(|(ar, _)| ((ar.group.clone(), ar.plural.clone()), ar.clone()))
            .collect()
    }
}

/// `plural` for the core group, `plural.group` otherwise (upstream's
/// GroupResource string, used in namespace conditions).
pub fn group_resource(ar: &ApiResource) -> String {
    if ar.group.is_empty() {
        ar.plural.clone()
    } else {
        format!("{}.{}", ar.plural, ar.group)
    }
}
