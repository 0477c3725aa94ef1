//! The API client of an agent that runs apart from the server
//! (`skiff agent`): from a kubeconfig, or from the server's URL and a
//! bearer token, optionally pinning the cluster CA.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        /// Its path.
        path: String,
        /// Why.
        source: KubeconfigError,
    },
    /// The server URL is not a URL.
    #[error("server URL {0:?} is invalid")]
    Url(String),
    /// The HTTPS client could not be built.
    #[error("building the API client: {0}")]
    Client(#[from] kube::Error),
}

/// A client configured by the kubeconfig at `path`.
pub async fn client_from_kubeconfig(path: &Path) -> Result<kube::Client, RemoteError> {
    let err = |source| RemoteError::Kubeconfig {
        path: path.display().to_string(),
        source,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(err)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(err)?;
    Ok(kube::Client::try_from(config)?)
}

/// A client for `server` authenticating with `token`. Without `ca_file` the
/// server's certificate is not verified (the token still authenticates
/// the agent, but not the server): pass the cluster CA in production.
pub fn client_from_token(
    server: &str,
    token: &str,
    ca_file: Option<&Path>,
) -> Result<kube::Client, RemoteError> {
    let url = server
        .parse()
        .map_err(|_| RemoteError::Url(server.to_string()))?;
    let mut config = kube::Config::new(url);
    config.auth_info.token = Some(token.to_string().into());
    match ca_file {
        Some(ca) => config.root_cert_file = Some(ca.to_path_buf()),
        None => config.accept_invalid_certs = true,
    }
    Ok(kube::Client::try_from(config)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_inputs_are_reported() {
        assert!(matches!(
            client_from_token("not a url", "t", None),
            Err(RemoteError::Url(_))
        ));
        assert!(client_from_token("https://127.0.0.1:6443", "t", None).is_ok());
        let Err(err) = client_from_kubeconfig(Path::new("/nonexistent/kubeconfig")).await else {
            panic!("a missing kubeconfig was accepted");
        };
        assert!(err.to_string().contains("/nonexistent/kubeconfig"), "{err}");
    }
}
