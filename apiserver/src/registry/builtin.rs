//! The built-in resources and what upstream discovery says about each.

use k8s_openapi::api::{
    admissionregistration, apps, authentication, authorization, autoscaling, batch, certificates,
    coordination, core, discovery, events, flowcontrol, networking, node, policy, rbac, scheduling,
    storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::conversion;
use super::{ResourceInfo, Subresource};
use crate::kinds::{self, KindStrategy};
use crate::resource_metrics::MetricsResource;
use crate::reviews::Review;
use crate::table::{self, Printer};

/// Maps a k8s-openapi scope marker to "is namespaced".
trait ScopeFlag {
    const NAMESPACED: bool;
}
impl ScopeFlag for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}
impl ScopeFlag for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

fn roundtrip<T: Resource + Serialize + DeserializeOwned>(value: &Value) -> Result<Value, String> {
    // Deserialising from the borrowed value spares a deep copy of the object.
    let typed: T = crate::decode_errors::decode(value)?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

const ALL: &[&str] = &["all"];

/// Starts a registry entry from a k8s-openapi type.
fn of<T>() -> ResourceInfo
where
    T: Resource + Serialize + DeserializeOwned,
    T::Scope: ScopeFlag,
{
    entry(
        T::GROUP,
        T::VERSION,
        T::URL_PATH_SEGMENT,
        T::KIND,
        <T::Scope as ScopeFlag>::NAMESPACED,
        roundtrip::<T>,
    )
}

/// A plain registry entry, stored under `/registry/<group|core>/<resource>/`.
fn entry(
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
    roundtrip: super::TypedRoundTrip,
) -> ResourceInfo {
    let group_segment = if group.is_empty() { "core" } else { group };
    ResourceInfo {
        group,
        version,
        resource,
        kind,
        namespaced,
        short_names: &[],
        categories: &[],
        subresources: Vec::new(),
        tracks_generation: false,
        field_labels: &[],
        create_on_update: false,
        storage_prefix: format!("/registry/{group_segment}/{resource}/"),
        conversion: None,
        roundtrip,
        custom: None,
        strategy: &kinds::PLAIN,
        printer: &table::core::DEFAULT,
        review: None,
        metrics: None,
        component_statuses: false,
        legacy_binding: false,
    }
}

/// An object without a k8s-openapi type is kept as it is.
fn untyped(value: &Value) -> Result<Value, String> {
    Ok(value.clone())
}

/// A `metrics.k8s.io/v1beta1` resource: read-only, computed from the
/// nodes' figures, never stored.
fn resource_metrics(
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
    which: MetricsResource,
    printer: &'static Printer,
) -> ResourceInfo {
    ResourceInfo {
        printer,
        metrics: Some(which),
        ..entry(
            "metrics.k8s.io",
            "v1beta1",
            resource,
            kind,
            namespaced,
            untyped,
        )
    }
}

impl ResourceInfo {
    fn short(mut self, names: &'static [&'static str]) -> Self {
        self.short_names = names;
        self
    }
    fn cats(mut self, categories: &'static [&'static str]) -> Self {
        self.categories = categories;
        self
    }
    fn subs(mut self, subs: &[Subresource]) -> Self {
        self.subresources = subs.to_vec();
        self
    }
    fn generation(mut self) -> Self {
        self.tracks_generation = true;
        self
    }
    fn fields(mut self, labels: &'static [&'static str]) -> Self {
        self.field_labels = labels;
        self
    }
    fn component_statuses(mut self) -> Self {
        self.component_statuses = true;
        self
    }
    fn legacy_binding(mut self) -> Self {
        self.legacy_binding = true;
        self
    }
    fn create_on_update(mut self) -> Self {
        self.create_on_update = true;
        self
    }
    /// The kind's rules, where they differ from the plain default.
    fn strategy(mut self, strategy: &'static dyn KindStrategy) -> Self {
        self.strategy = strategy;
        self
    }
    /// The Table columns, where they differ from NAME and AGE.
    fn printer(mut self, printer: &'static Printer) -> Self {
        self.printer = printer;
        self
    }
    /// A create-only resource answered by `review` and never stored.
    fn virtual_review(mut self, review: Review) -> Self {
        self.review = Some(review);
        self
    }
    fn stored_as(mut self, prefix: &str, conversion: conversion::Conversion) -> Self {
        self.storage_prefix = prefix.to_string();
        self.conversion = Some(conversion);
        self
    }
}

const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];
const CORE_EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];
const EVENTS_V1_FIELDS: &[&str] = &[
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingController",
    "type",
];

