//! Integration tests of the controllers over the in-process API server: the test
//! plays the node (patching pod status) where a controller needs one.

// A test stops at the first surprise (unwrapping is how it says so), and
// nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

mod controllers {
    mod accounts;
    mod certificates;
    mod clusterrole_aggregation;
    mod cronjob;
    mod daemonset;
    mod deployment;
    mod disruption;
    pub mod endpoints;
    mod endpointslice;
    mod events;
    mod garbage_collector;
    mod horizontal_pod_autoscaler;
    mod job;
    mod local_path_provisioner;
    mod namespace;
    mod node_ipam;
    mod node_lifecycle;
    mod persistent_volume_binder;
    mod podgc;
    mod pv_protection;
    mod pvc_protection;
    mod replicaset;
    mod resource_quota;
    mod serviceaccount;
    mod servicelb;
    mod statefulset;
    pub mod support;
    pub mod workload_helpers;
}
