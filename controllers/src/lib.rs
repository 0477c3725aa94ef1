//! skiff-controllers is the controller manager: namespace, garbage collector,
//! service account, ReplicaSet/ReplicationController, Deployment, StatefulSet,
//! DaemonSet, Job, CronJob, endpoints and EndpointSlices, node lifecycle, pod GC,
//! and event recording, each reconciling through shared informers.
//!
//! It must never import the API server or the store: it acts only through the
//! Kubernetes API, exactly as an out-of-process controller would.

pub mod controller_utils;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod endpoints;
pub mod endpointslice;
pub mod events;
pub mod garbage_collector;
pub mod job;
pub mod manager;
pub mod namespace;
pub mod node_ipam;
pub mod node_lifecycle;
pub mod pod_control;
pub mod podgc;
pub mod replicaset;
pub mod serviceaccount;
pub mod servicelb;
pub mod statefulset;

pub use manager::{Context, ControllerManager, Stop};

/// Every built-in controller, by name, in start order. Each controller module
/// adds its own line here.
fn defaults() -> Vec<(&'static str, manager::Starter)> {
    vec![
        manager::starter("namespace", namespace::run),
        manager::starter("garbage-collector", garbage_collector::run),
        manager::starter("serviceaccount", serviceaccount::run),
        manager::starter(
            "root-ca-cert-publisher",
            serviceaccount::run_root_ca_publisher,
        ),
        manager::starter("endpoint", endpoints::run),
        manager::starter("endpointslice", endpointslice::run),
        manager::starter("servicelb", servicelb::run),
        manager::starter("node-lifecycle", node_lifecycle::run),
        manager::starter("pod-garbage-collector", podgc::run),
        manager::starter("node-ipam", node_ipam::run),
        manager::starter("replicaset", replicaset::run),
        manager::starter("cronjob", cronjob::run),
        manager::starter("daemonset", daemonset::run),
        manager::starter("statefulset", statefulset::run),
        manager::starter("job", job::run),
        manager::starter("deployment", deployment::run),
        manager::starter(
            "replicationcontroller",
            replicaset::run_replication_controllers,
        ),
    ]
}
