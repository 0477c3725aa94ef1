//! End-to-end tests: each starts a real `skiff server` process on a free port
//! and drives it with real clients — kubectl, kube-rs over HTTPS, the Python
//! `kubernetes` package — exactly as a user would.

// A bench or test stops at the first surprise (unwrapping is how it says so),
// and nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

mod e2e {
    pub mod support;

    mod admission_policy;
    mod audit;
    mod authz;
    mod autoscaling;
    mod check_config;
    mod containerd;
    mod crd;
    mod data_protection;
    mod dns;
    mod durability;
    mod etcd_datastore;
    mod faults;
    mod fidelity;
    mod ha;
    mod ingress;
    mod install;
    mod join;
    mod kind_sweep;
    mod kube_rs;
    mod kubectl;
    mod kubectl_apply;
    mod manifests;
    mod metrics;
    mod multi_node;
    mod network_policy;
    mod node_faults;
    mod node_features;
    mod oidc;
    mod overload;
    mod pod_lifecycle;
    mod pod_security;
    mod python;
    mod quota;
    mod rbac;
    mod resource_metrics;
    mod scheduling;
    mod server;
    mod server_side_apply;
    mod services;
    mod simulated;
    mod snapshots;
    mod streaming;
    mod tables;
    mod webhooks;
    mod workloads;
}
