//! The cluster's certificates: a CA, the API server's serving certificate, the
//! admin client certificate and the API server's client certificate for node
//! servers, generated on first start and reused afterwards, and the rustls
//! server configuration built from them. Keys are written mode 0600 in a
//! 0700 directory.

use std::fs;
use std::io;
use std::net::IpAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

/// Why the certificates could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot {action} {path}: {source}")]
    File {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot generate the {what}: {source}")]
    Generate {
        what: &'static str,
        #[source]
        source: rcgen::Error,
    },
    #[error("{path} holds no usable {what}")]
    BadPem { path: PathBuf, what: &'static str },
    #[error("cannot build the TLS configuration: {0}")]
    Config(String),
}

/// The PEM-encoded certificates and keys of one cluster, as kept under
/// `DATA_DIR/tls/`.
#[derive(Clone)]
pub struct ClusterCerts {
    pub dir: PathBuf,
    pub ca_cert_pem: String,
    /// The CA's key: whoever holds it can sign any identity (the in-process
    /// node agent's serving certificate is signed with it).
    pub ca_key_pem: String,
    pub serving_cert_pem: String,
    pub serving_key_pem: String,
    pub admin_cert_pem: String,
    pub admin_key_pem: String,
    /// The API server's client certificate towards node servers
    /// ([`crate::kubelet_client::KUBELET_CLIENT_USER`]).
    pub kubelet_client_cert_pem: String,
    pub kubelet_client_key_pem: String,
}

impl std::fmt::Debug for ClusterCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterCerts")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

const CA_CERT: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const SERVING_CERT: &str = "serving.crt";
const SERVING_KEY: &str = "serving.key";
const SERVING_SANS: &str = "serving.sans";
const ADMIN_CERT: &str = "admin.crt";
const ADMIN_KEY: &str = "admin.key";
const KUBELET_CLIENT_CERT: &str = "kubelet-client.crt";
const KUBELET_CLIENT_KEY: &str = "kubelet-client.key";

impl ClusterCerts {
    /// Loads the certificates under `data_dir/tls`, creating whatever is missing.
    /// The serving certificate is re-issued (by the same CA) when the wanted
    /// subject alternative names change, so a new `--tls-san` takes effect.
    pub fn load_or_create(data_dir: &Path, sans: &[String]) -> Result<Self, TlsError> {
        let dir = data_dir.join("tls");
        create_private_dir(&dir)?;

        let (ca_cert_pem, ca_key_pem) = match (
            read_optional(&dir.join(CA_CERT))?,
            read_optional(&dir.join(CA_KEY))?,
        ) {
            (Some(cert), Some(key)) => (cert, key),
            _ => {
                let (cert, key) = new_ca()?;
                write_private(&dir.join(CA_KEY), &key)?;
                write_public(&dir.join(CA_CERT), &cert)?;
                // A new CA invalidates everything it signed before.
                for stale in [
                    SERVING_CERT,
                    SERVING_KEY,
                    SERVING_SANS,
                    ADMIN_CERT,
                    ADMIN_KEY,
                    KUBELET_CLIENT_CERT,
                    KUBELET_CLIENT_KEY,
                ] {
                    let _ = fs::remove_file(dir.join(stale));
                }
                (cert, key)
            }
        };
        let ca_key = KeyPair::from_pem(&ca_key_pem).map_err(|_| TlsError::BadPem {
            path: dir.join(CA_KEY),
            what: "private key",
        })?;
        let issuer =
            Issuer::from_ca_cert_pem(&ca_cert_pem, ca_key).map_err(|_| TlsError::BadPem {
                path: dir.join(CA_CERT),
                what: "CA certificate",
            })?;

        let wanted_sans = sans.join("\n");
        let (serving_cert_pem, serving_key_pem) = match (
            read_optional(&dir.join(SERVING_CERT))?,
            read_optional(&dir.join(SERVING_KEY))?,
            read_optional(&dir.join(SERVING_SANS))?,
        ) {
            (Some(cert), Some(key), Some(old)) if old == wanted_sans => (cert, key),
            _ => {
                let (cert, key) = new_serving(&issuer, sans)?;
                write_private(&dir.join(SERVING_KEY), &key)?;
                write_public(&dir.join(SERVING_CERT), &cert)?;
                write_public(&dir.join(SERVING_SANS), &wanted_sans)?;
                (cert, key)
            }
        };

        let (admin_cert_pem, admin_key_pem) = match (
            read_optional(&dir.join(ADMIN_CERT))?,
            read_optional(&dir.join(ADMIN_KEY))?,
        ) {
            (Some(cert), Some(key)) => (cert, key),
            _ => {
                let (cert, key) = new_client(&issuer, "admin", &["system:masters"])?;
                write_private(&dir.join(ADMIN_KEY), &key)?;
                write_public(&dir.join(ADMIN_CERT), &cert)?;
                (cert, key)
            }
        };

        // No group: what it may do on nodes comes from its own binding, not
        // from system:masters.
        let (kubelet_client_cert_pem, kubelet_client_key_pem) = match (
            read_optional(&dir.join(KUBELET_CLIENT_CERT))?,
            read_optional(&dir.join(KUBELET_CLIENT_KEY))?,
        ) {
            (Some(cert), Some(key)) => (cert, key),
            _ => {
                let (cert, key) =
                    new_client(&issuer, crate::kubelet_client::KUBELET_CLIENT_USER, &[])?;
                write_private(&dir.join(KUBELET_CLIENT_KEY), &key)?;
                write_public(&dir.join(KUBELET_CLIENT_CERT), &cert)?;
                (cert, key)
            }
        };

        Ok(Self {
            dir,
            ca_cert_pem,
            ca_key_pem,
            serving_cert_pem,
            serving_key_pem,
            admin_cert_pem,
            admin_key_pem,
            kubelet_client_cert_pem,
            kubelet_client_key_pem,
        })
    }

    /// The API server's TLS client towards node servers.
    pub fn kubelet_client(
        &self,
    ) -> Result<crate::kubelet_client::KubeletClientTls, crate::kubelet_client::KubeletClientError>
    {
        crate::kubelet_client::KubeletClientTls::from_pem(
            &self.ca_cert_pem,
            &self.kubelet_client_cert_pem,
            &self.kubelet_client_key_pem,
        )
    }

    /// A rustls server configuration that presents the serving certificate,
    /// speaks HTTP/2 and HTTP/1.1, and asks for (but does not require) a client
    /// certificate signed by the cluster CA, so bearer tokens and anonymous
    /// health checks still work.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for ca in parse_certs(&self.ca_cert_pem, &self.dir.join(CA_CERT))? {
            roots
                .add(ca)
                .map_err(|e| TlsError::Config(format!("CA certificate rejected: {e}")))?;
        }
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?;
        let chain = parse_certs(&self.serving_cert_pem, &self.dir.join(SERVING_CERT))?;
        let key = parse_key(&self.serving_key_pem, &self.dir.join(SERVING_KEY))?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(|e| TlsError::Config(e.to_string()))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// A kubeconfig that reaches `server_url` as the admin user.
    pub fn admin_kubeconfig(&self, server_url: &str) -> String {
        use base64::Engine as _;
        let encode = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: skiff\n  cluster:\n    server: {server_url}\n    certificate-authority-data: {ca}\nusers:\n- name: admin\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\ncontexts:\n- name: skiff\n  context:\n    cluster: skiff\n    user: admin\n    namespace: default\ncurrent-context: skiff\npreferences: {{}}\n",
            ca = encode(&self.ca_cert_pem),
            cert = encode(&self.admin_cert_pem),
            key = encode(&self.admin_key_pem),
        )
    }
}

