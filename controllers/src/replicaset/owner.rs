//! ReplicaSets and ReplicationControllers seen through one interface: the
//! controller logic is the same for both, only field shapes differ.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{PodTemplateSpec, ReplicationController};
use k8s_openapi::serde::Serialize;
use k8s_openapi::serde::de::DeserializeOwned;
use kube::Resource;
use kube::core::Selector;
use serde_json::Value;

use crate::controller_utils::workload_selector;

/// A workload that keeps `desired()` copies of a pod template running.
pub(crate) trait ReplicaOwner:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + Serialize
    + Debug
    + Send
    + Sync
    + 'static
{
    /// The controller name in events and logs.
    const CONTROLLER: &'static str;
    /// spec.replicas (1 when unset, as the API defaults it).
    fn desired(&self) -> i32;
    /// Which pods it owns; None when the selector is missing or invalid.
    fn pod_selector(&self) -> Option<Selector>;
    /// The template new pods are made from.
    fn pod_template(&self) -> Option<&PodTemplateSpec>;
    /// spec.minReadySeconds.
    fn min_ready_seconds(&self) -> i32;
    /// The current status as JSON (Null when unset).
    fn status_json(&self) -> Value;
}

/// The methods that read fields both kinds name alike (`spec.replicas`,
/// `spec.template`, `spec.minReadySeconds`, `status`), written once for both impls.
macro_rules! same_named_fields {
    () => {
        fn desired(&self) -> i32 {
            self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
        }

        fn pod_template(&self) -> Option<&PodTemplateSpec> {
            self.spec.as_ref()?.template.as_ref()
        }

        fn min_ready_seconds(&self) -> i32 {
            self.spec
                .as_ref()
                .and_then(|s| s.min_ready_seconds)
                .unwrap_or(0)
        }

        fn status_json(&self) -> Value {
            serde_json::to_value(&self.status).unwrap_or(Value::Null)
        }
    };
}

impl ReplicaOwner for ReplicaSet {
    const CONTROLLER: &'static str = "replicaset-controller";

    fn pod_selector(&self) -> Option<Selector> {
        workload_selector(self.spec.as_ref().map(|s| &s.selector))
    }

    same_named_fields!();
}

impl ReplicaOwner for ReplicationController {
    const CONTROLLER: &'static str = "replication-controller";

    fn pod_selector(&self) -> Option<Selector> {
        // An RC without a selector selects its template's labels (the API
        // defaults it so upstream).
        let spec = self.spec.as_ref()?;
        let map = match &spec.selector {
            Some(s) if !s.is_empty() => s.clone(),
            _ => spec.template.as_ref()?.metadata.as_ref()?.labels.clone()?,
        };
        (!map.is_empty()).then(|| map.into_iter().collect())
    }

    same_named_fields!();
}
