//! The cluster's certificates: a CA, the API server's serving certificate, the
//! admin client certificate and the API server's client certificate for node
//! servers, generated on first start and reused afterwards — leaves renewed
//! when close to expiry or on request (`lifetime`) — and the rustls server
//! configuration built from them. Keys are written mode 0600 in a 0700
//! directory.

use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use skiff_common::files::{self, create_private_dir, read_optional};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

mod lifetime;
pub(crate) mod server_check;

pub use lifetime::{CertLifetimes, not_after};

/// Why the certificates could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate or key file could not be read or written.
    #[error(transparent)]
    File(#[from] files::FileError),
    /// A key or certificate could not be generated.
    #[error("cannot generate the {what}: {source}")]
    Generate {
        /// Which one, e.g. `CA key`.
        what: &'static str,
        /// rcgen's error.
        #[source]
        source: rcgen::Error,
    },
    /// A file holds no certificate or key of the expected kind.
    #[error("{path} holds no usable {what}")]
    BadPem {
        /// The file.
        path: PathBuf,
        /// What it should hold, e.g. `CA certificate`.
        what: &'static str,
    },
    /// rustls refused the TLS configuration.
    #[error("cannot build the TLS configuration: {0}")]
    Config(String),
}

/// The PEM-encoded certificates and keys of one cluster, as kept under
/// `DATA_DIR/tls/`.
#[derive(Clone)]
pub struct ClusterCerts {
    /// The directory the files are kept in.
    pub dir: PathBuf,
    /// The cluster CA's certificate, which clients trust the server by.
    pub ca_cert_pem: String,
    /// The CA's key: whoever holds it can sign any identity (the in-process
    /// node agent's serving certificate is signed with it).
    pub ca_key_pem: String,
    /// The API server's serving certificate.
    pub serving_cert_pem: String,
    /// The serving certificate's key.
    pub serving_key_pem: String,
    /// The admin's client certificate (`admin` in `system:masters`), for the admin kubeconfig.
    pub admin_cert_pem: String,
    /// The admin client certificate's key.
    pub admin_key_pem: String,
    /// The API server's client certificate towards node servers
    /// ([`crate::kubelet_client::KUBELET_CLIENT_USER`]).
    pub kubelet_client_cert_pem: String,
    /// The key of the client certificate towards node servers.
    pub kubelet_client_key_pem: String,
    /// The front-proxy CA, which only signs the aggregator's client
    /// certificate (extension API servers trust the identity headers of
    /// requests presenting a certificate from it).
    pub front_proxy_ca_cert_pem: String,
    /// The API server's client certificate towards extension API servers
    /// ([`FRONT_PROXY_CLIENT_USER`]).
    pub front_proxy_client_cert_pem: String,
    /// The key of the client certificate towards extension API servers.
    pub front_proxy_client_key_pem: String,
}

/// The name on the aggregator's front-proxy client certificate, which
/// extension API servers are told to accept (`requestheader-allowed-names`).
pub const FRONT_PROXY_CLIENT_USER: &str = "front-proxy-client";

impl std::fmt::Debug for ClusterCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterCerts")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// A certificate's file and its key's, which are written, read and
/// removed together.
#[derive(Debug, Clone, Copy)]
struct PemFiles {
    cert: &'static str,
    key: &'static str,
}

impl PemFiles {
    const fn new(cert: &'static str, key: &'static str) -> Self {
        Self { cert, key }
    }

    /// The certificate's and the key's paths in `dir`.
    fn paths(self, dir: &Path) -> (PathBuf, PathBuf) {
        (dir.join(self.cert), dir.join(self.key))
    }
}

