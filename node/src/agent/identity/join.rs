//! `skiff agent --server URL --token K10…`: joining a cluster with a join
//! token, as k3s's agents do, then kubelet TLS bootstrap.
//!
//! 1. The cluster CA is fetched from the server's public `/cacerts` without
//!    trusting the connection, and its sha256 must be the token's hash;
//!    otherwise the agent stops there, before any credential is sent.
//! 2. From then on the server must chain to that CA. A client certificate
//!    already in `AGENT_DIR/pki/` for this node and CA is used as it is.
//! 3. Otherwise the token's credential (a bootstrap token or the server
//!    token) asks for one: a CertificateSigningRequest for
//!    `kubernetes.io/kube-apiserver-client-kubelet`, carrying the node
//!    password kept in `AGENT_DIR/node-password`, which the API server
//!    checks so that a second host cannot take over this node's name
//!    ([`super::client_cert`]).
//! 4. Every later request authenticates with that certificate, which
//!    [`keep_renewed`] renews before it expires.
//!
//! The token's credential is never logged and never written to disk.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kube::client::ConfigExt;
use skiff_common::join_token::{self, JoinToken};
use tokio::sync::watch;

use super::client_cert::{self, ClientCertError, Fitness};
use super::csr_signer::CsrError;
use super::pki::{CertSlot, pem_certs};

/// The node password's file in the agent's directory.
pub const PASSWORD_FILE: &str = "node-password";
/// How long the bootstrap waits for its certificate.
const BOOTSTRAP_WAIT: Duration = Duration::from_secs(300);
/// How often the client certificate is checked for renewal.
pub const RENEW_CHECK: Duration = Duration::from_secs(3600);

