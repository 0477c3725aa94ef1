//! Plugin registry: names to constructors, plus the services constructors may use.

use std::collections::HashMap;
use std::sync::Arc;

use super::config::ConfigError;
use super::interface::Plugin;
use crate::binding::{Binder, ClaimAnnotator, NoClaimAnnotator};
use crate::listers::{MemoryListers, NamespaceLister, PdbLister, VolumeLister, WorkloadLister};

/// Shared services handed to plugin constructors.
#[derive(Clone)]
pub struct Services {
    /// Volume objects.
    pub volumes: Arc<dyn VolumeLister>,
    /// Disruption budgets.
    pub pdbs: Arc<dyn PdbLister>,
    /// Namespace labels.
    pub namespaces: Arc<dyn NamespaceLister>,
    /// Performs `pods/binding`.
    pub binder: Arc<dyn Binder>,
    /// Annotates `WaitForFirstConsumer` claims with the chosen node.
    pub claims: Arc<dyn ClaimAnnotator>,
    /// Service and controller selectors (default spreading constraints).
    pub workloads: Arc<dyn WorkloadLister>,
}

impl Services {
    /// Services backed by one in-memory lister set and the given binder.
    pub fn in_memory(listers: Arc<MemoryListers>, binder: Arc<dyn Binder>) -> Self {
        Services {
            volumes: listers.clone(),
            pdbs: listers.clone(),
            namespaces: listers.clone(),
            workloads: listers,
            binder,
            claims: Arc::new(NoClaimAnnotator),
        }
    }
}

/// Constructor of a plugin from its JSON args.
pub type PluginFactory =
    fn(args: &serde_json::Value, services: &Services) -> Result<Arc<dyn Plugin>, ConfigError>;

/// Name → constructor.
#[derive(Clone, Default)]
pub struct Registry {
    factories: HashMap<&'static str, PluginFactory>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a plugin (replacing one of the same name).
    pub fn register(&mut self, name: &'static str, factory: PluginFactory) {
        self.factories.insert(name, factory);
    }

    /// The constructor for `name`.
    pub fn get(&self, name: &str) -> Option<PluginFactory> {
        self.factories.get(name).copied()
    }
}

/// Deserializes plugin args, treating `null` as defaults.
pub fn parse_args<T: serde::de::DeserializeOwned + Default>(
    plugin: &str,
    args: &serde_json::Value,
) -> Result<T, ConfigError> {
    if args.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(args.clone()).map_err(|e| ConfigError::InvalidArgs {
        plugin: plugin.to_string(),
        message: e.to_string(),
    })
}