const CA: PemFiles = PemFiles::new("ca.crt", "ca.key");
const SERVING: PemFiles = PemFiles::new("serving.crt", "serving.key");
const SERVING_SANS: &str = "serving.sans";
const ADMIN: PemFiles = PemFiles::new("admin.crt", "admin.key");
/// The user the admin kubeconfig's certificate names, as k3s names its
/// own (`kubectl auth whoami` shows it); its group `system:masters` is
/// what makes it cluster-admin.
pub const ADMIN_USER: &str = "system:admin";
const KUBELET_CLIENT: PemFiles = PemFiles::new("kubelet-client.crt", "kubelet-client.key");
const FRONT_PROXY_CA: PemFiles = PemFiles::new("front-proxy-ca.crt", "front-proxy-ca.key");
const FRONT_PROXY_CLIENT: PemFiles =
    PemFiles::new("front-proxy-client.crt", "front-proxy-client.key");

impl ClusterCerts {
    /// Loads the certificates under `data_dir/tls` with the default
    /// lifetimes, creating or renewing whatever is missing or due (see
    /// [`ClusterCerts::load_or_create_with`]).
    pub fn load_or_create(data_dir: &Path, sans: &[String]) -> Result<Self, TlsError> {
        Self::load_or_create_with(data_dir, sans, &CertLifetimes::default())
    }

    /// Loads the certificates under `data_dir/tls`, creating whatever is
    /// missing. A leaf (serving, admin, kubelet-client) within
    /// `lifetimes.renew_before` of its expiry is re-issued by the same CA;
    /// the serving certificate also when the wanted subject alternative
    /// names change, so a new `--tls-san` takes effect.
    pub fn load_or_create_with(
        data_dir: &Path,
        sans: &[String],
        lifetimes: &CertLifetimes,
    ) -> Result<Self, TlsError> {
        Self::prepare(data_dir, Some(sans), lifetimes, false)
    }

    /// Re-issues every leaf (serving, admin, kubelet-client) now, with the
    /// same CA and the serving certificate's recorded names, as k3s's
    /// `certificate rotate`. A running server presents the new ones from its
    /// next start; certificates handed out before stay valid until they
    /// expire, because the CA does not change.
    pub fn rotate_leaves(data_dir: &Path, lifetimes: &CertLifetimes) -> Result<Self, TlsError> {
        Self::prepare(data_dir, None, lifetimes, true)
    }

