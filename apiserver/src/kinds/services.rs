//! Services: defaults, a DNS-1035 name, cluster IPs and node ports allocated
//! from the server's pools (and kept across updates that omit them).

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{InitialStatus, KindStrategy, default_object, set_default};
use crate::kinds::Written;
use crate::registry::ResourceInfo;
use crate::server::Inner;
use crate::service_alloc::AllocationGuard;
use crate::status::{ApiError, FieldError};
use crate::validation::NameRule;

/// The `services` resource.
#[derive(Debug)]
pub(crate) struct Services;

#[async_trait]
impl KindStrategy for Services {
    fn name_rule(&self) -> NameRule {
        NameRule::Dns1035
    }

    /// Upstream's ServiceStatus always serializes its load balancer, empty
    /// until the service LB controller fills it.
    fn initial_status(&self) -> InitialStatus {
        InitialStatus::Empty(|| json!({ "loadBalancer": {} }))
    }

    fn apply_spec_defaults(&self, _info: &ResourceInfo, spec: &mut Value) {
        set_default(spec, "type", json!("ClusterIP"));
        set_default(spec, "sessionAffinity", json!("None"));
        let kind = spec["type"].as_str().unwrap_or_default().to_owned();
        if kind != "ExternalName" {
            set_default(spec, "internalTrafficPolicy", json!("Cluster"));
        }
        if kind == "NodePort" || kind == "LoadBalancer" {
            set_default(spec, "externalTrafficPolicy", json!("Cluster"));
        }
        if kind == "LoadBalancer" {
            set_default(spec, "allocateLoadBalancerNodePorts", json!(true));
        }
        if spec["sessionAffinity"] == "ClientIP"
            && let Some(config) = default_object(spec, "sessionAffinityConfig")
            && let Some(client) = default_object(config, "clientIP")
        {
            // Three hours, upstream's sticky-session default.
            set_default(client, "timeoutSeconds", json!(10800));
        }
        if let Some(ports) = spec["ports"].as_array_mut() {
            for p in ports {
                set_default(p, "protocol", json!("TCP"));
                let port = p["port"].clone();
                set_default(p, "targetPort", port);
            }
        }
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written { object, old, .. } = *written;
        crate::validation::workloads::service(object, old, errors);
    }

    fn carry_on_update(&self, old: &Value, new: &mut Value) {
        crate::service_alloc::keep_allocations(old, new);
    }

    /// A new Service, or one that became NodePort (or lost its address),
    /// gets what it lacks, given every other stored Service, and claims it
    /// in the store so no other API server hands out the same.
    async fn allocate<'i>(
        &self,
        inner: &'i Inner,
        info: &ResourceInfo,
        key: &str,
        object: &mut Value,
    ) -> Result<Option<AllocationGuard<'i>>, ApiError> {
        crate::service_alloc::claim_for(inner, info, key, object)
            .await
            .map(Some)
    }

    /// Its addresses and ports are free again at once (the services watch
    /// would free them too, a moment later).
    async fn deleted(&self, inner: &Inner, last: &Value) {
        crate::service_alloc::repair::release_held(inner.store.as_ref(), last).await;
    }
}
