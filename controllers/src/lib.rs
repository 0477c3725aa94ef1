//! skiff-controllers is the controller manager: namespace, garbage collector,
//! service account, ReplicaSet/ReplicationController, Deployment, StatefulSet,
//! DaemonSet, Job, CronJob, PodDisruptionBudget status (disruption), endpoints
//! and EndpointSlices, node lifecycle, pod GC, ClusterRole aggregation,
//! resource quota, horizontal pod autoscaling, CSR approval and signing,
//! the default StorageClass of claims made before there was one and the
//! release of volumes whose claim is gone (persistentvolume-binder), skiff's
//! `local-path` volumes for claims placed on any node (local-path-provisioner), claims
//! kept while pods use them (pvc-protection), volumes kept while a claim is
//! bound to them (pv-protection) and k3s's node-password cleanup, each
//! reconciling through shared informers
//! (events are recorded with `skiff_common::events`, re-exported as
//! `events`); and the auto-deployed manifests directory (`deploy`, which
//! polls files, not the API).
//!
//! It must never import the API server or the store: it acts only through the
//! Kubernetes API, exactly as an out-of-process controller would.

pub mod certificates;
pub mod clusterrole_aggregation;
pub(crate) mod controller_utils;
pub(crate) mod cronjob;
pub(crate) mod daemonset;
pub mod deploy;
pub(crate) mod deployment;
pub(crate) mod disruption;
pub(crate) mod endpoints;
pub(crate) mod endpointslice;
pub use skiff_common::events;
pub mod garbage_collector;
pub(crate) mod history;
pub mod horizontal_pod_autoscaler;
pub(crate) mod job;
pub mod local_path_provisioner;
pub(crate) mod manager;
pub(crate) mod namespace;
pub mod node_ipam;
pub mod node_lifecycle;
pub mod node_password;
pub(crate) mod owner_events;
pub(crate) mod persistent_volume_binder;
pub(crate) mod persistent_volume_release;
pub(crate) mod pod_control;
pub mod podgc;
pub(crate) mod pv_protection;
pub(crate) mod pvc_protection;
pub(crate) mod replicaset;
pub mod resource_quota;
pub(crate) mod serviceaccount;
pub(crate) mod servicelb;
pub(crate) mod statefulset;
pub mod taint_eviction;
pub mod token_cleaner;

pub use manager::{ACCOUNTS_NAMESPACE, ClientForAccount, Context, ControllerManager, Stop};

/// Every built-in controller, by name, with the service account it acts as
/// (upstream's names), in start order. Each controller module adds its own
/// line here.
fn defaults() -> Vec<manager::Registered> {
    use manager::starter;
    vec![
        starter("namespace", "namespace-controller", namespace::run),
        starter(
            "garbage-collector",
            "generic-garbage-collector",
            garbage_collector::run,
        ),
        starter(
            "serviceaccount",
            "service-account-controller",
            serviceaccount::run,
        ),
        starter(
            "root-ca-cert-publisher",
            "root-ca-cert-publisher",
            serviceaccount::run_root_ca_publisher,
        ),
        starter("endpoint", "endpoint-controller", endpoints::run),
        starter(
            "endpointslice",
            "endpointslice-controller",
            endpointslice::run,
        ),
        starter("servicelb", "service-lb-controller", servicelb::run),
        starter("node-lifecycle", "node-controller", node_lifecycle::run),
        starter("pod-garbage-collector", "pod-garbage-collector", podgc::run),
        starter("node-ipam", "node-controller", node_ipam::run),
        starter(
            "certificates",
            "certificate-controller",
            certificates::controller::run,
        ),
        starter("replicaset", "replicaset-controller", replicaset::run),
        starter("cronjob", "cronjob-controller", cronjob::run),
        starter("daemonset", "daemon-set-controller", daemonset::run),
        starter("statefulset", "statefulset-controller", statefulset::run),
        starter("job", "job-controller", job::run),
        starter("deployment", "deployment-controller", deployment::run),
        starter("disruption", "disruption-controller", disruption::run),
        starter(
            "replicationcontroller",
            "replication-controller",
            replicaset::run_replication_controllers,
        ),
        starter(
            "clusterrole-aggregation",
            "clusterrole-aggregation-controller",
            clusterrole_aggregation::run,
        ),
        starter(
            "resourcequota",
            "resourcequota-controller",
            resource_quota::run,
        ),
        starter(
            "horizontalpodautoscaling",
            "horizontal-pod-autoscaler",
            horizontal_pod_autoscaler::run,
        ),
        starter(
            "persistentvolume-binder",
            "persistent-volume-binder",
            persistent_volume_binder::run,
        ),
        starter(
            "local-path-provisioner",
            local_path_provisioner::ACCOUNT,
            local_path_provisioner::run,
        ),
        starter(
            "pvc-protection",
            "pvc-protection-controller",
            pvc_protection::run,
        ),
        starter(
            "pv-protection",
            "pv-protection-controller",
            pv_protection::run,
        ),
        starter("tokencleaner", "token-cleaner", token_cleaner::run),
        starter("node-password", node_password::ACCOUNT, node_password::run),
    ]
}
