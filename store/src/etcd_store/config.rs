//! How an [`EtcdStore`](super::EtcdStore) reaches its etcd cluster: the
//! endpoints, TLS files, timeouts and how much history it keeps.

use std::path::{Path, PathBuf};
use std::time::Duration;

use etcd_client::{Certificate, ConnectOptions, Identity, TlsOptions};

use crate::retention::CompactionPolicy;

/// A configuration the etcd client cannot be built from.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `--datastore-endpoint` named nothing.
    #[error("no etcd endpoint given")]
    NoEndpoint,
    /// An endpoint that is not an http(s) URL.
    #[error("etcd endpoint {0:?} is not an http:// or https:// URL")]
    Scheme(String),
    /// Some endpoints are http://, others https://.
    #[error("etcd endpoints mix http:// and https:// ({0}); one cluster is reached one way")]
    MixedSchemes(String),
    /// https:// endpoints without a CA to verify them with.
    #[error("https etcd endpoints need a CA file to verify the servers (--datastore-cafile)")]
    MissingCa,
    /// TLS files given for http:// endpoints.
    #[error(
        "the CA, certificate and key files are only used with https:// endpoints, but {0} is http://"
    )]
    TlsWithoutHttps(String),
    /// A client certificate without its key, or the other way round.
    #[error(
        "a client certificate needs its key and a key its certificate (--datastore-certfile and --datastore-keyfile)"
    )]
    HalfIdentity,
    /// A TLS file could not be read.
    #[error("reading the etcd {what} {path}: {source}")]
    Read {
        /// Which file: "CA file", "certificate" or "key".
        what: &'static str,
        /// The file's path as given.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
}

/// Where the etcd cluster is and how to talk to it.
#[derive(Debug, Clone)]
pub struct EtcdConfig {
    pub(crate) endpoints: Vec<String>,
    pub(crate) ca_file: Option<PathBuf>,
    pub(crate) cert_file: Option<PathBuf>,
    pub(crate) key_file: Option<PathBuf>,
    pub(crate) connect_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) progress_interval: Duration,
    pub(crate) compaction: Option<CompactionPolicy>,
}

impl EtcdConfig {
    /// Endpoints of one etcd cluster (`http://host:port` or `https://…`),
    /// with the default timeouts and compaction policy.
    pub fn new<S: Into<String>>(endpoints: impl IntoIterator<Item = S>) -> Self {
        Self {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            ca_file: None,
            cert_file: None,
            key_file: None,
            connect_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(15),
            progress_interval: Duration::from_millis(500),
            compaction: Some(CompactionPolicy::default()),
        }
    }

    /// The CA bundle (PEM) that signed the etcd servers' certificates.
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }

    /// The client certificate and its key (PEM) presented to etcd.
    pub fn client_identity(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.cert_file = Some(cert.into());
        self.key_file = Some(key.into());
        self
    }

    /// Sets the certificate and key files separately (either may be missing,
    /// which [`EtcdStore::connect`](super::EtcdStore::connect) refuses).
    pub fn tls_files(
        mut self,
        ca: Option<PathBuf>,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
    ) -> Self {
        self.ca_file = ca;
        self.cert_file = cert;
        self.key_file = key;
        self
    }

    /// How long connecting keeps trying before it gives up (default 30 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Deadline of each single request to etcd (default 15 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How often the store asks etcd for its revision, compaction and alarms
    /// (default 500 ms); what other writers did shows up at least this often.
    pub fn progress_interval(mut self, interval: Duration) -> Self {
        self.progress_interval = interval;
        self
    }

    /// Background compaction, or `None` to compact only on request.
    pub fn compaction(mut self, policy: Option<CompactionPolicy>) -> Self {
        self.compaction = policy;
        self
    }

    /// The endpoints, joined for messages.
    pub fn endpoint_list(&self) -> String {
        self.endpoints.join(",")
    }

    /// Checks the endpoints and reads the TLS files into client options.
    pub(crate) fn connect_options(&self) -> Result<ConnectOptions, ConfigError> {
        let first = self.endpoints.first().ok_or(ConfigError::NoEndpoint)?;
        let https = |url: &str| -> Result<bool, ConfigError> {
            if url.starts_with("https://") {
                Ok(true)
            } else if url.starts_with("http://") {
                Ok(false)
            } else {
                Err(ConfigError::Scheme(url.to_owned()))
            }
        };
        let tls = https(first)?;
        for url in &self.endpoints {
            if https(url)? != tls {
                return Err(ConfigError::MixedSchemes(self.endpoint_list()));
            }
        }
        // Dead connections must surface as errors (so watches end and the
        // API server re-lists) rather than hang: HTTP/2 pings find them.
        let options = ConnectOptions::new()
            .with_connect_timeout(self.connect_timeout.min(Duration::from_secs(5)))
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5))
            .with_keep_alive_while_idle(true);
        let any_file =
            self.ca_file.is_some() || self.cert_file.is_some() || self.key_file.is_some();
        if !tls {
            if any_file {
                return Err(ConfigError::TlsWithoutHttps(first.clone()));
            }
            return Ok(options);
        }
        let ca = self.ca_file.as_deref().ok_or(ConfigError::MissingCa)?;
        let mut tls_options =
            TlsOptions::new().ca_certificate(Certificate::from_pem(read("CA file", ca)?));
        match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => {
                tls_options = tls_options.identity(Identity::from_pem(
                    read("certificate file", cert)?,
                    read("key file", key)?,
                ));
            }
            (None, None) => {}
            _ => return Err(ConfigError::HalfIdentity),
        }
        Ok(options.with_tls(tls_options))
    }
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|source| ConfigError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_and_files_are_checked_before_connecting() {
        let none: [&str; 0] = [];
        assert!(matches!(
            EtcdConfig::new(none).connect_options(),
            Err(ConfigError::NoEndpoint)
        ));
        assert!(matches!(
            EtcdConfig::new(["127.0.0.1:2379"]).connect_options(),
            Err(ConfigError::Scheme(_))
        ));
        assert!(matches!(
            EtcdConfig::new(["http://a:1", "https://b:1"]).connect_options(),
            Err(ConfigError::MixedSchemes(_))
        ));
        assert!(matches!(
            EtcdConfig::new(["https://a:1"]).connect_options(),
            Err(ConfigError::MissingCa)
        ));
        assert!(matches!(
            EtcdConfig::new(["http://a:1"])
                .ca_file("/nonexistent")
                .connect_options(),
            Err(ConfigError::TlsWithoutHttps(_))
        ));
        let missing = EtcdConfig::new(["https://a:1"])
            .ca_file("/nonexistent/ca.pem")
            .connect_options()
            .unwrap_err();
        assert!(
            missing.to_string().contains("/nonexistent/ca.pem"),
            "{missing}"
        );
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "not checked until the handshake").unwrap();
        assert!(matches!(
            EtcdConfig::new(["https://a:1"])
                .tls_files(Some(ca.clone()), Some(ca.clone()), None)
                .connect_options(),
            Err(ConfigError::HalfIdentity)
        ));
        assert!(
            EtcdConfig::new(["https://a:1", "https://b:1"])
                .ca_file(&ca)
                .connect_options()
                .is_ok()
        );
        assert!(EtcdConfig::new(["http://a:1"]).connect_options().is_ok());
    }
}