/// The names a serving certificate should carry: localhost, the loopback
/// addresses, the host name, every address of this host, and the extra names.
pub fn default_sans(extra: &[String]) -> Vec<String> {
    let mut sans = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
        "kubernetes.default.svc.cluster.local".to_string(),
    ];
    if let Ok(host) = fs::read_to_string("/proc/sys/kernel/hostname") {
        let host = host.trim();
        if !host.is_empty() {
            sans.push(host.to_string());
        }
    }
    if let Ok(interfaces) = if_addrs::get_if_addrs() {
        for iface in interfaces {
            let ip: IpAddr = iface.ip();
            // Link-local IPv6 addresses need a scope and are useless in a SAN.
            if matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80) {
                continue;
            }
            sans.push(ip.to_string());
        }
    }
    sans.extend(extra.iter().cloned());
    let mut seen = std::collections::HashSet::new();
    sans.retain(|s| seen.insert(s.clone()));
    sans
}

fn new_ca() -> Result<(String, String), TlsError> {
    let key = KeyPair::generate().map_err(|source| TlsError::Generate {
        what: "CA key",
        source,
    })?;
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, "skiff-ca");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params
        .self_signed(&key)
        .map_err(|source| TlsError::Generate {
            what: "CA certificate",
            source,
        })?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn new_serving(
    issuer: &Issuer<'_, KeyPair>,
    sans: &[String],
) -> Result<(String, String), TlsError> {
    let key = KeyPair::generate().map_err(|source| TlsError::Generate {
        what: "serving key",
        source,
    })?;
    let mut params =
        CertificateParams::new(sans.to_vec()).map_err(|source| TlsError::Generate {
            what: "serving certificate names",
            source,
        })?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params
        .signed_by(&key, issuer)
        .map_err(|source| TlsError::Generate {
            what: "serving certificate",
            source,
        })?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Issues a client certificate for `user` in `groups` (the subject's O fields),
/// which is how Kubernetes reads identities from certificates.
pub fn new_client(
    issuer: &Issuer<'_, KeyPair>,
    user: &str,
    groups: &[&str],
) -> Result<(String, String), TlsError> {
    let key = KeyPair::generate().map_err(|source| TlsError::Generate {
        what: "client key",
        source,
    })?;
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, user);
    for group in groups {
        params
            .distinguished_name
            .push(DnType::OrganizationName, *group);
    }
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params
        .signed_by(&key, issuer)
        .map_err(|source| TlsError::Generate {
            what: "client certificate",
            source,
        })?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn parse_certs(pem: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|_| TlsError::BadPem {
            path: path.to_path_buf(),
            what: "certificate",
        })?;
    if certs.is_empty() {
        return Err(TlsError::BadPem {
            path: path.to_path_buf(),
            what: "certificate",
        });
    }
    Ok(certs)
}

fn parse_key(pem: &str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    rustls_pemfile::private_key(&mut pem.as_bytes())
        .ok()
        .flatten()
        .ok_or_else(|| TlsError::BadPem {
            path: path.to_path_buf(),
            what: "private key",
        })
}

fn read_optional(path: &Path) -> Result<Option<String>, TlsError> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(TlsError::File {
            action: "read",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Creates `dir` (and its parents) and makes it private to its owner.
pub fn create_private_dir(dir: &Path) -> Result<(), TlsError> {
    let err = |action, source| TlsError::File {
        action,
        path: dir.to_path_buf(),
        source,
    };
    fs::create_dir_all(dir).map_err(|e| err("create", e))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(|e| err("chmod", e))
}

/// Writes a file readable only by its owner (keys, kubeconfigs).
pub fn write_private(path: &Path, contents: &str) -> Result<(), TlsError> {
    write_mode(path, contents, 0o600)
}

fn write_public(path: &Path, contents: &str) -> Result<(), TlsError> {
    write_mode(path, contents, 0o644)
}

/// Writes through a temporary file and a rename, so a crash never leaves a
/// half-written certificate behind.
fn write_mode(path: &Path, contents: &str, mode: u32) -> Result<(), TlsError> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let err = |action, source| TlsError::File {
        action,
        path: path.to_path_buf(),
        source,
    };
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(|e| err("create", e))?;
    file.write_all(contents.as_bytes())
        .and_then(|_| file.sync_all())
        .map_err(|e| err("write", e))?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(mode)).map_err(|e| err("chmod", e))?;
    fs::rename(&tmp, path).map_err(|e| err("rename", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn keys_are_private_and_the_kubelet_client_is_not_a_master() {
        let dir = tempfile::tempdir().unwrap();
        let certs = ClusterCerts::load_or_create(dir.path(), &["localhost".into()]).unwrap();
        assert_eq!(mode(&certs.dir), 0o700);
        for key in [CA_KEY, SERVING_KEY, ADMIN_KEY, KUBELET_CLIENT_KEY] {
            assert_eq!(mode(&certs.dir.join(key)), 0o600, "{key}");
        }
        let der = parse_certs(&certs.kubelet_client_cert_pem, Path::new("x")).unwrap();
        let user = crate::authn::user_from_certificate(&der[0]).unwrap();
        assert_eq!(user.name, "kube-apiserver-kubelet-client");
        assert_eq!(user.groups, vec!["system:authenticated".to_string()]);
        // Reloading keeps the same certificates.
        let again = ClusterCerts::load_or_create(dir.path(), &["localhost".into()]).unwrap();
        assert_eq!(again.kubelet_client_cert_pem, certs.kubelet_client_cert_pem);
        assert!(!format!("{certs:?}").contains("PRIVATE KEY"));
    }
}