/// Why the agent could not join.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The token is malformed.
    #[error(transparent)]
    Token(#[from] join_token::TokenError),
    /// The token carries no CA hash.
    #[error(
        "the token carries no CA hash (K10<sha256>::…); give --ca-file, or use the server's DATA_DIR/token or a token `skiff token create` printed"
    )]
    NoCaHash,
    /// The server URL is not a URL.
    #[error("server URL {0:?} is invalid")]
    Url(String),
    /// The CA could not be fetched.
    #[error("fetching the cluster CA from {server}/cacerts: {reason}")]
    FetchCa {
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },
    /// The CA the server showed is not the token's.
    #[error(
        "the cluster CA served by {server} has sha256 {served}, but the token expects {expected}: refusing to trust this server (wrong token, or not the server you think); nothing was sent"
    )]
    CaMismatch {
        /// The server.
        server: String,
        /// The hash of what it served.
        served: String,
        /// The hash in the token.
        expected: String,
    },
    /// The server refused the token's credential.
    #[error("the server at {server} refused the join token ({code}): {message}")]
    Refused {
        /// The server.
        server: String,
        /// The HTTP code (401: wrong or expired token; 403: not allowed).
        code: u16,
        /// The server's message.
        message: String,
    },
    /// The client certificate could not be had.
    #[error("kubelet TLS bootstrap: {0}")]
    Bootstrap(#[source] ClientCertError),
    /// The node password could not be kept.
    #[error("the node password in {path}: {source}")]
    Password {
        /// Its file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// An API client could not be built.
    #[error("building the API client: {0}")]
    Client(String),
}

/// What joining needs.
#[derive(Debug, Clone)]
pub struct JoinConfig {
    /// The server's URL.
    pub server: String,
    /// The join token.
    pub token: JoinToken,
    /// The agent's directory (`DATA_DIR/agent`): `pki/` and the password.
    pub agent_dir: PathBuf,
    /// This node's name.
    pub node_name: String,
}

/// A joined agent's API client and what it trusts.
#[derive(Clone)]
pub struct Joined {
    /// The client, authenticating as `system:node:<name>` with the
    /// certificate in `slot`.
    pub client: kube::Client,
    /// The cluster CA (PEM), exactly as served.
    pub ca_pem: String,
    /// The presented client certificate.
    pub slot: Arc<CertSlot>,
}

/// Fetches `/cacerts` from `server` without trusting the connection (its
/// bytes are checked against the token's hash by the caller); sends no
/// credential.
pub async fn fetch_ca(server: &str) -> Result<String, JoinError> {
    let url = server
        .parse()
        .map_err(|_| JoinError::Url(server.to_string()))?;
    let fetch_err = |reason: String| JoinError::FetchCa {
        server: server.to_string(),
        reason,
    };
    let mut config = kube::Config::new(url);
    // Only for this one anonymous read, whose answer is verified by hash.
    config.accept_invalid_certs = true;
    config.connect_timeout = Some(Duration::from_secs(10));
    config.read_timeout = Some(Duration::from_secs(10));
    let client = kube::Client::try_from(config).map_err(|e| fetch_err(e.to_string()))?;
    let request = http::Request::get("/cacerts")
        .body(Vec::new())
        .map_err(|e| fetch_err(e.to_string()))?;
    client
        .request_text(request)
        .await
        .map_err(|e| fetch_err(e.to_string()))
}

/// Checks that `ca_pem` is the CA `token` names.
pub fn check_ca(server: &str, token: &JoinToken, ca_pem: &str) -> Result<(), JoinError> {
    let expected = token.ca_hash.clone().ok_or(JoinError::NoCaHash)?;
    if token.matches_ca(ca_pem.as_bytes()) && pem_certs(ca_pem).is_ok() {
        return Ok(());
    }
    Err(JoinError::CaMismatch {
        server: server.to_string(),
        served: join_token::ca_hash(ca_pem.as_bytes()),
        expected,
    })
}

/// Joins: the checked CA, then the stored client certificate or a new one
/// through the kubelet TLS bootstrap; returns the node's API client.
pub async fn join(config: &JoinConfig) -> Result<Joined, JoinError> {
    if config.token.ca_hash.is_none() {
        return Err(JoinError::NoCaHash);
    }
    let ca_pem = fetch_ca(&config.server).await?;
    check_ca(&config.server, &config.token, &ca_pem)?;
    tracing::info!(server = %config.server, "cluster CA matches the token");
    join_with_ca(config, ca_pem).await
}

/// The second half of [`join`], for a CA already checked against the
/// token: the stored client certificate or a new one through the kubelet
/// TLS bootstrap. Hollow nodes of one agent each join this way, sharing
/// the one CA check.
pub async fn join_with_ca(config: &JoinConfig, ca_pem: String) -> Result<Joined, JoinError> {
    let pki = config.agent_dir.join("pki");
    let stored = client_cert::load(&pki)
        .map_err(|e| JoinError::Bootstrap(e.into()))?
        .filter(|cert| match client_cert::assess(&cert.cert_pem, &config.node_name, &ca_pem) {
            Fitness::Unusable(why) => {
                tracing::info!(%why, "the stored client certificate is unusable; bootstrapping a new one");
                false
            }
            _ => true,
        });
    let cert = match stored {
        Some(cert) => {
            tracing::info!(node = %config.node_name, "using the stored node client certificate");
            cert
        }
        None => {
            let password = node_password(&config.agent_dir)?;
            let bootstrap = bootstrap_client(&config.server, &ca_pem, &config.token.credential)?;
            tracing::info!(node = %config.node_name, "asking for a node client certificate (kubelet TLS bootstrap)");
            client_cert::obtain(
                &bootstrap,
                &pki,
                &config.node_name,
                &ca_pem,
                Some(&password),
                BOOTSTRAP_WAIT,
            )
            .await
            .map_err(|e| refused_or(&config.server, e))?
        }
    };
    let slot = CertSlot::new(&cert).map_err(JoinError::Client)?;
    let client = client_with_cert(&config.server, &ca_pem, slot.clone())?;
    Ok(Joined {
        client,
        ca_pem,
        slot,
    })
}

/// A 401 or 403 from the certificate request is the token's (or the node
/// password's) refusal: say so plainly.
fn refused_or(server: &str, error: ClientCertError) -> JoinError {
    if let ClientCertError::Request(CsrError::Create(kube::Error::Api(status))) = &error
        && (status.code == 401 || status.code == 403)
    {
        let message = if status.code == 401 {
            "the token is wrong or has expired".to_string()
        } else {
            status.message.clone()
        };
        return JoinError::Refused {
            server: server.to_string(),
            code: status.code,
            message,
        };
    }
    JoinError::Bootstrap(error)
}

/// Renews the client certificate before it expires, checking every
/// `every`, until `stop`.
pub async fn keep_renewed(
    joined: Joined,
    agent_dir: PathBuf,
    node_name: String,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let pki = agent_dir.join("pki");
    loop {
        if let Err(error) = client_cert::renew(
            &joined.client,
            &joined.slot,
            &pki,
            &node_name,
            &joined.ca_pem,
            BOOTSTRAP_WAIT,
        )
        .await
        {
            tracing::warn!(%error, "renewing the node client certificate");
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// The node password in `agent_dir`, made (random, 0600) the first time.
pub fn node_password(agent_dir: &Path) -> Result<String, JoinError> {
    use std::io::Read;
    let path = agent_dir.join(PASSWORD_FILE);
    let err = |source| JoinError::Password {
        path: path.clone(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => return Ok(text.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(err)?;
    let password: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::create_dir_all(agent_dir).map_err(err)?;
    skiff_common::files::write_private(&path, format!("{password}\n").as_bytes())
        .map_err(|e| err(e.source))?;
    Ok(password)
}

/// A client configuration for `server` that trusts only `ca_pem`.
fn verified_config(server: &str, ca_pem: &str) -> Result<kube::Config, JoinError> {
    let url = server
        .parse()
        .map_err(|_| JoinError::Url(server.to_string()))?;
    let mut config = kube::Config::new(url);
    config.root_cert = Some(root_ders(ca_pem)?);
    Ok(config)
}

fn root_ders(ca_pem: &str) -> Result<Vec<Vec<u8>>, JoinError> {
    Ok(pem_certs(ca_pem)
        .map_err(JoinError::Client)?
        .into_iter()
        .map(|c| c.to_vec())
        .collect())
}

/// A client for the bootstrap: the server verified against `ca_pem`, the
/// credential as a bearer token.
fn bootstrap_client(
    server: &str,
    ca_pem: &str,
    credential: &str,
) -> Result<kube::Client, JoinError> {
    let mut config = verified_config(server, ca_pem)?;
    config.auth_info.token = Some(credential.to_string().into());
    kube::Client::try_from(config).map_err(|e| JoinError::Client(e.to_string()))
}

/// A client verifying the server against `ca_pem` and presenting the
/// certificate in `slot` (swapped on renewal, picked up at the next
/// connection).
pub fn client_with_cert(
    server: &str,
    ca_pem: &str,
    slot: Arc<CertSlot>,
) -> Result<kube::Client, JoinError> {
    let config = verified_config(server, ca_pem)?;
    let mut tls = config
        .rustls_client_config()
        .map_err(|e| JoinError::Client(e.to_string()))?;
    tls.client_auth_cert_resolver = slot;
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(Duration::from_secs(30)));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .wrap_connector(http);
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(https);
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .service(client);
    Ok(kube::Client::new(service, config.default_namespace))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_must_match_the_tokens_hash() {
        let pem = crate::agent::identity::test_pki::TestCa::new("ca-1")
            .cert_pem
            .clone();
        let token = JoinToken::parse(&JoinToken::format(pem.as_bytes(), "server:x")).unwrap();
        assert!(check_ca("https://s", &token, &pem).is_ok());
        let other = crate::agent::identity::test_pki::TestCa::new("ca-2")
            .cert_pem
            .clone();
        let err = check_ca("https://s", &token, &other).unwrap_err();
        assert!(matches!(err, JoinError::CaMismatch { .. }), "{err}");
        assert!(err.to_string().contains("nothing was sent"), "{err}");
        let bare = JoinToken::parse("abcdef.0123456789abcdef").unwrap();
        assert!(matches!(
            check_ca("https://s", &bare, &pem),
            Err(JoinError::NoCaHash)
        ));
    }

    #[test]
    fn the_node_password_is_made_once_and_kept_private() {
        let dir = tempfile::tempdir().unwrap();
        let first = node_password(dir.path()).unwrap();
        assert_eq!(first.len(), 48);
        assert_eq!(node_password(dir.path()).unwrap(), first);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(PASSWORD_FILE))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(node_password(other.path()).unwrap(), first);
    }
}
