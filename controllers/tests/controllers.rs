//! Integration tests of the controllers over the in-process API server: the test
//! plays the node (patching pod status) where a controller needs one.

mod controllers {
    pub mod support;
    pub mod endpoints;
    mod endpointslice;
    mod events;
    mod garbage_collector;
    mod namespace;
    mod node_ipam;
    mod node_lifecycle;
    mod podgc;
    mod serviceaccount;
    pub mod workload_helpers;
    mod replicaset;
    mod cronjob;
    mod daemonset;
    mod statefulset;
    mod job;
    mod deployment;
}
