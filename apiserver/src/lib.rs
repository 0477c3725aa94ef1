//! skiff-apiserver owns the Kubernetes REST API: the resource registry, request
//! handling (CRUD, watch, patch, subresources), the per-resource watch cache,
//! admission (defaulting and validation, the built-in plugins, the CEL
//! policies of `admission_plugins::validating_policy` and CRD rules on the
//! engine in `cel/`, and the admission webhooks of
//! `admission_plugins::webhook`, which it calls over HTTPS), authentication
//! and authorization, API Priority and Fairness (`flowcontrol`), discovery,
//! TLS, and `/metrics` (every in-process component's Prometheus metrics,
//! `metrics`). Its router doubles as an in-process `tower::Service` on
//! which the other components build their `kube::Client`.
//!
//! It is the only writer of the store. It must never run controllers or reach
//! into another component's state: everything else talks to it through the API.

pub mod authn;
pub mod bootstrap_tokens;
pub mod inprocess;
pub(crate) mod kubelet_client;
pub mod serve;
pub mod tls;
pub(crate) mod tokens;
mod unread_body;

mod admission;
mod admission_plugins;
pub(crate) mod aggregator;
pub mod audit;
pub mod authz;
mod body;
pub(crate) mod cel;
pub mod component_status;
pub(crate) mod crd;
mod decode_errors;
pub(crate) mod discovery;
pub mod encryption;
mod event_ttl;
pub(crate) mod field_validation;
pub(crate) mod flowcontrol;
#[doc(hidden)]
pub mod fuzzing;
mod go_format;
mod go_json;
mod handlers;
mod health;
mod key_locks;
mod kinds;
mod managed_fields;
mod metrics;
mod object;
pub mod oidc;
pub(crate) mod openapi;
mod outbound;
pub mod patch;
pub mod peer_endpoints;
pub mod protobuf;
mod query;
pub(crate) mod registry;
pub mod request_notes;
mod request_span;
pub mod request_timeout;
pub(crate) mod resource_metrics;
pub(crate) mod reviews;
mod routing;
pub mod selectors;
mod server;
mod service_alloc;
mod service_endpoints;
pub mod snapshots;
pub mod status;
pub(crate) mod table;
pub(crate) mod validation;
mod watch_cache;
mod wire_order;

pub use admission_plugins::config::AdmissionConfigError;
pub use server::{ApiServer, ApiServerConfig, ApiServerError, SYSTEM_NAMESPACES};