    /// `sans`: the serving certificate's wanted names (`None`: the recorded
    /// ones); `rotate`: re-issue every leaf whatever its expiry.
    fn prepare(
        data_dir: &Path,
        sans: Option<&[String]>,
        lifetimes: &CertLifetimes,
        rotate: bool,
    ) -> Result<Self, TlsError> {
        let dir = data_dir.join("tls");
        create_private_dir(&dir)?;

        let ca = CaFiles {
            dir: &dir,
            files: CA,
            signed: &[SERVING, ADMIN, KUBELET_CLIENT],
        };
        let (ca_cert_pem, ca_key_pem) = ca.load_or_create("skiff-ca", lifetimes.ca)?;
        if lifetime::renewal_due(&ca_cert_pem, lifetimes.renew_before) {
            tracing::warn!(
                path = %dir.join(CA.cert).display(),
                "the cluster CA expires within the renewal window; skiff does not rotate CAs"
            );
        }
        let issuer = ca.issuer(&ca_cert_pem, &ca_key_pem)?;
        let leaf = |files: PemFiles| Leaf {
            dir: &dir,
            files,
            renew_before: lifetimes.renew_before,
            rotate,
        };

        let recorded_sans = read_optional(&dir.join(SERVING_SANS))?;
        let sans: Vec<String> = match sans {
            Some(sans) => sans.to_vec(),
            None => recorded_sans
                .as_deref()
                .unwrap_or("localhost")
                .lines()
                .map(str::to_string)
                .collect(),
        };
        let wanted_sans = sans.join("\n");
        let sans_changed = recorded_sans.as_deref() != Some(wanted_sans.as_str());
        let (serving_cert_pem, serving_key_pem) = leaf(SERVING)
            .load_or_issue(sans_changed, || new_serving(&issuer, &sans, lifetimes.leaf))?;
        if sans_changed {
            write_public(&dir.join(SERVING_SANS), &wanted_sans)?;
        }

        let (admin_cert_pem, admin_key_pem) = leaf(ADMIN).load_or_issue(false, || {
            new_client(&issuer, ADMIN_USER, &["system:masters"], lifetimes.leaf)
        })?;

        // No group: what it may do on nodes comes from its own binding, not
        // from system:masters.
        let (kubelet_client_cert_pem, kubelet_client_key_pem) = leaf(KUBELET_CLIENT)
            .load_or_issue(false, || {
                new_client(
                    &issuer,
                    crate::kubelet_client::KUBELET_CLIENT_USER,
                    &[],
                    lifetimes.leaf,
                )
            })?;

        // A CA of its own, so that no certificate the cluster CA issues
        // (a user's, a node's) can carry identity headers to extension API
        // servers.
        let front_proxy_ca = CaFiles {
            dir: &dir,
            files: FRONT_PROXY_CA,
            signed: &[FRONT_PROXY_CLIENT],
        };
        let (front_proxy_ca_cert_pem, front_proxy_ca_key_pem) =
            front_proxy_ca.load_or_create("skiff-front-proxy-ca", lifetimes.ca)?;
        let front_proxy_issuer =
            front_proxy_ca.issuer(&front_proxy_ca_cert_pem, &front_proxy_ca_key_pem)?;
        let (front_proxy_client_cert_pem, front_proxy_client_key_pem) = leaf(FRONT_PROXY_CLIENT)
            .load_or_issue(false, || {
                new_client(
                    &front_proxy_issuer,
                    FRONT_PROXY_CLIENT_USER,
                    &[],
                    lifetimes.leaf,
                )
            })?;

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
            front_proxy_ca_cert_pem,
            front_proxy_client_cert_pem,
            front_proxy_client_key_pem,
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

    /// The aggregator's TLS client towards extension API servers.
    pub fn front_proxy(
        &self,
    ) -> Result<crate::aggregator::FrontProxyTls, crate::aggregator::FrontProxyError> {
        crate::aggregator::FrontProxyTls::from_pem(
            &self.front_proxy_ca_cert_pem,
            &self.front_proxy_client_cert_pem,
            &self.front_proxy_client_key_pem,
        )
    }

    /// A rustls server configuration that presents the serving certificate,
    /// speaks HTTP/2 and HTTP/1.1, and asks for (but does not require) a client
    /// certificate signed by the cluster CA, so bearer tokens and anonymous
    /// health checks still work.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for ca in parse_certs(&self.ca_cert_pem, &self.dir.join(CA.cert))? {
            roots
                .add(ca)
                .map_err(|e| TlsError::Config(format!("CA certificate rejected: {e}")))?;
        }
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?;
        let chain = parse_certs(&self.serving_cert_pem, &self.dir.join(SERVING.cert))?;
        let key = parse_key(&self.serving_key_pem, &self.dir.join(SERVING.key))?;
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

/// One CA's files, and the leaves it signed.
struct CaFiles<'a> {
    dir: &'a Path,
    files: PemFiles,
    /// The leaves this CA signs: a new CA invalidates everything the one it
    /// replaces signed, so their files go with it.
    signed: &'a [PemFiles],
}

