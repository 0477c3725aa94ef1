//! Scheduler configuration: profiles with enabled/disabled plugins per extension point,
//! score weights and plugin arguments, loadable from YAML or JSON in the shape of
//! upstream's `KubeSchedulerConfiguration`.

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

/// Errors loading or applying a configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Reading the file failed.
    #[error("reading scheduler config {path}: {source}")]
    Read {
        /// File path.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Parsing failed.
    #[error("parsing scheduler config: {0}")]
    Parse(String),
    /// A plugin named in the config does not exist.
    #[error("profile {profile}: unknown plugin {plugin}")]
    UnknownPlugin {
        /// Profile.
        profile: String,
        /// Plugin.
        plugin: String,
    },
    /// A plugin's args were invalid.
    #[error("plugin {plugin}: invalid args: {message}")]
    InvalidArgs {
        /// Plugin.
        plugin: String,
        /// What was wrong.
        message: String,
    },
    /// Two profiles share a scheduler name, or a value is out of range.
    #[error("invalid scheduler config: {0}")]
    Invalid(String),
}

/// One plugin reference with an optional score weight.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PluginRef {
    /// Plugin name, or "*" in `disabled` for all defaults.
    pub name: String,
    /// Score weight (score extension point and multiPoint only); 0 means default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i64>,
}

/// Enabled and disabled plugins of one extension point.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PluginSet {
    /// Added (or re-weighted) plugins.
    #[serde(default)]
    pub enabled: Vec<PluginRef>,
    /// Removed plugins; "*" removes all defaults.
    #[serde(default)]
    pub disabled: Vec<PluginRef>,
}

/// Plugin sets per extension point.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Plugins {
    /// Applies to every extension point a plugin implements.
    #[serde(default)]
    pub multi_point: PluginSet,
    /// PreFilter.
    #[serde(default)]
    pub pre_filter: PluginSet,
    /// Filter.
    #[serde(default)]
    pub filter: PluginSet,
    /// PostFilter.
    #[serde(default)]
    pub post_filter: PluginSet,
    /// PreScore.
    #[serde(default)]
    pub pre_score: PluginSet,
    /// Score.
    #[serde(default)]
    pub score: PluginSet,
    /// Reserve.
    #[serde(default)]
    pub reserve: PluginSet,
    /// Permit.
    #[serde(default)]
    pub permit: PluginSet,
    /// PreBind.
    #[serde(default)]
    pub pre_bind: PluginSet,
    /// Bind.
    #[serde(default)]
    pub bind: PluginSet,
    /// PostBind.
    #[serde(default)]
    pub post_bind: PluginSet,
}

/// Arguments for one plugin.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PluginConfig {
    /// Plugin name.
    pub name: String,
    /// Plugin-specific arguments.
    #[serde(default)]
    pub args: serde_json::Value,
}

/// One scheduling profile.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    /// Pods with this `spec.schedulerName` use the profile.
    #[serde(default = "default_scheduler_name")]
    pub scheduler_name: String,
    /// Overrides the global percentage of nodes to score.
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<u32>,
    /// Plugin sets.
    #[serde(default)]
    pub plugins: Plugins,
    /// Plugin arguments.
    #[serde(default)]
    pub plugin_config: Vec<PluginConfig>,
}

fn default_scheduler_name() -> String {
    DEFAULT_SCHEDULER_NAME.to_string()
}

/// The scheduler name pods get when they do not set one.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// The profile `pod` is for: the one its `spec.schedulerName` names, or the
/// default profile when the name is missing or empty (as the API defaults
/// it), so that choosing a pod's profile, labelling its metrics and deciding
/// whether this scheduler is responsible for it all read the name the same way.
pub(crate) fn profile_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .filter(|n| !n.is_empty())
        .unwrap_or(DEFAULT_SCHEDULER_NAME)
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            scheduler_name: default_scheduler_name(),
            percentage_of_nodes_to_score: None,
            plugins: Plugins::default(),
            plugin_config: Vec::new(),
        }
    }
}

