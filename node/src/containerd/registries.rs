//! Private registry configuration in k3s's `registries.yaml` shape:
//! `mirrors` (per registry, the endpoints tried in order before the registry
//! itself) and `configs` (per registry host, credentials and TLS: a CA, a
//! client certificate, or no verification). skiff hands it to the containerd
//! it starts as containerd itself reads such settings: a `hosts.toml` per
//! registry under `certs.d` (the CRI plugin's `config_path`) for endpoints
//! and TLS, and the CRI plugin's `registry.configs.<host>.auth` for
//! credentials. A pod's image pull secrets still come first; these apply
//! when it has none for the host.
//!
//! What containerd cannot do without k3s's fork is refused rather than
//! ignored: `rewrite` rules.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use skiff_common::quote::toml_string;

/// Why a registries file is not used.
#[derive(Debug, thiserror::Error)]
pub enum RegistriesError {
    /// It could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It is not the shape k3s documents.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the YAML parser said.
        source: serde_yaml::Error,
    },
    /// It asks for something skiff's containerd cannot do.
    #[error("{path}: {what}")]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What, and where.
        what: String,
    },
}

/// `registries.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registries {
    /// Registry name (`docker.io`, `registry.example.com:5000`) → mirrors.
    #[serde(default)]
    pub mirrors: BTreeMap<String, Mirror>,
    /// Registry host → credentials and TLS.
    #[serde(default)]
    pub configs: BTreeMap<String, RegistryConfig>,
}

/// The mirrors of one registry.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mirror {
    /// Endpoint URLs (`https://mirror.example.com:5000`), tried in order.
    #[serde(default)]
    pub endpoint: Vec<String>,
    /// k3s's repository rewrites: not supported by upstream containerd.
    #[serde(default)]
    pub rewrite: BTreeMap<String, String>,
}

/// Credentials and TLS of one registry host.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    /// Credentials.
    pub auth: Option<Auth>,
    /// TLS settings.
    pub tls: Option<Tls>,
}

/// Registry credentials, as a docker config names them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Auth {
    /// User name.
    pub username: Option<String>,
    /// Password.
    pub password: Option<String>,
    /// `base64(user:password)`.
    pub auth: Option<String>,
    /// An identity (refresh) token.
    pub identitytoken: Option<String>,
}

/// TLS towards a registry host.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    /// Client certificate.
    pub cert_file: Option<PathBuf>,
    /// Its key.
    pub key_file: Option<PathBuf>,
    /// CA to verify the registry with.
    pub ca_file: Option<PathBuf>,
    /// Do not verify the registry's certificate.
    #[serde(default)]
    pub insecure_skip_verify: bool,
}

impl Registries {
    /// Reads `path`; `Ok(None)` when there is no such file.
    pub fn load(path: &Path) -> Result<Option<Self>, RegistriesError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(RegistriesError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let registries: Self = if text.trim().is_empty() {
            Self::default()
        } else {
            serde_yaml::from_str(&text).map_err(|source| RegistriesError::Parse {
                path: path.to_path_buf(),
                source,
            })?
        };
        registries
            .check()
            .map_err(|what| RegistriesError::Unsupported {
                path: path.to_path_buf(),
                what,
            })?;
        Ok(Some(registries))
    }

