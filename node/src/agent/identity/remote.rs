//! The API client of an agent that runs apart from the server
//! (`skiff agent`): from a kubeconfig, or from the server's URL, a bearer
//! token and the cluster CA. The server is always verified against the
//! cluster CA, and that CA is also what the node server checks client
//! certificates against.

use std::path::Path;

use base64::Engine as _;
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
    /// The kubeconfig does not pin the cluster CA.
    #[error(
        "kubeconfig {0}: the cluster names no certificate authority (or skips TLS verification); the agent must verify the server"
    )]
    NoCa(String),
    /// The CA file could not be read or holds no certificate.
    #[error("CA file {path}: {reason}")]
    CaFile {
        /// Its path.
        path: String,
        /// Why.
        reason: String,
    },
    /// The server URL is not a URL.
    #[error("server URL {0:?} is invalid")]
    Url(String),
    /// The HTTPS client could not be built.
    #[error("building the API client: {0}")]
    Client(#[from] kube::Error),
}

/// A client of the server and the cluster CA it verifies the server with.
#[derive(Clone)]
pub struct Remote {
    /// The API client.
    pub client: kube::Client,
    /// The cluster CA (PEM).
    pub ca_pem: String,
}

/// A client configured by the kubeconfig at `path`, which must name the
/// cluster CA.
pub async fn client_from_kubeconfig(path: &Path) -> Result<Remote, RemoteError> {
    let shown = path.display().to_string();
    let err = |source| RemoteError::Kubeconfig {
        path: shown.clone(),
        source,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(err)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(err)?;
    let ca_pem = match (&config.root_cert, config.accept_invalid_certs) {
        (Some(ders), false) if !ders.is_empty() => ders.iter().map(|der| pem_of(der)).collect(),
        _ => return Err(RemoteError::NoCa(shown)),
    };
    Ok(Remote {
        client: kube::Client::try_from(config)?,
        ca_pem,
    })
}

/// A client for `server` authenticating with `token`, verifying the
/// server against the CA in `ca_file`.
pub fn client_from_token(server: &str, token: &str, ca_file: &Path) -> Result<Remote, RemoteError> {
    let url = server
        .parse()
        .map_err(|_| RemoteError::Url(server.to_string()))?;
    let ca_err = |reason: String| RemoteError::CaFile {
        path: ca_file.display().to_string(),
        reason,
    };
    let ca_pem = std::fs::read_to_string(ca_file).map_err(|e| ca_err(e.to_string()))?;
    super::pki::pem_certs(&ca_pem).map_err(ca_err)?;
    let mut config = kube::Config::new(url);
    config.auth_info.token = Some(token.to_string().into());
    config.root_cert_file = Some(ca_file.to_path_buf());
    Ok(Remote {
        client: kube::Client::try_from(config)?,
        ca_pem,
    })
}

fn pem_of(der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_inputs_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.crt");
        std::fs::write(&ca, "not a certificate").unwrap();
        assert!(matches!(
            client_from_token("not a url", "t", &ca),
            Err(RemoteError::Url(_))
        ));
        // A CA file without a certificate is refused, not ignored.
        let Err(err) = client_from_token("https://127.0.0.1:6443", "t", &ca) else {
            panic!("a CA file without a certificate was accepted");
        };
        assert!(matches!(err, RemoteError::CaFile { .. }), "{err}");
        let Err(err) = client_from_kubeconfig(Path::new("/nonexistent/kubeconfig")).await else {
            panic!("a missing kubeconfig was accepted");
        };
        assert!(err.to_string().contains("/nonexistent/kubeconfig"), "{err}");
    }

    #[tokio::test]
    async fn a_kubeconfig_without_a_ca_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        for cluster in [
            "server: https://127.0.0.1:6443",
            "server: https://127.0.0.1:6443\n    insecure-skip-tls-verify: true",
        ] {
            std::fs::write(
                &path,
                format!(
                    "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    {cluster}\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
                ),
            )
            .unwrap();
            let Err(err) = client_from_kubeconfig(&path).await else {
                panic!("a kubeconfig without a CA was accepted: {cluster}");
            };
            assert!(matches!(err, RemoteError::NoCa(_)), "{err}");
        }
    }
}