impl CaFiles<'_> {
    /// The stored certificate and key, or a new self-signed CA named `name`
    /// when either is missing (skiff never rotates a CA it has).
    fn load_or_create(
        &self,
        name: &str,
        lifetime: std::time::Duration,
    ) -> Result<(String, String), TlsError> {
        let (cert_path, key_path) = self.files.paths(self.dir);
        if let (Some(cert), Some(key)) = (read_optional(&cert_path)?, read_optional(&key_path)?) {
            return Ok((cert, key));
        }
        let (cert, key) = new_ca(name, lifetime)?;
        write_private(&key_path, &key)?;
        write_public(&cert_path, &cert)?;
        for stale in self.signed.iter().flat_map(|leaf| [leaf.cert, leaf.key]) {
            let _ = fs::remove_file(self.dir.join(stale));
        }
        Ok((cert, key))
    }

    /// What signs with this CA's certificate and key.
    fn issuer(&self, cert_pem: &str, key_pem: &str) -> Result<Issuer<'static, KeyPair>, TlsError> {
        let key = KeyPair::from_pem(key_pem).map_err(|_| TlsError::BadPem {
            path: self.dir.join(self.files.key),
            what: "private key",
        })?;
        Issuer::from_ca_cert_pem(cert_pem, key).map_err(|_| TlsError::BadPem {
            path: self.dir.join(self.files.cert),
            what: "CA certificate",
        })
    }
}

/// One leaf certificate's files and when it is re-issued.
struct Leaf<'a> {
    dir: &'a Path,
    files: PemFiles,
    renew_before: std::time::Duration,
    /// Re-issue whatever the expiry (`skiff certificate rotate`).
    rotate: bool,
}

impl Leaf<'_> {
    /// The stored certificate and key, or new ones from `issue` when either
    /// is missing, the certificate is due for renewal, or `reissue`.
    fn load_or_issue(
        &self,
        reissue: bool,
        issue: impl FnOnce() -> Result<(String, String), TlsError>,
    ) -> Result<(String, String), TlsError> {
        let (cert_path, key_path) = self.files.paths(self.dir);
        if let (Some(cert), Some(key)) = (read_optional(&cert_path)?, read_optional(&key_path)?) {
            let due = lifetime::renewal_due(&cert, self.renew_before);
            if !(reissue || self.rotate || due) {
                return Ok((cert, key));
            }
            tracing::info!(
                certificate = %cert_path.display(),
                expires = lifetime::not_after(&cert).unwrap_or_default(),
                due,
                "re-issuing certificate"
            );
        }
        let (cert, key) = issue()?;
        write_private(&key_path, &key)?;
        write_public(&cert_path, &cert)?;
        Ok((cert, key))
    }
}

/// The names a serving certificate should carry: localhost, the loopback
/// addresses, the `kubernetes` Service's names and its cluster IP
/// `api_service_ip` (where in-cluster clients reach the API, checking the
/// certificate names that address), the host name, every address of this
/// host, and the extra names.
pub fn default_sans(api_service_ip: Option<IpAddr>, extra: &[String]) -> Vec<String> {
    let mut sans = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
        "kubernetes.default.svc.cluster.local".to_string(),
    ];
    sans.extend(api_service_ip.map(|ip| ip.to_string()));
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

/// A self-signed CA named `name`.
fn new_ca(name: &str, lifetime: std::time::Duration) -> Result<(String, String), TlsError> {
    let key = KeyPair::generate().map_err(|source| TlsError::Generate {
        what: "CA key",
        source,
    })?;
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    lifetime::set_validity(&mut params, lifetime);
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
    lifetime: std::time::Duration,
) -> Result<(String, String), TlsError> {
    let mut params =
        CertificateParams::new(sans.to_vec()).map_err(|source| TlsError::Generate {
            what: "serving certificate names",
            source,
        })?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    sign_leaf(
        params,
        ExtendedKeyUsagePurpose::ServerAuth,
        issuer,
        lifetime,
        ["serving key", "serving certificate"],
    )
}

/// Issues a client certificate for `user` in `groups` (the subject's O fields),
/// which is how Kubernetes reads identities from certificates.
pub fn new_client(
    issuer: &Issuer<'_, KeyPair>,
    user: &str,
    groups: &[&str],
    lifetime: std::time::Duration,
) -> Result<(String, String), TlsError> {
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, user);
    for group in groups {
        params
            .distinguished_name
            .push(DnType::OrganizationName, *group);
    }
    sign_leaf(
        params,
        ExtendedKeyUsagePurpose::ClientAuth,
        issuer,
        lifetime,
        ["client key", "client certificate"],
    )
}

