//! `--admission-control-config-file`: upstream's `AdmissionConfiguration`
//! (YAML or JSON), which gives each admission plugin its settings either
//! inline (`configuration`) or in a file of its own (`path`, relative to
//! the configuration file). This module finds a plugin's settings; each
//! plugin parses its own.
//!
//! It reads files only when the server starts and never touches the store.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The apiVersions upstream accepts for an `AdmissionConfiguration`.
const API_VERSIONS: &[&str] = &[
    "apiserver.config.k8s.io/v1",
    "apiserver.config.k8s.io/v1alpha1",
    "apiserver.k8s.io/v1alpha1",
];

/// Why the admission configuration could not be used; the server does not
/// start with a configuration it cannot honour.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionConfigError {
    /// The file could not be read.
    #[error("reading admission configuration {path}: {source}")]
    Read {
        /// The configuration file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not YAML or JSON of the expected shape.
    #[error("parsing admission configuration {path}: {message}")]
    Parse {
        /// The configuration file.
        path: PathBuf,
        /// Why it did not parse.
        message: String,
    },
    /// The file holds some other kind of object.
    #[error(
        "admission configuration {path}: expected apiVersion apiserver.config.k8s.io/v1 and kind AdmissionConfiguration, got {api_version:?} {kind:?}"
    )]
    WrongKind {
        /// The configuration file.
        path: PathBuf,
        /// The apiVersion found.
        api_version: String,
        /// The kind found.
        kind: String,
    },
    /// One plugin's section is unusable.
    #[error("admission configuration {path}: plugin {plugin}: {message}")]
    Plugin {
        /// The configuration file.
        path: PathBuf,
        /// The plugin's name.
        plugin: String,
        /// What is wrong with its section.
        message: String,
    },
}

/// The plugins' settings from one `AdmissionConfiguration` (none when the
/// server was given no file).
#[derive(Debug, Clone, Default)]
pub(crate) struct AdmissionConfig {
    /// The file they came from, for error messages.
    path: PathBuf,
    plugins: Vec<(String, Value)>,
}

impl AdmissionConfig {
    /// Reads `path`, and every plugin file it points to.
    pub(crate) fn load(path: &Path) -> Result<Self, AdmissionConfigError> {
        let document = read_document(path)?;
        let api_version = document["apiVersion"].as_str().unwrap_or("").to_string();
        let kind = document["kind"].as_str().unwrap_or("").to_string();
        if !API_VERSIONS.contains(&api_version.as_str()) || kind != "AdmissionConfiguration" {
            return Err(AdmissionConfigError::WrongKind {
                path: path.to_path_buf(),
                api_version,
                kind,
            });
        }
        let mut plugins = Vec::new();
        for entry in document["plugins"].as_array().into_iter().flatten() {
            let name = entry["name"].as_str().unwrap_or("").to_string();
            let plugin_error = |message: String| AdmissionConfigError::Plugin {
                path: path.to_path_buf(),
                plugin: name.clone(),
                message,
            };
            if name.is_empty() {
                return Err(plugin_error("a plugin entry has no name".into()));
            }
            let settings = match (&entry["configuration"], entry["path"].as_str()) {
                (Value::Null, None) => Value::Null,
                (Value::Null, Some(file)) => {
                    let file = path.parent().unwrap_or(Path::new(".")).join(file);
                    read_document(&file)?
                }
                (inline, None) => inline.clone(),
                (_, Some(_)) => {
                    return Err(plugin_error(
                        "set either configuration or path, not both".into(),
                    ));
                }
            };
            plugins.push((name, settings));
        }
        Ok(AdmissionConfig {
            path: path.to_path_buf(),
            plugins,
        })
    }

    /// The settings given for `plugin`, if any.
    pub(crate) fn plugin(&self, plugin: &str) -> Option<&Value> {
        self.plugins
            .iter()
            .find(|(name, _)| name == plugin)
            .map(|(_, settings)| settings)
            .filter(|settings| !settings.is_null())
    }

    /// An error about `plugin`'s settings in this file.
    pub(crate) fn plugin_error(&self, plugin: &str, message: String) -> AdmissionConfigError {
        AdmissionConfigError::Plugin {
            path: self.path.clone(),
            plugin: plugin.to_string(),
            message,
        }
    }
}

/// A YAML or JSON document as JSON.
fn read_document(path: &Path) -> Result<Value, AdmissionConfigError> {
    let bytes = std::fs::read(path).map_err(|source| AdmissionConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let parse_error = |message: String| AdmissionConfigError::Parse {
        path: path.to_path_buf(),
        message,
    };
    // YAML is a superset of JSON, so one parser reads both.
    let yaml: serde_yaml::Value =
        serde_yaml::from_slice(&bytes).map_err(|e| parse_error(e.to_string()))?;
    let value = serde_json::to_value(yaml).map_err(|e| parse_error(e.to_string()))?;
    if !value.is_object() {
        return Err(parse_error("the document is not an object".into()));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn plugins_come_inline_or_from_their_own_file() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "psa.yaml",
            "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\n",
        );
        let path = write(
            dir.path(),
            "admission.yaml",
            r#"apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  path: psa.yaml
- name: EventRateLimit
  configuration:
    kind: Configuration
"#,
        );
        let config = AdmissionConfig::load(&path).unwrap();
        assert_eq!(
            config.plugin("PodSecurity").unwrap()["kind"],
            "PodSecurityConfiguration"
        );
        assert_eq!(
            config.plugin("EventRateLimit").unwrap()["kind"],
            "Configuration"
        );
        assert!(config.plugin("ResourceQuota").is_none());
    }

    #[test]
    fn a_file_that_is_not_an_admission_configuration_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "a.yaml", "apiVersion: v1\nkind: ConfigMap\n");
        let err = AdmissionConfig::load(&path).unwrap_err();
        assert!(
            err.to_string().contains("kind AdmissionConfiguration"),
            "{err}"
        );
        let missing = AdmissionConfig::load(&dir.path().join("nope.yaml")).unwrap_err();
        assert!(matches!(missing, AdmissionConfigError::Read { .. }));
        let bad = write(dir.path(), "b.yaml", "plugins: [");
        assert!(matches!(
            AdmissionConfig::load(&bad).unwrap_err(),
            AdmissionConfigError::Parse { .. }
        ));
        let both = write(
            dir.path(),
            "c.yaml",
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  path: x.yaml\n  configuration: {}\n",
        );
        assert!(
            AdmissionConfig::load(&both)
                .unwrap_err()
                .to_string()
                .contains("either configuration or path")
        );
    }
}
