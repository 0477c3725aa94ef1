//! Which protobuf message and which JSON shape belong to an apiVersion/kind.
//!
//! One line per kind pairs the k8s-pb message (to decode the bytes) with the
//! k8s-openapi type (to learn the JSON names); the apiVersion and kind come
//! from k8s-openapi's `Resource` constants so they cannot be mistyped.

use std::collections::HashMap;
use std::sync::OnceLock;

use k8s_openapi::Resource;
use serde::de::DeserializeOwned;

use super::schema::{Schemas, TraceError};

/// Decodes a message's bytes and returns its `Debug` dump.
type DumpFn = fn(&[u8]) -> Result<String, prost::DecodeError>;

/// A kind the decoder knows.
pub(super) struct KindEntry {
    /// Decodes the object's bytes into a dump to walk.
    pub dump: DumpFn,
    /// The kind's root type in [`Kinds::schemas`], or why it could not be traced.
    pub root: Result<usize, TraceError>,
}

/// Every kind with a protobuf form, and the JSON shapes they reach.
pub(super) struct Kinds {
    /// The traced JSON shapes.
    pub schemas: Schemas,
    /// For each type in `schemas`, whether it can hold a quantity.
    pub reaches_quantity: Vec<bool>,
    by_kind: HashMap<String, KindEntry>,
}

/// The kind used for option bodies that may arrive under any group version.
const DELETE_OPTIONS: &str = "DeleteOptions";

impl Kinds {
    /// The table, built on first use.
    pub(super) fn get() -> &'static Kinds {
        static KINDS: OnceLock<Kinds> = OnceLock::new();
        KINDS.get_or_init(build)
    }

    /// The entry for `apiVersion`/`kind`, if the decoder knows it.
    pub(super) fn entry(&self, api_version: &str, kind: &str) -> Option<&KindEntry> {
        let version = if kind == DELETE_OPTIONS {
            ""
        } else {
            api_version
        };
        self.by_kind.get(&key(version, kind))
    }
}

fn key(api_version: &str, kind: &str) -> String {
    format!("{api_version} {kind}")
}

fn dump<M: prost::Message + Default + std::fmt::Debug>(
    bytes: &[u8],
) -> Result<String, prost::DecodeError> {
    M::decode(bytes).map(|m| format!("{m:?}"))
}

struct Builder {
    schemas: Schemas,
    by_kind: HashMap<String, KindEntry>,
}

impl Builder {
    fn add<Pb, Json>(&mut self)
    where
        Pb: prost::Message + Default + std::fmt::Debug,
        Json: Resource + DeserializeOwned,
    {
        self.add_as::<Pb, Json>(Json::API_VERSION, Json::KIND);
    }

    fn add_as<Pb, Json>(&mut self, api_version: &'static str, kind: &'static str)
    where
        Pb: prost::Message + Default + std::fmt::Debug,
        Json: DeserializeOwned,
    {
        let root = self.schemas.trace::<Json>();
        self.by_kind.insert(
            key(api_version, kind),
            KindEntry {
                dump: dump::<Pb>,
                root,
            },
        );
    }
}

