//! The node server (the kubelet's port 10250): what the API server proxies
//! `pods/log`, `pods/exec`, `pods/attach` and `pods/portforward` to.
//!
//! - `GET /containerLogs/{namespace}/{pod}/{container}`
//! - `/exec/{namespace}/{pod}/{container}`, `/attach/...` (upgrade)
//! - `/portForward/{namespace}/{pod}` (upgrade)
//! - `GET /metrics` (the agent's Prometheus metrics)
//! - `GET /stats/summary`, `GET /metrics/resource` and
//!   `GET /metrics/cadvisor`: resource usage ([`resource_usage`])
//! - `GET /healthz` and `GET /pods` ([`kubelet_info`]), `GET /configz`
//!   ([`configz`])
//! - `GET /logs/…`: the host's `/var/log` ([`node_logs`], `nodes/log`)
//!
//! The server speaks HTTPS only ([`tls`]): it presents the node's serving
//! certificate (`system:node:<name>`, signed by the cluster CA) and
//! authenticates callers by client certificates from that CA, or else by a
//! bearer token the API server accepts in a TokenReview ([`authn`]); every request
//! is then authorized as the kubelet's webhook mode does it ([`authz`]: a
//! SubjectAccessReview for `<verb> nodes/<subresource>` on this node).
//! No certificate: 401; not allowed: 403. It listens on the node's address,
//! and the port actually bound is published in the Node's
//! `status.daemonEndpoints.kubeletEndpoint.port`.

pub(crate) mod answer_cache;
pub(crate) mod authn;
pub(crate) mod authz;
pub(crate) mod bridge;
pub(crate) mod configz;
pub(crate) mod container_logs;
pub(crate) mod kubelet_info;
pub(crate) mod node_logs;
pub(crate) mod resource_usage;
pub(crate) mod spdy;
pub(crate) mod status;
pub(crate) mod streams;
pub(crate) mod target;
#[cfg(test)]
mod tests;
pub mod tls;
pub(crate) mod tunnel;
pub(crate) mod upgrade;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use http::StatusCode;
use k8s_openapi::api::core::v1::Pod;
use skiff_informer::Cache;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::runtime::Runtime;

/// The kubelet's default port.
pub const DEFAULT_PORT: u16 = 10250;

/// What the handlers share.
#[derive(Clone)]
pub(crate) struct NodeState {
    /// The container runtime.
    pub runtime: Arc<dyn Runtime>,
    /// The pods bound to this node (the agent's cache).
    pub pods: Arc<Cache<Pod>>,
    /// Root of the pod log directories.
    pub log_root: PathBuf,
    /// Resource usage of the node and its pods.
    pub stats: Arc<crate::agent::node::stats::StatsProvider>,
    /// Decides what each caller may do.
    pub authorizer: Arc<dyn authz::Reviewer>,
    /// Says whom a bearer token names (callers without a certificate).
    pub authenticator: Arc<dyn authn::TokenAuthenticator>,
    /// What `/configz` shows: the node's configuration, written at start.
    pub configz: Arc<serde_json::Value>,
    /// The host's log directory `/logs/` serves (`/var/log`).
    pub node_log_dir: PathBuf,
}

/// Failures starting the node server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The port could not be bound.
    #[error("binding the node server to {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The TLS configuration could not be built.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// No serving certificate could be had.
    #[error(transparent)]
    Certificate(#[from] crate::agent::identity::serving_cert::ServingCertError),
}

/// Binds the node server's port on `ip`: `port`, or when that is taken
/// (another node on this host, parallel tests) any free port — the bound
/// port is what the Node publishes, so clients follow it.
pub(crate) async fn bind(ip: IpAddr, port: u16) -> Result<TcpListener, ServerError> {
    let address = SocketAddr::new(ip, port);
    match TcpListener::bind(address).await {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && port != 0 => {
            tracing::warn!(port, "node server port in use; binding a free port instead");
            let any = SocketAddr::new(ip, 0);
            TcpListener::bind(any)
                .await
                .map_err(|source| ServerError::Bind {
                    address: any,
                    source,
                })
        }
        Err(source) => Err(ServerError::Bind { address, source }),
    }
}

/// The routes, behind the authorization check (the caller's identity comes
/// from [`tls::serve`]).
pub(crate) fn router(state: NodeState) -> Router {
    Router::new()
        .route(
            "/containerLogs/{namespace}/{pod}/{container}",
            get(container_logs::serve),
        )
        .route("/exec/{namespace}/{pod}/{container}", any(streams::exec))
        .route(
            "/attach/{namespace}/{pod}/{container}",
            any(streams::attach),
        )
        .route("/portForward/{namespace}/{pod}", any(streams::port_forward))
        .route("/metrics", get(metrics))
        .route("/stats/summary", get(resource_usage::summary))
        .route("/metrics/resource", get(resource_usage::metrics))
        .route("/metrics/cadvisor", get(resource_usage::cadvisor_metrics))
        .route("/healthz", get(kubelet_info::healthz))
        .route("/pods", get(kubelet_info::pods))
        .route("/configz", get(configz::configz))
        .route("/logs", get(node_logs::serve_root))
        .route("/logs/", get(node_logs::serve_root))
        .route("/logs/{*path}", get(node_logs::serve_path))
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .with_state(state)
}

/// `/metrics`: the agent's Prometheus metrics (authorized as `get
/// nodes/metrics`, as the kubelet's).
async fn metrics() -> Response {
    (
        [(
            http::header::CONTENT_TYPE,
            skiff_common::metrics::TEXT_CONTENT_TYPE,
        )],
        crate::agent::node::metrics::gather(),
    )
        .into_response()
}

/// Serves HTTPS with `tls` until `stop` is raised.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    state: NodeState,
    stop: watch::Receiver<bool>,
) {
    tls::serve(listener, tls, router(state), stop).await;
}

/// Refuses a request without a verified caller (401: no client certificate
/// from the cluster CA and no bearer token the API server accepts) or whose
/// caller the authorizer does not allow (403), as the kubelet does.
async fn authorize(State(state): State<NodeState>, request: Request, next: Next) -> Response {
    let certified = match request.extensions().get::<tls::Peer>() {
        Some(tls::Peer(Some(caller))) => Some(caller.clone()),
        _ => None,
    };
    let caller = match (certified, authn::bearer_token(request.headers())) {
        (Some(caller), _) => caller,
        (None, Some(token)) => match state.authenticator.authenticate(token).await {
            Ok(Some(caller)) => caller,
            Ok(None) => return status::failure(StatusCode::UNAUTHORIZED, "Unauthorized"),
            Err(error) => {
                tracing::warn!(%error, "node server authentication failed");
                return status::failure(StatusCode::UNAUTHORIZED, "Unauthorized");
            }
        },
        (None, None) => return status::failure(StatusCode::UNAUTHORIZED, "Unauthorized"),
    };
    let path = request.uri().path();
    let Some(action) = authz::NodeAction::of(request.method(), path) else {
        return status::failure(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method {} is not supported", request.method()),
        );
    };
    let attributes = format!(
        "user={}, verb={}, resource=nodes, subresource(s)=[{}]",
        caller.name, action.verb, action.subresource
    );
    match state.authorizer.review(&caller, &action).await {
        Ok(true) => next.run(request).await,
        Ok(false) => {
            tracing::debug!(%attributes, path, "node server request forbidden");
            status::failure(StatusCode::FORBIDDEN, format!("Forbidden ({attributes})"))
        }
        Err(error) => {
            tracing::warn!(%error, "node server authorization failed");
            status::failure(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Authorization error ({attributes})"),
            )
        }
    }
}