/// HorizontalPodAutoscalers in the version `T` is of: both versions are
/// one resource, described alike.
fn horizontal_pod_autoscalers<T>() -> ResourceInfo
where
    T: Resource + Serialize + DeserializeOwned,
    T::Scope: ScopeFlag,
{
    of::<T>()
        .short(&["hpa"])
        .cats(ALL)
        .subs(&[Subresource::Status])
        .generation()
        .strategy(&kinds::HorizontalPodAutoscalers)
        .printer(&table::autoscaling::HORIZONTALPODAUTOSCALERS)
}

/// Every built-in resource in discovery order (groups in upstream's order).
pub(super) fn resources() -> Vec<ResourceInfo> {
    use Subresource::*;
    vec![
        // core/v1
        of::<core::v1::Binding>().legacy_binding(),
        of::<core::v1::ComponentStatus>()
            .short(&["cs"])
            .component_statuses()
            .printer(&table::core::COMPONENT_STATUSES),
        of::<core::v1::ConfigMap>()
            .short(&["cm"])
            .strategy(&kinds::ConfigMaps)
            .printer(&table::core::CONFIGMAPS),
        of::<core::v1::Endpoints>()
            .short(&["ep"])
            .create_on_update()
            .strategy(&kinds::Endpoints)
            .printer(&table::core::ENDPOINTS),
        of::<core::v1::Event>()
            .short(&["ev"])
            .fields(CORE_EVENT_FIELDS)
            .create_on_update()
            .strategy(&kinds::Events)
            .printer(&table::core::EVENTS),
        of::<core::v1::LimitRange>()
            .short(&["limits"])
            .create_on_update()
            .strategy(&kinds::LimitRanges)
            .printer(&table::core::CREATED_AT),
        of::<core::v1::Namespace>()
            .short(&["ns"])
            .subs(&[Finalize, Status])
            .fields(&["status.phase"])
            .strategy(&kinds::Namespaces)
            .printer(&table::core::NAMESPACES),
        of::<core::v1::Node>()
            .short(&["no"])
            .subs(&[Proxy, Status])
            .fields(&["spec.unschedulable"])
            .strategy(&kinds::Nodes)
            .printer(&table::core::NODES),
        of::<core::v1::PersistentVolumeClaim>()
            .short(&["pvc"])
            .subs(&[Status])
            .strategy(&kinds::PersistentVolumeClaims)
            .printer(&table::core::PERSISTENTVOLUMECLAIMS),
        of::<core::v1::PersistentVolume>()
            .short(&["pv"])
            .subs(&[Status])
            .strategy(&kinds::PersistentVolumes)
            .printer(&table::core::PERSISTENTVOLUMES),
        of::<core::v1::Pod>()
            .short(&["po"])
            .cats(ALL)
            .subs(&[
                Attach,
                Binding,
                EphemeralContainers,
                Eviction,
                Exec,
                Log,
                PortForward,
                Proxy,
                Resize,
                Status,
            ])
            .fields(POD_FIELDS)
            .strategy(&kinds::Pods)
            .printer(&table::pods::PODS),
        of::<core::v1::PodTemplate>()
            .strategy(&kinds::PodTemplates)
            .printer(&table::workloads::PODTEMPLATES),
        of::<core::v1::ReplicationController>()
            .short(&["rc"])
            .cats(ALL)
            .subs(&[Scale, Status])
            .generation()
            .fields(&["status.replicas"])
            .strategy(&kinds::ReplicationControllers)
            .printer(&table::workloads::REPLICATIONCONTROLLERS),
        of::<core::v1::ResourceQuota>()
            .short(&["quota"])
            .subs(&[Status])
            .strategy(&kinds::ResourceQuotas)
            .printer(&table::core::RESOURCEQUOTAS),
        of::<core::v1::Secret>()
            .fields(&["type"])
            .strategy(&kinds::Secrets)
            .printer(&table::core::SECRETS),
        of::<core::v1::ServiceAccount>()
            .short(&["sa"])
            .subs(&[Token])
            .strategy(&kinds::ServiceAccounts)
            .printer(&table::core::SERVICEACCOUNTS),
        of::<core::v1::Service>()
            .short(&["svc"])
            .cats(ALL)
            .subs(&[Proxy, Status])
            .fields(&["spec.clusterIP", "spec.type"])
            .strategy(&kinds::Services)
            .printer(&table::core::SERVICES),
        // apps/v1
        of::<apps::v1::ControllerRevision>().printer(&table::workloads::CONTROLLERREVISIONS),
        of::<apps::v1::DaemonSet>()
            .short(&["ds"])
            .cats(ALL)
            .subs(&[Status])
            .generation()
            .strategy(&kinds::DAEMON_SETS)
            .printer(&table::workloads::DAEMONSETS),
        of::<apps::v1::Deployment>()
            .short(&["deploy"])
            .cats(ALL)
            .subs(&[Scale, Status])
            .generation()
            .strategy(&kinds::DEPLOYMENTS)
            .printer(&table::workloads::DEPLOYMENTS),
        of::<apps::v1::ReplicaSet>()
            .short(&["rs"])
            .cats(ALL)
            .subs(&[Scale, Status])
            .generation()
            .fields(&["status.replicas"])
            .strategy(&kinds::REPLICA_SETS)
            .printer(&table::workloads::REPLICASETS),
        of::<apps::v1::StatefulSet>()
            .short(&["sts"])
            .cats(ALL)
            .subs(&[Scale, Status])
            .generation()
            .strategy(&kinds::STATEFUL_SETS)
            .printer(&table::workloads::STATEFULSETS),
        // events.k8s.io/v1 shares storage with core/v1 events
        of::<events::v1::Event>()
            .short(&["ev"])
            .fields(EVENTS_V1_FIELDS)
            .create_on_update()
            .strategy(&kinds::Events)
            .printer(&table::core::EVENTS_V1)
            .stored_as("/registry/core/events/", conversion::EVENTS_V1),
        // authentication.k8s.io/v1 and authorization.k8s.io/v1: reviews,
        // answered and never stored
        of::<authentication::v1::SelfSubjectReview>().virtual_review(Review::SelfSubject),
        of::<authentication::v1::TokenReview>().virtual_review(Review::Token),
        of::<authorization::v1::LocalSubjectAccessReview>()
            .virtual_review(Review::LocalSubjectAccess),
        of::<authorization::v1::SelfSubjectAccessReview>()
            .virtual_review(Review::SelfSubjectAccess),
        of::<authorization::v1::SelfSubjectRulesReview>().virtual_review(Review::SelfSubjectRules),
        of::<authorization::v1::SubjectAccessReview>().virtual_review(Review::SubjectAccess),
        // autoscaling: v2 is stored and preferred, v1 converts
        horizontal_pod_autoscalers::<autoscaling::v2::HorizontalPodAutoscaler>(),
        horizontal_pod_autoscalers::<autoscaling::v1::HorizontalPodAutoscaler>().stored_as(
            "/registry/autoscaling/horizontalpodautoscalers/",
            conversion::HPA_V1,
        ),
        // batch/v1
        of::<batch::v1::CronJob>()
            .short(&["cj"])
            .cats(ALL)
            .subs(&[Status])
            .generation()
            .strategy(&kinds::CronJobs)
            .printer(&table::workloads::CRONJOBS),
        of::<batch::v1::Job>()
            .cats(ALL)
            .subs(&[Status])
            .generation()
            .fields(&["status.successful"])
            .strategy(&kinds::Jobs)
            .printer(&table::workloads::JOBS),
        // certificates.k8s.io/v1
        of::<certificates::v1::CertificateSigningRequest>()
            .short(&["csr"])
            .subs(&[Approval, Status])
            .fields(&["spec.signerName"])
            .strategy(&kinds::CertificateSigningRequests)
            .printer(&table::certificates::CERTIFICATESIGNINGREQUESTS),
        // networking.k8s.io/v1
        of::<networking::v1::IngressClass>()
            .strategy(&kinds::IngressClasses)
            .printer(&table::networking::INGRESS_CLASSES),
        of::<networking::v1::Ingress>()
            .strategy(&kinds::Ingresses)
            .short(&["ing"])
            .subs(&[Status])
            .generation()
            .printer(&table::networking::INGRESSES),
        of::<networking::v1::IPAddress>()
            .short(&["ip"])
            .printer(&table::networking::IPADDRESSES),
        of::<networking::v1::NetworkPolicy>()
            .short(&["netpol"])
            .generation()
            .strategy(&kinds::NetworkPolicies)
            .printer(&table::networking::NETWORKPOLICIES),
        of::<networking::v1::ServiceCIDR>()
            .subs(&[Status])
            .printer(&table::networking::SERVICECIDRS),
        // policy/v1
        of::<policy::v1::PodDisruptionBudget>()
            .strategy(&kinds::PodDisruptionBudgets)
            .short(&["pdb"])
            .printer(&table::policy::PODDISRUPTIONBUDGETS)
            .subs(&[Status])
            .generation(),
        // rbac.authorization.k8s.io/v1
        of::<rbac::v1::ClusterRoleBinding>()
            .strategy(&kinds::Rbac)
            .printer(&table::rbac::BINDINGS),
        of::<rbac::v1::ClusterRole>()
            .strategy(&kinds::Rbac)
            .printer(&table::rbac::ROLES),
        of::<rbac::v1::RoleBinding>()
            .strategy(&kinds::Rbac)
            .printer(&table::rbac::BINDINGS),
        of::<rbac::v1::Role>()
            .strategy(&kinds::Rbac)
            .printer(&table::rbac::ROLES),
        // storage.k8s.io/v1
        of::<storage::v1::CSIDriver>()
            .strategy(&kinds::CsiDrivers)
            .printer(&table::storage::CSIDRIVERS),
        of::<storage::v1::CSINode>()
            .strategy(&kinds::CsiNodes)
            .printer(&table::storage::CSINODES),
        of::<storage::v1::CSIStorageCapacity>().printer(&table::storage::CSISTORAGECAPACITIES),
        of::<storage::v1::StorageClass>()
            .short(&["sc"])
            .strategy(&kinds::StorageClasses)
            .printer(&table::cluster::STORAGECLASSES),
        of::<storage::v1::VolumeAttachment>()
            .subs(&[Status])
            .strategy(&kinds::VolumeAttachments)
            .printer(&table::storage::VOLUMEATTACHMENTS),
        // admissionregistration.k8s.io/v1
        of::<admissionregistration::v1::MutatingWebhookConfiguration>()
            .cats(&["api-extensions"])
            .strategy(&kinds::MUTATING_WEBHOOKS)
            .printer(&table::admission::WEBHOOK_CONFIGURATIONS),
        of::<admissionregistration::v1::ValidatingAdmissionPolicy>()
            .cats(&["api-extensions"])
            .subs(&[Status])
            .generation()
            .strategy(&kinds::VALIDATING_ADMISSION_POLICIES)
            .printer(&table::admission::VALIDATING_ADMISSION_POLICIES),
        of::<admissionregistration::v1::ValidatingAdmissionPolicyBinding>()
            .cats(&["api-extensions"])
            .generation()
            .strategy(&kinds::VALIDATING_ADMISSION_POLICY_BINDINGS)
            .printer(&table::admission::VALIDATING_ADMISSION_POLICY_BINDINGS),
        of::<admissionregistration::v1::ValidatingWebhookConfiguration>()
            .cats(&["api-extensions"])
            .strategy(&kinds::VALIDATING_WEBHOOKS)
            .printer(&table::admission::WEBHOOK_CONFIGURATIONS),
        // apiextensions.k8s.io/v1 (custom resources are served by crate::crd)
        of::<apiextensions::v1::CustomResourceDefinition>()
            .short(&["crd", "crds"])
            .cats(&["api-extensions"])
            .subs(&[Status])
            .generation()
            .strategy(&kinds::CustomResourceDefinitions)
            .printer(&table::core::CREATED_AT),
        // apiregistration.k8s.io/v1 (what the aggregator does with them is
        // crate::aggregator's)
        of::<apiregistration::v1::APIService>()
            .cats(&["api-extensions"])
            .subs(&[Status])
            .strategy(&kinds::API_SERVICES)
            .printer(&table::aggregator::API_SERVICES),
        // scheduling.k8s.io/v1
        of::<scheduling::v1::PriorityClass>()
            .short(&["pc"])
            .strategy(&kinds::PriorityClasses)
            .printer(&table::cluster::PRIORITYCLASSES),
        // node.k8s.io/v1
        of::<node::v1::RuntimeClass>()
            .strategy(&kinds::RuntimeClasses)
            .printer(&table::cluster::RUNTIMECLASSES),
        // coordination.k8s.io/v1
        of::<coordination::v1::Lease>()
            .strategy(&kinds::Leases)
            .printer(&table::core::LEASES),
        // discovery.k8s.io/v1
        of::<discovery::v1::EndpointSlice>()
            .generation()
            .strategy(&kinds::EndpointSlices)
            .printer(&table::networking::ENDPOINTSLICES),
        // flowcontrol.apiserver.k8s.io/v1
        of::<flowcontrol::v1::FlowSchema>()
            .subs(&[Status])
            .generation()
            .strategy(&kinds::FLOW_SCHEMAS)
            .printer(&table::flowcontrol::FLOW_SCHEMAS),
        of::<flowcontrol::v1::PriorityLevelConfiguration>()
            .subs(&[Status])
            .generation()
            .strategy(&kinds::PRIORITY_LEVEL_CONFIGURATIONS)
            .printer(&table::flowcontrol::PRIORITY_LEVELS),
        // metrics.k8s.io/v1beta1, which upstream's metrics-server serves
        // behind the aggregator: computed here from the nodes' figures
        resource_metrics(
            "nodes",
            "NodeMetrics",
            false,
            MetricsResource::Nodes,
            &table::metrics::NODE_METRICS,
        ),
        resource_metrics(
            "pods",
            "PodMetrics",
            true,
            MetricsResource::Pods,
            &table::metrics::POD_METRICS,
        ),
    ]
}
