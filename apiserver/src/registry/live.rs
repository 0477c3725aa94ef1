//! The registry the server consults on every request: the built-in
//! resources plus those of the established CRDs, replaced as a whole when a
//! CRD changes so a request always sees one consistent set.

use std::sync::Arc;

use parking_lot::RwLock;

use super::{Registry, ResourceInfo};

/// Built-in resources and the currently served custom ones.
#[derive(Debug)]
pub(crate) struct LiveRegistry {
    builtin: Vec<Arc<ResourceInfo>>,
    current: RwLock<Arc<Registry>>,
}

impl LiveRegistry {
    /// Serves the built-in resources only.
    pub(crate) fn new() -> Self {
        let builtin = Registry::builtin();
        let resources = builtin.resources().to_vec();
        Self {
            builtin: resources,
            current: RwLock::new(Arc::new(builtin)),
        }
    }

    /// The registry as it is now; later CRD changes do not alter it.
    pub(crate) fn current(&self) -> Arc<Registry> {
        self.current.read().clone()
    }

    /// One served resource.
    pub(crate) fn get(
        &self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<Arc<ResourceInfo>> {
        self.current.read().get(group, version, resource)
    }

    /// Serves exactly these custom resources (in discovery order) next to the
    /// built-in ones. A custom entry cannot shadow a built-in resource.
    /// Returns whether what is served changed (documents built from the
    /// registry, such as OpenAPI, are then stale).
    pub(crate) fn set_custom(&self, custom: Vec<ResourceInfo>) -> bool {
        let mut all = self.builtin.clone();
        all.extend(custom.into_iter().map(Arc::new));
        let next = Registry::from_resources(all);
        let mut current = self.current.write();
        let changed = custom_signature(&current) != custom_signature(&next);
        *current = Arc::new(next);
        changed
    }
}

/// What a registry serves beyond the built-ins, in a comparable form.
fn custom_signature(registry: &Registry) -> Vec<String> {
    registry
        .resources()
        .iter()
        .filter(|info| info.custom.is_some())
        .map(|info| format!("{info:?}"))
        .collect()
}

impl Default for LiveRegistry {
    fn default() -> Self {
        Self::new()
    }
}