    /// What containerd could not honour, named.
    fn check(&self) -> Result<(), String> {
        for (registry, mirror) in &self.mirrors {
            if !mirror.rewrite.is_empty() {
                return Err(format!(
                    "mirrors.{registry:?}.rewrite: repository rewrites need k3s's containerd fork"
                ));
            }
            if registry == "*" {
                return Err(
                    "mirrors.\"*\": a default mirror for every registry is not supported; name each registry"
                        .into(),
                );
            }
            for endpoint in &mirror.endpoint {
                if !(endpoint.starts_with("https://") || endpoint.starts_with("http://")) {
                    return Err(format!(
                        "mirrors.{registry:?}.endpoint: {endpoint:?} is not an http(s) URL"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Each registry's `hosts.toml`, by the directory name under `certs.d`
    /// it goes in: mirrored registries (their endpoints, then the registry
    /// itself) and hosts with TLS settings. A host with credentials alone
    /// gets none, so containerd's own defaults stay (plain HTTP for a
    /// registry on loopback, as without the file).
    pub fn hosts_files(&self) -> BTreeMap<String, String> {
        let mut files = BTreeMap::new();
        for (registry, mirror) in &self.mirrors {
            let mut out = format!("server = {}\n", toml_string(&default_server(registry)));
            for endpoint in &mirror.endpoint {
                self.host_section(&mut out, endpoint);
            }
            files.insert(registry.clone(), out);
        }
        for (host, config) in &self.configs {
            if files.contains_key(host) || config.tls.is_none() {
                continue;
            }
            let server = default_server(host);
            let mut out = format!("server = {}\n", toml_string(&server));
            self.host_section(&mut out, &server);
            files.insert(host.clone(), out);
        }
        files
    }

    /// A `[host."<endpoint>"]` section with the TLS configured for the
    /// endpoint's host.
    fn host_section(&self, out: &mut String, endpoint: &str) {
        let key = toml_string(endpoint);
        let _ = writeln!(out, "\n[host.{key}]");
        let _ = writeln!(out, "  capabilities = [\"pull\", \"resolve\"]");
        let tls = self
            .configs
            .get(endpoint_host(endpoint))
            .and_then(|c| c.tls.as_ref());
        if let Some(tls) = tls {
            if let Some(ca) = &tls.ca_file {
                let _ = writeln!(out, "  ca = {}", toml_string(&ca.to_string_lossy()));
            }
            if let (Some(cert), Some(key_file)) = (&tls.cert_file, &tls.key_file) {
                let _ = writeln!(
                    out,
                    "  client = [[{}, {}]]",
                    toml_string(&cert.to_string_lossy()),
                    toml_string(&key_file.to_string_lossy())
                );
            }
            if tls.insecure_skip_verify {
                let _ = writeln!(out, "  skip_verify = true");
            }
        }
    }

    /// The CRI plugin's credential sections for config.toml.
    pub fn auth_toml(&self, cri: &str) -> String {
        let mut out = String::new();
        for (host, config) in &self.configs {
            let Some(auth) = &config.auth else {
                continue;
            };
            let _ = writeln!(out, "[{cri}.registry.configs.{}.auth]", toml_string(host));
            for (field, value) in [
                ("username", &auth.username),
                ("password", &auth.password),
                ("auth", &auth.auth),
                ("identitytoken", &auth.identitytoken),
            ] {
                if let Some(value) = value {
                    let _ = writeln!(out, "  {field} = {}", toml_string(value));
                }
            }
            let _ = writeln!(out);
        }
        out
    }

    /// Writes the `hosts.toml` files under `certs_dir`, replacing what an
    /// earlier start wrote (a registry dropped from the file is gone).
    pub fn write_hosts(&self, certs_dir: &Path) -> std::io::Result<()> {
        match std::fs::remove_dir_all(certs_dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        for (registry, text) in self.hosts_files() {
            let dir = certs_dir.join(&registry);
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join("hosts.toml"), text)?;
        }
        Ok(())
    }
}

/// The registry's own endpoint (Docker Hub's API lives elsewhere).
fn default_server(registry: &str) -> String {
    if registry == "docker.io" {
        "https://registry-1.docker.io".into()
    } else {
        format!("https://{registry}")
    }
}

/// `host[:port]` of an endpoint URL.
fn endpoint_host(endpoint: &str) -> &str {
    let rest = endpoint
        .strip_prefix("https://")
        .or_else(|| endpoint.strip_prefix("http://"))
        .unwrap_or(endpoint);
    rest.split('/').next().unwrap_or(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
mirrors:
  docker.io:
    endpoint:
      - "https://mirror.example.com:5000"
      - "http://10.0.0.9"
configs:
  "mirror.example.com:5000":
    auth:
      username: alice
      password: "s3cr\"et"
    tls:
      ca_file: /etc/ssl/mirror-ca.pem
      cert_file: /etc/ssl/client.pem
      key_file: /etc/ssl/client.key
  "private.example.com":
    tls:
      insecure_skip_verify: true
  "127.0.0.1:5000":
    auth:
      username: bob
      password: pw
"#;

    fn load(text: &str) -> Result<Option<Registries>, RegistriesError> {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("registries.yaml");
        std::fs::write(&path, text).expect("write");
        Registries::load(&path)
    }

    #[test]
    fn mirrors_and_tls_become_hosts_files_and_credentials_cri_config() {
        let registries = load(FILE).expect("valid").expect("present");
        let files = registries.hosts_files();
        // Mirrored registries, and each host with TLS for direct pulls
        // (credentials alone need no hosts file).
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            [
                "docker.io",
                "mirror.example.com:5000",
                "private.example.com"
            ]
        );
        let hub = &files["docker.io"];
        assert!(
            hub.starts_with("server = \"https://registry-1.docker.io\"\n"),
            "{hub}"
        );
        let mirror = hub
            .find("[host.\"https://mirror.example.com:5000\"]")
            .expect("mirror");
        let plain = hub.find("[host.\"http://10.0.0.9\"]").expect("second");
        assert!(mirror < plain, "endpoints keep their order: {hub}");
        assert!(hub.contains("  ca = \"/etc/ssl/mirror-ca.pem\"\n"), "{hub}");
        assert!(
            hub.contains("  client = [[\"/etc/ssl/client.pem\", \"/etc/ssl/client.key\"]]\n"),
            "{hub}"
        );
        let private = &files["private.example.com"];
        assert!(
            private.contains("[host.\"https://private.example.com\"]"),
            "{private}"
        );
        assert!(private.contains("  skip_verify = true\n"), "{private}");

        let auth = registries.auth_toml("plugins.\"io.containerd.grpc.v1.cri\"");
        assert!(
            auth.contains(
                "[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"mirror.example.com:5000\".auth]\n  username = \"alice\"\n  password = \"s3cr\\\"et\"\n"
            ),
            "{auth}"
        );
        assert!(
            !auth.contains("private.example.com"),
            "no credentials there"
        );
        assert!(
            auth.contains("configs.\"127.0.0.1:5000\".auth]\n  username = \"bob\""),
            "{auth}"
        );
    }

    #[test]
    fn a_missing_or_empty_file_configures_nothing_and_bad_ones_are_refused() {
        let dir = tempfile::tempdir().expect("dir");
        assert_eq!(
            Registries::load(&dir.path().join("none.yaml")).expect("ok"),
            None
        );
        assert_eq!(load("").expect("ok"), Some(Registries::default()));
        for (text, says) in [
            ("mirrors: [1]", "mirrors"),
            ("mirors: {}", "unknown field"),
            (
                "mirrors:\n  docker.io:\n    endpoint: [\"mirror.example.com\"]\n",
                "is not an http(s) URL",
            ),
            (
                "mirrors:\n  docker.io:\n    endpoint: [\"https://m\"]\n    rewrite:\n      \"^x/(.*)\": \"y/$1\"\n",
                "rewrites need k3s's containerd fork",
            ),
            (
                "mirrors:\n  \"*\":\n    endpoint: [\"https://m\"]\n",
                "name each registry",
            ),
        ] {
            let error = load(text).expect_err(text).to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn hosts_files_replace_what_an_earlier_start_wrote() {
        let dir = tempfile::tempdir().expect("dir");
        let certs = dir.path().join("certs.d");
        std::fs::create_dir_all(certs.join("gone.example.com")).expect("old");
        let registries = load(FILE).expect("valid").expect("present");
        registries.write_hosts(&certs).expect("written");
        assert!(certs.join("docker.io/hosts.toml").is_file());
        assert!(certs.join("private.example.com/hosts.toml").is_file());
        assert!(!certs.join("gone.example.com").exists());
    }
}