/// The whole scheduler configuration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerConfig {
    /// `kubescheduler.config.k8s.io/v1` (accepted, not required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `KubeSchedulerConfiguration` (accepted, not required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Percentage of nodes to find feasible before scoring; 0 = adaptive.
    #[serde(default)]
    pub percentage_of_nodes_to_score: u32,
    /// Initial per-pod backoff.
    #[serde(default = "default_initial_backoff")]
    pub pod_initial_backoff_seconds: u64,
    /// Maximum per-pod backoff.
    #[serde(default = "default_max_backoff")]
    pub pod_max_backoff_seconds: u64,
    /// Profiles; one default profile when empty.
    #[serde(default)]
    pub profiles: Vec<Profile>,
}

fn default_initial_backoff() -> u64 {
    1
}

fn default_max_backoff() -> u64 {
    10
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            api_version: None,
            kind: None,
            percentage_of_nodes_to_score: 0,
            pod_initial_backoff_seconds: default_initial_backoff(),
            pod_max_backoff_seconds: default_max_backoff(),
            profiles: vec![Profile::default()],
        }
    }
}

impl SchedulerConfig {
    /// Parses YAML (JSON is valid YAML).
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        let mut cfg: SchedulerConfig =
            serde_yaml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        if cfg.profiles.is_empty() {
            cfg.profiles.push(Profile::default());
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads and parses a YAML or JSON file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_yaml(&text)
    }

    /// Checks cross-field rules.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut names = std::collections::HashSet::new();
        for p in &self.profiles {
            if !names.insert(p.scheduler_name.as_str()) {
                return Err(ConfigError::Invalid(format!(
                    "duplicate profile {}",
                    p.scheduler_name
                )));
            }
        }
        if self.percentage_of_nodes_to_score > 100 {
            return Err(ConfigError::Invalid(
                "percentageOfNodesToScore must be 0-100".into(),
            ));
        }
        if self.pod_initial_backoff_seconds == 0
            || self.pod_max_backoff_seconds < self.pod_initial_backoff_seconds
        {
            return Err(ConfigError::Invalid(
                "backoff seconds must satisfy 0 < initial <= max".into(),
            ));
        }
        Ok(())
    }
}

/// Upstream's default plugin set, in order, with default score weights.
pub const DEFAULT_PLUGINS: &[(&str, i64)] = &[
    ("NodeUnschedulable", 0),
    ("NodeName", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("VolumeBinding", 0),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 0),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_upstream_shaped_yaml() {
        let cfg = SchedulerConfig::from_yaml(
            r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podMaxBackoffSeconds: 20
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      disabled:
      - name: ImageLocality
      enabled:
      - name: NodeAffinity
        weight: 7
- schedulerName: no-scoring
  plugins:
    multiPoint:
      disabled:
      - name: "*"
      enabled:
      - name: NodeName
      - name: DefaultBinder
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
"#,
        )
        .unwrap();
        assert_eq!(cfg.pod_max_backoff_seconds, 20);
        assert_eq!(cfg.pod_initial_backoff_seconds, 1);
        assert_eq!(cfg.profiles.len(), 2);
        assert_eq!(cfg.profiles[0].plugins.score.enabled[0].weight, Some(7));
        assert_eq!(cfg.profiles[1].plugins.multi_point.disabled[0].name, "*");
    }

    #[test]
    fn rejects_duplicate_profiles_and_bad_values() {
        let dup = "profiles:\n- schedulerName: a\n- schedulerName: a\n";
        assert!(matches!(
            SchedulerConfig::from_yaml(dup),
            Err(ConfigError::Invalid(_))
        ));
        assert!(matches!(
            SchedulerConfig::from_yaml("percentageOfNodesToScore: 101"),
            Err(ConfigError::Invalid(_))
        ));
        assert!(matches!(
            SchedulerConfig::from_yaml("profiles: 3"),
            Err(ConfigError::Parse(_))
        ));
        let json = SchedulerConfig::from_yaml(r#"{"profiles":[{"schedulerName":"x"}]}"#).unwrap();
        assert_eq!(json.profiles[0].scheduler_name, "x");
    }
}
