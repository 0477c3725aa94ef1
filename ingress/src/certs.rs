//! Certificates by SNI: the hosts of served Ingresses' `spec.tls` get the
//! certificate of the `kubernetes.io/tls` Secret that entry names (in the
//! Ingress's namespace); every other name, and clients without SNI, get a
//! self-signed default certificate made at start (as Traefik's default).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::networking::v1::Ingress;
use parking_lot::RwLock;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use skiff_informer::Cache;

/// The common name of the default certificate.
pub(crate) const DEFAULT_CERT_NAME: &str = "skiff ingress default certificate";

/// Why a certificate could not be made or loaded.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// Generating the default certificate failed.
    #[error("generating the default certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The PEM data held no certificate or no key.
    #[error("{0}")]
    Pem(String),
    /// The key is of a kind rustls cannot sign with.
    #[error("unsupported private key: {0}")]
    Key(#[from] rustls::Error),
}

/// Builds a rustls key from a PEM certificate chain and private key.
pub(crate) fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, CertError> {
    let chain: Vec<_> = rustls_pemfile::certs(&mut &cert_pem[..])
        .collect::<Result<_, _>>()
        .map_err(|e| CertError::Pem(format!("reading the certificate: {e}")))?;
    if chain.is_empty() {
        return Err(CertError::Pem("no certificate in tls.crt".into()));
    }
    let key = rustls_pemfile::private_key(&mut &key_pem[..])
        .map_err(|e| CertError::Pem(format!("reading the key: {e}")))?
        .ok_or_else(|| CertError::Pem("no private key in tls.key".into()))?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&key)?;
    Ok(CertifiedKey::new(chain, signer))
}

/// A self-signed certificate for `DEFAULT_CERT_NAME`.
pub(crate) fn default_certificate() -> Result<CertifiedKey, CertError> {
    let (cert, key) = self_signed(DEFAULT_CERT_NAME, Vec::new())?;
    certified_key(cert.pem().as_bytes(), key.serialize_pem().as_bytes())
}

/// A self-signed certificate with common name `cn` and the subject
/// alternative names `sans`, and its new key.
fn self_signed(
    cn: &str,
    sans: Vec<String>,
) -> Result<(rcgen::Certificate, rcgen::KeyPair), rcgen::Error> {
    let mut params = rcgen::CertificateParams::new(sans)?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    let key = rcgen::KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok((cert, key))
}

/// Host name (or `*.suffix`) → certificate.
type CertMap = HashMap<String, Arc<CertifiedKey>>;

/// The SNI resolver the HTTPS listener asks.
#[derive(Debug)]
pub struct CertStore {
    default: Arc<CertifiedKey>,
    by_host: RwLock<CertMap>,
}

impl CertStore {
    /// A store holding only the default certificate.
    pub fn new(default: CertifiedKey) -> Self {
        Self {
            default: Arc::new(default),
            by_host: RwLock::new(HashMap::new()),
        }
    }