fn build() -> Kinds {
    use k8s_openapi::api as oa;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as oa_crd;
    use k8s_pb::api as pb;
    use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as pb_crd;

    let mut b = Builder {
        schemas: Schemas::default(),
        by_kind: HashMap::new(),
    };
    // Every built-in resource the registry serves...
    b.add::<pb::core::v1::ConfigMap, oa::core::v1::ConfigMap>();
    b.add::<pb::core::v1::Endpoints, oa::core::v1::Endpoints>();
    b.add::<pb::core::v1::Event, oa::core::v1::Event>();
    b.add::<pb::core::v1::LimitRange, oa::core::v1::LimitRange>();
    b.add::<pb::core::v1::Namespace, oa::core::v1::Namespace>();
    b.add::<pb::core::v1::Node, oa::core::v1::Node>();
    b.add::<pb::core::v1::PersistentVolumeClaim, oa::core::v1::PersistentVolumeClaim>();
    b.add::<pb::core::v1::PersistentVolume, oa::core::v1::PersistentVolume>();
    b.add::<pb::core::v1::Pod, oa::core::v1::Pod>();
    b.add::<pb::core::v1::PodTemplate, oa::core::v1::PodTemplate>();
    b.add::<pb::core::v1::ReplicationController, oa::core::v1::ReplicationController>();
    b.add::<pb::core::v1::ResourceQuota, oa::core::v1::ResourceQuota>();
    b.add::<pb::core::v1::Secret, oa::core::v1::Secret>();
    b.add::<pb::core::v1::ServiceAccount, oa::core::v1::ServiceAccount>();
    b.add::<pb::core::v1::Service, oa::core::v1::Service>();
    b.add::<pb::apps::v1::ControllerRevision, oa::apps::v1::ControllerRevision>();
    b.add::<pb::apps::v1::DaemonSet, oa::apps::v1::DaemonSet>();
    b.add::<pb::apps::v1::Deployment, oa::apps::v1::Deployment>();
    b.add::<pb::apps::v1::ReplicaSet, oa::apps::v1::ReplicaSet>();
    b.add::<pb::apps::v1::StatefulSet, oa::apps::v1::StatefulSet>();
    b.add::<pb::events::v1::Event, oa::events::v1::Event>();
    b.add::<pb::autoscaling::v2::HorizontalPodAutoscaler, oa::autoscaling::v2::HorizontalPodAutoscaler>();
    b.add::<pb::autoscaling::v1::HorizontalPodAutoscaler, oa::autoscaling::v1::HorizontalPodAutoscaler>();
    b.add::<pb::batch::v1::CronJob, oa::batch::v1::CronJob>();
    b.add::<pb::batch::v1::Job, oa::batch::v1::Job>();
    b.add::<pb::certificates::v1::CertificateSigningRequest, oa::certificates::v1::CertificateSigningRequest>();
    b.add::<pb::networking::v1::IngressClass, oa::networking::v1::IngressClass>();
    b.add::<pb::networking::v1::Ingress, oa::networking::v1::Ingress>();
    b.add::<pb::networking::v1::IPAddress, oa::networking::v1::IPAddress>();
    b.add::<pb::networking::v1::NetworkPolicy, oa::networking::v1::NetworkPolicy>();
    b.add::<pb::networking::v1::ServiceCIDR, oa::networking::v1::ServiceCIDR>();
    b.add::<pb::policy::v1::PodDisruptionBudget, oa::policy::v1::PodDisruptionBudget>();
    b.add::<pb::rbac::v1::ClusterRoleBinding, oa::rbac::v1::ClusterRoleBinding>();
    b.add::<pb::rbac::v1::ClusterRole, oa::rbac::v1::ClusterRole>();
    b.add::<pb::rbac::v1::RoleBinding, oa::rbac::v1::RoleBinding>();
    b.add::<pb::rbac::v1::Role, oa::rbac::v1::Role>();
    b.add::<pb::storage::v1::CSIDriver, oa::storage::v1::CSIDriver>();
    b.add::<pb::storage::v1::CSINode, oa::storage::v1::CSINode>();
    b.add::<pb::storage::v1::CSIStorageCapacity, oa::storage::v1::CSIStorageCapacity>();
    b.add::<pb::storage::v1::StorageClass, oa::storage::v1::StorageClass>();
    b.add::<pb::storage::v1::VolumeAttachment, oa::storage::v1::VolumeAttachment>();
    b.add::<pb::admissionregistration::v1::MutatingWebhookConfiguration, oa::admissionregistration::v1::MutatingWebhookConfiguration>();
    b.add::<pb::admissionregistration::v1::ValidatingWebhookConfiguration, oa::admissionregistration::v1::ValidatingWebhookConfiguration>();
    b.add::<pb::admissionregistration::v1::ValidatingAdmissionPolicy, oa::admissionregistration::v1::ValidatingAdmissionPolicy>();
    b.add::<pb::admissionregistration::v1::ValidatingAdmissionPolicyBinding, oa::admissionregistration::v1::ValidatingAdmissionPolicyBinding>();
    b.add::<pb_crd::CustomResourceDefinition, oa_crd::CustomResourceDefinition>();
    b.add::<
        k8s_pb::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
        k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
    >();
    b.add::<pb::scheduling::v1::PriorityClass, oa::scheduling::v1::PriorityClass>();
    b.add::<pb::node::v1::RuntimeClass, oa::node::v1::RuntimeClass>();
    b.add::<pb::coordination::v1::Lease, oa::coordination::v1::Lease>();
    b.add::<pb::discovery::v1::EndpointSlice, oa::discovery::v1::EndpointSlice>();
    b.add::<pb::flowcontrol::v1::FlowSchema, oa::flowcontrol::v1::FlowSchema>();
    b.add::<pb::flowcontrol::v1::PriorityLevelConfiguration, oa::flowcontrol::v1::PriorityLevelConfiguration>();
    // ...and the bodies posted to their subresources and review endpoints.
    b.add::<pb::core::v1::Binding, oa::core::v1::Binding>();
    b.add::<pb::policy::v1::Eviction, oa::policy::v1::Eviction>();
    b.add::<pb::autoscaling::v1::Scale, oa::autoscaling::v1::Scale>();
    b.add::<pb::authentication::v1::TokenRequest, oa::authentication::v1::TokenRequest>();
    b.add::<pb::authentication::v1::TokenReview, oa::authentication::v1::TokenReview>();
    b.add::<pb::authentication::v1::SelfSubjectReview, oa::authentication::v1::SelfSubjectReview>();
    b.add::<pb::authorization::v1::SubjectAccessReview, oa::authorization::v1::SubjectAccessReview>();
    b.add::<pb::authorization::v1::SelfSubjectAccessReview, oa::authorization::v1::SelfSubjectAccessReview>();
    b.add::<pb::authorization::v1::SelfSubjectRulesReview, oa::authorization::v1::SelfSubjectRulesReview>();
    b.add::<pb::authorization::v1::LocalSubjectAccessReview, oa::authorization::v1::LocalSubjectAccessReview>();
    b.add_as::<
        k8s_pb::apimachinery::pkg::apis::meta::v1::DeleteOptions,
        k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions,
    >("", DELETE_OPTIONS);
    Kinds {
        reaches_quantity: super::quantities::reachable(&b.schemas),
        schemas: b.schemas,
        by_kind: b.by_kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_traces() {
        let kinds = Kinds::get();
        for (key, entry) in &kinds.by_kind {
            if let Err(e) = &entry.root {
                panic!("{key:?}: {e}");
            }
        }
    }

    #[test]
    fn every_served_resource_has_a_protobuf_form() {
        let kinds = Kinds::get();
        // The resource metrics and component statuses are read-only: no
        // body is ever sent to them.
        let writable = crate::registry::Registry::builtin().resources().to_vec();
        for info in writable
            .iter()
            .filter(|i| i.metrics.is_none() && !i.component_statuses)
        {
            let api_version = if info.group.is_empty() {
                info.version.to_string()
            } else {
                format!("{}/{}", info.group, info.version)
            };
            assert!(
                kinds.entry(&api_version, info.kind).is_some(),
                "{api_version} {} has no protobuf decoder",
                info.kind
            );
        }
    }

    #[test]
    fn delete_options_match_any_group_version() {
        let kinds = Kinds::get();
        assert!(kinds.entry("v1", "DeleteOptions").is_some());
        assert!(kinds.entry("apps/v1", "DeleteOptions").is_some());
        assert!(kinds.entry("v1", "Nope").is_none());
    }
}
