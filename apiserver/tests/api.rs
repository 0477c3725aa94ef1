//! Integration tests of the REST API, driving `ApiServer::router()` directly
//! (no sockets) over a sled store in a temporary directory.

// A test stops at the first surprise (unwrapping is how it says so), and
// nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

#[path = "api/harness.rs"]
mod harness;

#[path = "api/admission_policy.rs"]
mod admission_policy;
#[path = "api/aggregator.rs"]
mod aggregator;
#[path = "api/aggregator_proxy.rs"]
mod aggregator_proxy;
#[path = "api/apply.rs"]
mod apply;
#[path = "api/audit.rs"]
mod audit;
#[path = "api/bootstrap_tokens.rs"]
mod bootstrap_tokens;
#[path = "api/crd.rs"]
mod crd;
#[path = "api/crud.rs"]
mod crud;
#[path = "api/defaulting/mod.rs"]
mod defaulting;
#[path = "api/defaults.rs"]
mod defaults;
#[path = "api/deletion.rs"]
mod deletion;
#[path = "api/discovery.rs"]
mod discovery;
#[path = "api/disk.rs"]
mod disk;
#[path = "api/encryption.rs"]
mod encryption;
#[path = "api/errors.rs"]
mod errors;
#[path = "api/field_validation.rs"]
mod field_validation;
#[path = "api/flowcontrol.rs"]
mod flowcontrol;
#[path = "api/kinds.rs"]
mod kinds;
#[path = "api/kube_client.rs"]
mod kube_client;
#[path = "api/kubectl.rs"]
mod kubectl;
#[path = "api/list.rs"]
mod list;
#[path = "api/metrics.rs"]
mod metrics;
#[path = "api/node_authz.rs"]
mod node_authz;
#[path = "api/node_tls.rs"]
mod node_tls;
#[path = "api/openapi.rs"]
mod openapi;
#[path = "api/patch.rs"]
mod patch;
#[path = "api/pod_security.rs"]
mod pod_security;
#[path = "api/proxy.rs"]
mod proxy;
#[path = "api/quota.rs"]
mod quota;
#[path = "api/rbac.rs"]
mod rbac;
#[path = "api/resource_metrics.rs"]
mod resource_metrics;
#[path = "api/reviews.rs"]
mod reviews;
#[path = "api/runtime_classes.rs"]
mod runtime_classes;
#[path = "api/service_alloc.rs"]
mod service_alloc;
#[path = "api/subresources.rs"]
mod subresources;
#[path = "api/tokens.rs"]
mod tokens;
#[path = "api/watch.rs"]
mod watch;
#[path = "api/webhooks.rs"]
mod webhooks;
