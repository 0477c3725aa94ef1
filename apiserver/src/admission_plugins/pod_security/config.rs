//! The `PodSecurity` plugin's settings, upstream's
//! `PodSecurityConfiguration`: the policy of namespaces without labels
//! (`defaults`) and who is never checked (`exemptions` by user name,
//! runtime class and namespace). Without a configuration every default is
//! `privileged` at `latest` and nobody is exempt, as upstream.
//!
//! It only parses and answers "is this exempt"; it decides nothing else.

use serde_json::Value;

use super::policy::{LEVEL_ERROR, Level, LevelVersion, Policy, VERSION_ERROR, Version};

/// The apiVersions upstream reads a `PodSecurityConfiguration` in.
const API_VERSIONS: &[&str] = &[
    "pod-security.admission.config.k8s.io/v1",
    "pod-security.admission.config.k8s.io/v1beta1",
    "pod-security.admission.config.k8s.io/v1alpha1",
];

/// Requests Pod Security never evaluates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Exemptions {
    pub usernames: Vec<String>,
    pub runtime_classes: Vec<String>,
    pub namespaces: Vec<String>,
}

/// Defaults and exemptions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PodSecurityConfig {
    pub defaults: Policy,
    pub exemptions: Exemptions,
}

/// `defaults.<key>` parsed by `parse` (`None` when unset), or the error
/// to report: `invalid` when it is a string `parse` refuses.
fn default_field<T>(
    defaults: &Value,
    key: &str,
    parse: fn(&str) -> Option<T>,
    invalid: &str,
) -> Result<Option<T>, String> {
    match &defaults[key] {
        Value::Null => Ok(None),
        Value::String(s) => parse(s)
            .map(Some)
            .ok_or_else(|| format!("defaults.{key}: Invalid value: {s:?}: {invalid}")),
        other => Err(format!(
            "defaults.{key}: Invalid value: {other}: must be a string"
        )),
    }
}

impl PodSecurityConfig {
    /// Parses a `PodSecurityConfiguration` object; the error says what is
    /// wrong with it in upstream's field-path form.
    pub(crate) fn parse(value: &Value) -> Result<Self, String> {
        let api_version = value["apiVersion"].as_str().unwrap_or("");
        let kind = value["kind"].as_str().unwrap_or("");
        if !API_VERSIONS.contains(&api_version) || kind != "PodSecurityConfiguration" {
            return Err(format!(
                "expected apiVersion pod-security.admission.config.k8s.io/v1 and kind PodSecurityConfiguration, got {api_version:?} {kind:?}"
            ));
        }
        let defaults = &value["defaults"];
        let mut errors = Vec::new();
        let mut mode = |level_key: &str, version_key: &str| {
            let mut lv = LevelVersion::PRIVILEGED_LATEST;
            match default_field(defaults, level_key, Level::parse, LEVEL_ERROR) {
                Ok(level) => lv.level = level.unwrap_or(lv.level),
                Err(error) => errors.push(error),
            }
            match default_field(defaults, version_key, Version::parse, VERSION_ERROR) {
                Ok(version) => lv.version = version.unwrap_or(lv.version),
                Err(error) => errors.push(error),
            }
            lv
        };
        let defaults = Policy {
            enforce: mode("enforce", "enforce-version"),
            audit: mode("audit", "audit-version"),
            warn: mode("warn", "warn-version"),
        };
        let mut list = |key: &str| -> Vec<String> {
            let field = &value["exemptions"][key];
            let Some(items) = field.as_array() else {
                if !field.is_null() {
                    errors.push(format!("exemptions.{key}: must be a list of strings"));
                }
                return Vec::new();
            };
            let mut names = Vec::new();
            for (i, item) in items.iter().enumerate() {
                match item.as_str() {
                    Some(name) if !name.is_empty() => names.push(name.to_string()),
                    _ => errors.push(format!(
                        "exemptions.{key}[{i}]: Invalid value: {item}: must be a non-empty string"
                    )),
                }
            }
            names
        };
        let exemptions = Exemptions {
            usernames: list("usernames"),
            runtime_classes: list("runtimeClasses"),
            namespaces: list("namespaces"),
        };
        if !errors.is_empty() {
            return Err(errors.join(", "));
        }
        Ok(PodSecurityConfig {
            defaults,
            exemptions,
        })
    }

    pub(crate) fn exempt_namespace(&self, namespace: &str) -> bool {
        !namespace.is_empty() && self.exemptions.namespaces.iter().any(|n| n == namespace)
    }

    pub(crate) fn exempt_user(&self, user: &str) -> bool {
        !user.is_empty() && self.exemptions.usernames.iter().any(|u| u == user)
    }

    pub(crate) fn exempt_runtime_class(&self, runtime_class: Option<&str>) -> bool {
        runtime_class
            .filter(|rc| !rc.is_empty())
            .is_some_and(|rc| self.exemptions.runtime_classes.iter().any(|c| c == rc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_exemptions_are_read_as_upstream_writes_them() {
        let config = PodSecurityConfig::parse(&json!({
            "apiVersion": "pod-security.admission.config.k8s.io/v1",
            "kind": "PodSecurityConfiguration",
            "defaults": {"enforce": "baseline", "enforce-version": "v1.30", "warn": "restricted"},
            "exemptions": {"usernames": ["ci-bot"], "runtimeClasses": ["kata"], "namespaces": ["kube-system"]}
        }))
        .unwrap();
        assert_eq!(config.defaults.enforce.to_string(), "baseline:v1.30");
        assert_eq!(config.defaults.audit.to_string(), "privileged:latest");
        assert_eq!(config.defaults.warn.to_string(), "restricted:latest");
        assert!(config.exempt_user("ci-bot") && !config.exempt_user("ci"));
        assert!(config.exempt_namespace("kube-system") && !config.exempt_namespace(""));
        assert!(config.exempt_runtime_class(Some("kata")));
        assert!(!config.exempt_runtime_class(None) && !config.exempt_runtime_class(Some("")));
    }

    #[test]
    fn unknown_levels_versions_and_kinds_are_refused() {
        let err = PodSecurityConfig::parse(&json!({
            "apiVersion": "pod-security.admission.config.k8s.io/v1",
            "kind": "PodSecurityConfiguration",
            "defaults": {"enforce": "strict", "audit-version": "1.30"},
            "exemptions": {"usernames": [""]}
        }))
        .unwrap_err();
        assert_eq!(
            err,
            "defaults.enforce: Invalid value: \"strict\": must be one of privileged, baseline, restricted, \
             defaults.audit-version: Invalid value: \"1.30\": must be \"latest\" or \"v1.x\", \
             exemptions.usernames[0]: Invalid value: \"\": must be a non-empty string"
        );
        assert!(
            PodSecurityConfig::parse(&json!({"apiVersion": "v1", "kind": "ConfigMap"})).is_err()
        );
    }
}
