//! The node server (the kubelet's port 10250): what the API server proxies
//! `pods/log`, `pods/exec`, `pods/attach` and `pods/portforward` to.
//!
//! - `GET /containerLogs/{namespace}/{pod}/{container}`
//! - `/exec/{namespace}/{pod}/{container}`, `/attach/...` (upgrade)
//! - `/portForward/{namespace}/{pod}` (upgrade)
//!
//! Every request must carry the cluster's node-proxy bearer token (shared
//! with the API server); a server without a token refuses everything. The
//! port actually bound is published in the Node's
//! `status.daemonEndpoints.kubeletEndpoint.port`.

pub mod bridge;
pub mod container_logs;
pub mod spdy;
pub mod status;
pub mod streams;
pub mod target;
pub mod tunnel;
pub mod upgrade;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
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
pub struct NodeState {
    /// The container runtime.
    pub runtime: Arc<dyn Runtime>,
    /// The pods bound to this node (the agent's cache).
    pub pods: Arc<Cache<Pod>>,
    /// Root of the pod log directories.
    pub log_root: PathBuf,
    /// The bearer token every request must present.
    pub token: Option<Arc<str>>,
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
    /// The token file could not be read or written.
    #[error("node-proxy token file {path}: {source}")]
    Token {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Binds the node server's port: `port` on every address, or when that is
/// taken (another node on this host, parallel tests) any free port — the
/// bound port is what the Node publishes, so clients follow it.
pub async fn bind(port: u16) -> Result<TcpListener, ServerError> {
    let address = SocketAddr::from(([0, 0, 0, 0], port));
    match TcpListener::bind(address).await {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && port != 0 => {
            tracing::warn!(port, "node server port in use; binding a free port instead");
            let any = SocketAddr::from(([0, 0, 0, 0], 0));
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

/// The routes, behind the token check.
pub fn router(state: NodeState) -> Router {
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
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .with_state(state)
}

/// Serves until `stop` is raised.
pub async fn serve(listener: TcpListener, state: NodeState, mut stop: watch::Receiver<bool>) {
    let app = router(state);
    let shutdown = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    if let Err(error) = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
    {
        tracing::error!(%error, "node server stopped");
    }
}

async fn authenticate(State(state): State<NodeState>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match (&state.token, presented) {
        (Some(want), Some(got)) if constant_time_eq(want.as_bytes(), got.as_bytes()) => {
            next.run(request).await
        }
        _ => status::failure(StatusCode::UNAUTHORIZED, "Unauthorized"),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads the node-proxy token from `path`, creating it (random, mode 0600)
/// when absent. `skiff server` shares it between its API server and agent.
pub fn load_or_create_token(path: &Path) -> Result<String, ServerError> {
    let err = |source| ServerError::Token {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::read_to_string(path) {
        Ok(t) if !t.trim().is_empty() => return Ok(t.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let mut random = [0u8; 24];
    {
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut random))
            .map_err(err)?;
    }
    let token: String = random.iter().map(|b| format!("{b:02x}")).collect();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .map_err(err)?;
        f.write_all(token.as_bytes()).map_err(err)?;
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_created_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/node-token");
        let first = load_or_create_token(&path).unwrap();
        assert_eq!(first.len(), 48);
        assert_eq!(load_or_create_token(&path).unwrap(), first);
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
