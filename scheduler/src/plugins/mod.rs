//! The in-tree plugins, one module each, and the registry of their constructors.

pub(crate) mod balanced_allocation;
pub(crate) mod default_binder;
pub(crate) mod helpers;
pub(crate) mod image_locality;
pub(crate) mod inter_pod_affinity;
pub(crate) mod node_affinity;
pub(crate) mod node_name;
pub(crate) mod node_ports;
pub(crate) mod node_resources_fit;
pub(crate) mod node_unschedulable;
pub(crate) mod pod_topology_spread;
pub(crate) mod taint_toleration;
pub(crate) mod volume_binding;

use std::sync::Arc;

use crate::framework::{ConfigError, Plugin, Registry, Services};

/// The `impl Plugin` of an in-tree plugin: its name, the cluster events that may make
/// a pod it rejected schedulable (if any), and then its other `Plugin` items (views,
/// queueing hint) as written. Plugins differ only in those, so each states only those.
macro_rules! impl_plugin {
    (
        $plugin:ident = $name:expr;
        events: [$($event:expr),+ $(,)?];
        $($item:tt)*
    ) => {
        $crate::plugins::impl_plugin! {
            $plugin = $name;
            fn events_to_register(&self) -> Vec<$crate::framework::ClusterEvent> {
                vec![$($event),+]
            }
            $($item)*
        }
    };
    ($plugin:ident = $name:expr; $($item:tt)*) => {
        impl $crate::framework::Plugin for $plugin {
            fn name(&self) -> &'static str {
                $name
            }
            $($item)*
        }
    };
}
pub(crate) use impl_plugin;

/// Declares an in-tree plugin that holds no state: its unit struct (what the registry
/// builds by `Default`), and its `impl Plugin` as [`impl_plugin!`] writes it.
macro_rules! stateless_plugin {
    (
        $(#[$doc:meta])*
        $plugin:ident = $name:expr;
        $($rest:tt)*
    ) => {
        $(#[$doc])*
        #[derive(Default)]
        pub(crate) struct $plugin;

        $crate::plugins::impl_plugin! {
            $plugin = $name;
            $($rest)*
        }
    };
}
pub(crate) use stateless_plugin;

/// The constructor of a plugin that takes no arguments and holds no state.
fn stateless<P: Plugin + Default + 'static>(
    _args: &serde_json::Value,
    _s: &Services,
) -> Result<Arc<dyn Plugin>, ConfigError> {
    Ok(Arc::new(P::default()))
}

/// A registry with every in-tree plugin, including DefaultPreemption.
pub fn in_tree_registry() -> Registry {
    let mut r = Registry::new();
    r.register(
        node_unschedulable::NAME,
        stateless::<node_unschedulable::NodeUnschedulable>,
    );
    r.register(node_name::NAME, stateless::<node_name::NodeName>);
    r.register(
        taint_toleration::NAME,
        stateless::<taint_toleration::TaintToleration>,
    );
    r.register(
        node_affinity::NAME,
        stateless::<node_affinity::NodeAffinity>,
    );
    r.register(node_ports::NAME, stateless::<node_ports::NodePorts>);
    r.register(node_resources_fit::NAME, node_resources_fit::new);
    r.register(volume_binding::NAME, volume_binding::new);
    r.register(pod_topology_spread::NAME, pod_topology_spread::new);
    r.register(inter_pod_affinity::NAME, inter_pod_affinity::new);
    r.register(balanced_allocation::NAME, balanced_allocation::new);
    r.register(
        image_locality::NAME,
        stateless::<image_locality::ImageLocality>,
    );
    r.register(default_binder::NAME, default_binder::new);
    r.register(crate::preemption::NAME, crate::preemption::new);
    r
}