    /// Replaces the host certificates with those `ingresses` name. A Secret
    /// that is missing, of another type or unreadable leaves its hosts on
    /// the default certificate (logged); the oldest Ingress wins a host.
    pub fn update<'a>(
        &self,
        ingresses: impl IntoIterator<Item = &'a Ingress>,
        secrets: &Cache<Secret>,
    ) {
        let mut map = CertMap::new();
        let mut loaded: HashMap<(String, String), Option<Arc<CertifiedKey>>> = HashMap::new();
        let mut ordered: Vec<&Ingress> = ingresses.into_iter().collect();
        ordered.sort_by_key(|i| i.metadata.creation_timestamp.clone().map(|t| t.0));
        for ingress in ordered {
            let namespace = ingress.metadata.namespace.clone().unwrap_or_default();
            for tls in ingress
                .spec
                .as_ref()
                .and_then(|s| s.tls.as_ref())
                .into_iter()
                .flatten()
            {
                let Some(secret_name) = tls.secret_name.clone() else {
                    continue;
                };
                let key = (namespace.clone(), secret_name);
                let cert = loaded
                    .entry(key.clone())
                    .or_insert_with(|| load_secret(secrets, &key.0, &key.1))
                    .clone();
                let Some(cert) = cert else { continue };
                for host in tls.hosts.iter().flatten() {
                    map.entry(host.to_ascii_lowercase())
                        .or_insert_with(|| cert.clone());
                }
            }
        }
        *self.by_host.write() = map;
    }

    /// The certificate for `server_name` (exact, then `*.` wildcard), or the
    /// default.
    pub fn lookup(&self, server_name: Option<&str>) -> Arc<CertifiedKey> {
        let Some(name) = server_name.map(str::to_ascii_lowercase) else {
            return self.default.clone();
        };
        let map = self.by_host.read();
        let wildcard = name
            .split_once('.')
            .and_then(|(_, suffix)| map.get(&format!("*.{suffix}")));
        map.get(&name)
            .or(wildcard)
            .cloned()
            .unwrap_or_else(|| self.default.clone())
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.lookup(hello.server_name()))
    }
}

fn load_secret(secrets: &Cache<Secret>, namespace: &str, name: &str) -> Option<Arc<CertifiedKey>> {
    let Some(secret) = secrets.get(namespace, name) else {
        tracing::warn!(%namespace, %name, "TLS Secret not found; serving the default certificate");
        return None;
    };
    if secret.type_.as_deref() != Some("kubernetes.io/tls") {
        tracing::warn!(%namespace, %name, "Secret is not of type kubernetes.io/tls; serving the default certificate");
        return None;
    }
    let data = secret.data.as_ref()?;
    let (Some(cert), Some(key)) = (data.get("tls.crt"), data.get("tls.key")) else {
        tracing::warn!(%namespace, %name, "TLS Secret lacks tls.crt or tls.key");
        return None;
    };
    match certified_key(&cert.0, &key.0) {
        Ok(cert) => Some(Arc::new(cert)),
        Err(error) => {
            tracing::warn!(%namespace, %name, %error, "TLS Secret unusable; serving the default certificate");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;
    use serde_json::json;

    use super::*;

    fn secret(name: &str, cn: &str) -> Secret {
        let (cert, key) = self_signed(cn, vec![cn.to_owned()]).expect("a certificate");
        let mut secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "type": "kubernetes.io/tls",
        }))
        .expect("Secret");
        secret.data = Some(
            [
                ("tls.crt".to_owned(), ByteString(cert.pem().into_bytes())),
                (
                    "tls.key".to_owned(),
                    ByteString(key.serialize_pem().into_bytes()),
                ),
            ]
            .into(),
        );
        secret
    }

    fn tls_ingress(hosts: &[&str], secret: &str) -> Ingress {
        serde_json::from_value(json!({
            "metadata": {"name": "i", "namespace": "ns"},
            "spec": {"tls": [{"hosts": hosts, "secretName": secret}]},
        }))
        .expect("Ingress")
    }

    #[test]
    fn hosts_get_their_secret_and_others_the_default() {
        let secrets = Cache::new();
        secrets.insert(Arc::new(secret("secure", "secure.example")));
        let store = CertStore::new(default_certificate().expect("default"));
        let default = store.lookup(None);
        store.update(
            &[
                tls_ingress(&["secure.example", "*.wild.example"], "secure"),
                tls_ingress(&["missing.example"], "missing"),
            ],
            &secrets,
        );
        let secure = store.lookup(Some("SECURE.example"));
        assert!(!Arc::ptr_eq(&secure, &default));
        assert!(Arc::ptr_eq(&store.lookup(Some("a.wild.example")), &secure));
        assert!(Arc::ptr_eq(
            &store.lookup(Some("missing.example")),
            &default
        ));
        assert!(Arc::ptr_eq(&store.lookup(Some("other.example")), &default));
        store.update(&[], &secrets);
        assert!(Arc::ptr_eq(&store.lookup(Some("secure.example")), &default));
    }
}