/// A leaf certificate for `usage` from `params` (its names and subject),
/// signed by `issuer` with a new key: `lifetime`, the authority key
/// identifier and the key usages every leaf here carries. `what` names the
/// key and the certificate in errors.
fn sign_leaf(
    mut params: CertificateParams,
    usage: ExtendedKeyUsagePurpose,
    issuer: &Issuer<'_, KeyPair>,
    lifetime: std::time::Duration,
    [key_what, cert_what]: [&'static str; 2],
) -> Result<(String, String), TlsError> {
    let key = KeyPair::generate().map_err(|source| TlsError::Generate {
        what: key_what,
        source,
    })?;
    lifetime::set_validity(&mut params, lifetime);
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    let cert = params
        .signed_by(&key, issuer)
        .map_err(|source| TlsError::Generate {
            what: cert_what,
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

/// The roots of a `caBundle` (PEM), as webhooks and APIServices give
/// them: every certificate in it that parses; `None` when none does.
pub(crate) fn bundle_roots(bundle: &[u8]) -> Option<rustls::RootCertStore> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut &bundle[..])
        .filter_map(Result::ok)
        .collect();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    (added > 0).then_some(roots)
}

/// Writes a file readable only by its owner (keys, kubeconfigs), whole or
/// not at all.
pub fn write_private(path: &Path, contents: &str) -> Result<(), TlsError> {
    Ok(files::write_private(path, contents.as_bytes())?)
}

fn write_public(path: &Path, contents: &str) -> Result<(), TlsError> {
    Ok(files::write_public(path, contents.as_bytes())?)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn keys_are_private_and_the_kubelet_client_is_not_a_master() {
        let dir = tempfile::tempdir().unwrap();
        let certs = ClusterCerts::load_or_create(dir.path(), &["localhost".into()]).unwrap();
        assert_eq!(mode(&certs.dir), 0o700);
        for key in [CA, SERVING, ADMIN, KUBELET_CLIENT].map(|files| files.key) {
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

    fn serial(pem: &str) -> String {
        let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        block.parse_x509().unwrap().raw_serial_as_string()
    }

    fn days_left(pem: &str) -> i64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        (not_after(pem).unwrap() - now) / 86_400
    }

    fn leaves(certs: &ClusterCerts) -> [String; 3] {
        [
            serial(&certs.serving_cert_pem),
            serial(&certs.admin_cert_pem),
            serial(&certs.kubelet_client_cert_pem),
        ]
    }

    #[test]
    fn a_new_ca_reissues_the_leaves_the_old_one_signed() {
        let dir = tempfile::tempdir().unwrap();
        let certs = ClusterCerts::load_or_create(dir.path(), &["localhost".into()]).unwrap();
        fs::remove_file(certs.dir.join(CA.key)).unwrap();
        let renewed = ClusterCerts::load_or_create(dir.path(), &["localhost".into()]).unwrap();
        assert_ne!(renewed.ca_cert_pem, certs.ca_cert_pem);
        let (old, new) = (leaves(&certs), leaves(&renewed));
        assert!(old.iter().zip(&new).all(|(old, new)| old != new), "{new:?}");
        // The front proxy's CA is apart: it and its client stay.
        assert_eq!(
            renewed.front_proxy_client_cert_pem,
            certs.front_proxy_client_cert_pem
        );
        fs::remove_file(certs.dir.join(FRONT_PROXY_CA.cert)).unwrap();
        let again = ClusterCerts::load_or_create(dir.path(), &["localhost".into()]).unwrap();
        assert_ne!(
            again.front_proxy_ca_cert_pem,
            renewed.front_proxy_ca_cert_pem
        );
        assert_ne!(
            serial(&again.front_proxy_client_cert_pem),
            serial(&renewed.front_proxy_client_cert_pem)
        );
        assert_eq!(leaves(&again), new);
    }

    #[test]
    fn the_ca_lives_ten_years_and_leaves_one() {
        let dir = tempfile::tempdir().unwrap();
        let certs = ClusterCerts::load_or_create(dir.path(), &["localhost".into()]).unwrap();
        assert!((3649..=3650).contains(&days_left(&certs.ca_cert_pem)));
        for pem in [
            &certs.serving_cert_pem,
            &certs.admin_cert_pem,
            &certs.kubelet_client_cert_pem,
        ] {
            assert!((364..=365).contains(&days_left(pem)));
        }
    }

    #[test]
    fn leaves_close_to_expiry_are_renewed_by_the_same_ca() {
        let dir = tempfile::tempdir().unwrap();
        let sans = ["localhost".to_string()];
        // 100 days: inside the 120-day window from the start.
        let short = CertLifetimes::with_leaf_days(100);
        let first = ClusterCerts::load_or_create_with(dir.path(), &sans, &short).unwrap();
        assert!((99..=100).contains(&days_left(&first.admin_cert_pem)));
        let renewed = ClusterCerts::load_or_create(dir.path(), &sans).unwrap();
        assert_eq!(renewed.ca_cert_pem, first.ca_cert_pem);
        let (before, after) = (leaves(&first), leaves(&renewed));
        for (old, new) in before.iter().zip(after.iter()) {
            assert_ne!(old, new, "every leaf is re-issued");
        }
        assert!((364..=365).contains(&days_left(&renewed.admin_cert_pem)));
        // The renewed admin certificate is still the admin, signed by the CA
        // the server trusts; the old one would still be accepted too.
        for pem in [&first.admin_cert_pem, &renewed.admin_cert_pem] {
            let der = parse_certs(pem, Path::new("x")).unwrap();
            let user = crate::authn::user_from_certificate(&der[0]).unwrap();
            assert_eq!(user.name, ADMIN_USER);
        }
        assert!(renewed.server_config().is_ok());
        // Far from expiry now: the next start keeps them.
        let kept = ClusterCerts::load_or_create(dir.path(), &sans).unwrap();
        assert_eq!(leaves(&kept), after);
    }

    #[test]
    fn rotation_reissues_every_leaf_with_the_recorded_names_and_keeps_the_ca() {
        let dir = tempfile::tempdir().unwrap();
        let sans = ["localhost".to_string(), "10.1.2.3".to_string()];
        let first = ClusterCerts::load_or_create(dir.path(), &sans).unwrap();
        let rotated = ClusterCerts::rotate_leaves(dir.path(), &CertLifetimes::default()).unwrap();
        assert_eq!(rotated.ca_cert_pem, first.ca_cert_pem);
        assert_eq!(rotated.ca_key_pem, first.ca_key_pem);
        for (old, new) in leaves(&first).iter().zip(leaves(&rotated).iter()) {
            assert_ne!(old, new);
        }
        assert_ne!(rotated.admin_key_pem, first.admin_key_pem);
        let (_, block) =
            x509_parser::pem::parse_x509_pem(rotated.serving_cert_pem.as_bytes()).unwrap();
        let cert = block.parse_x509().unwrap();
        let names: Vec<String> = cert
            .subject_alternative_name()
            .unwrap()
            .unwrap()
            .value
            .general_names
            .iter()
            .map(|name| match name {
                x509_parser::extensions::GeneralName::DNSName(dns) => dns.to_string(),
                x509_parser::extensions::GeneralName::IPAddress(ip) => format!("{ip:?}"),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(names, ["localhost", "[10, 1, 2, 3]"]);
        // What was written is what the next start loads.
        let loaded = ClusterCerts::load_or_create(dir.path(), &sans).unwrap();
        assert_eq!(leaves(&loaded), leaves(&rotated));
    }
}
