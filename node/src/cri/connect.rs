//! gRPC channels to a CRI runtime over a unix socket.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

use super::error::CriError;

/// Turns `unix:///run/x.sock` or `/run/x.sock` into the socket path. Other
/// schemes (tcp, npipe) are not supported: CRI runtimes on Linux listen on
/// unix sockets.
pub(crate) fn socket_path(endpoint: &str) -> Result<PathBuf, CriError> {
    let path = match endpoint.split_once("://") {
        Some(("unix", path)) => path,
        Some((scheme, _)) => {
            return Err(CriError::InvalidEndpoint {
                endpoint: endpoint.to_string(),
                reason: format!("scheme {scheme:?} is not supported, use unix://"),
            });
        }
        None => endpoint,
    };
    if !path.starts_with('/') {
        return Err(CriError::InvalidEndpoint {
            endpoint: endpoint.to_string(),
            reason: "the socket path must be absolute".to_string(),
        });
    }
    Ok(PathBuf::from(path))
}

/// A channel that dials `socket` on first use and again whenever the
/// connection breaks, so a client outlives restarts of the runtime.
pub(super) fn lazy_unix_channel(socket: &Path, connect_timeout: Duration) -> Channel {
    // The URI is required by tonic but never dialled: the connector below
    // always opens the unix socket.
    let endpoint = Endpoint::from_static("http://cri.invalid").connect_timeout(connect_timeout);
    let socket = socket.to_path_buf();
    endpoint.connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
        let socket = socket.clone();
        async move { UnixStream::connect(socket).await.map(TokioIo::new) }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_accept_unix_urls_and_absolute_paths_only() {
        assert_eq!(
            socket_path("unix:///run/c.sock").unwrap(),
            PathBuf::from("/run/c.sock")
        );
        assert_eq!(
            socket_path("/run/c.sock").unwrap(),
            PathBuf::from("/run/c.sock")
        );
        assert!(socket_path("tcp://127.0.0.1:1").is_err());
        assert!(socket_path("run/c.sock").is_err());
    }
}
