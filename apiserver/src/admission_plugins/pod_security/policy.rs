//! Levels, policy versions and the policy a namespace asks for: the
//! `pod-security.kubernetes.io/{enforce,audit,warn}[-version]` labels read
//! over the configured defaults, with upstream's rules for bad values (an
//! unknown enforce level fails closed to `restricted`, unknown audit and
//! warn levels fail open to `privileged`, an unknown version means
//! `latest`).
//!
//! It only parses; what a level forbids lives in `checks`.

use std::collections::BTreeMap;
use std::fmt;

use crate::status::FieldError;

pub(crate) const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";
pub(crate) const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
pub(crate) const AUDIT_LABEL: &str = "pod-security.kubernetes.io/audit";
pub(crate) const AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
pub(crate) const WARN_LABEL: &str = "pod-security.kubernetes.io/warn";
pub(crate) const WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// The newest policy version any check has a revision for: `latest` and
/// every newer pinned version evaluate as this one (upstream's registry
/// clamps to its highest `MinimumVersion`, which is v1.32 in 1.33).
pub(crate) const NEWEST_POLICY_MINOR: u32 = 32;

/// A Pod Security Standard, from least to most strict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    /// Parses a level name.
    pub(crate) fn parse(value: &str) -> Option<Self> {
        match value {
            "privileged" => Some(Level::Privileged),
            "baseline" => Some(Level::Baseline),
            "restricted" => Some(Level::Restricted),
            _ => None,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// Why a level value was refused, in upstream's words.
pub(crate) const LEVEL_ERROR: &str = "must be one of privileged, baseline, restricted";
/// Why a version value was refused, in upstream's words.
pub(crate) const VERSION_ERROR: &str = "must be \"latest\" or \"v1.x\"";

/// A policy version: `v1.<minor>` or `latest` (newer than every minor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Version {
    Minor(u32),
    Latest,
}

impl Version {
    /// Parses `latest` or `v1.<minor>` (no leading zeros, as upstream).
    pub(crate) fn parse(value: &str) -> Option<Self> {
        if value == "latest" {
            return Some(Version::Latest);
        }
        let minor = value.strip_prefix("v1.")?;
        let well_formed = !minor.is_empty()
            && minor.bytes().all(|b| b.is_ascii_digit())
            && (minor == "0" || !minor.starts_with('0'));
        if !well_formed {
            return None;
        }
        minor.parse().ok().map(Version::Minor)
    }

    /// The minor version whose checks apply: `latest` and anything newer
    /// than the newest check revision evaluate as that revision.
    pub(crate) fn effective_minor(self) -> u32 {
        match self {
            Version::Minor(minor) => minor.min(NEWEST_POLICY_MINOR),
            Version::Latest => NEWEST_POLICY_MINOR,
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Minor(minor) => write!(f, "v1.{minor}"),
            Version::Latest => f.write_str("latest"),
        }
    }
}

/// A level at a version, written `restricted:latest` in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct LevelVersion {
    pub level: Level,
    pub version: Version,
}

impl LevelVersion {
    pub(crate) const PRIVILEGED_LATEST: LevelVersion = LevelVersion {
        level: Level::Privileged,
        version: Version::Latest,
    };
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level.as_str(), self.version)
    }
}

/// What a namespace enforces, audits and warns about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Policy {
    pub enforce: LevelVersion,
    pub audit: LevelVersion,
    pub warn: LevelVersion,
}

impl Default for Policy {
    /// Upstream's built-in default: everything privileged at `latest`.
    fn default() -> Self {
        Policy {
            enforce: LevelVersion::PRIVILEGED_LATEST,
            audit: LevelVersion::PRIVILEGED_LATEST,
            warn: LevelVersion::PRIVILEGED_LATEST,
        }
    }
}

impl Policy {
    /// Nothing is enforced, audited or warned about.
    pub(crate) fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn]
            .iter()
            .all(|lv| lv.level == Level::Privileged)
    }

    /// The same outcome as `other` for every pod: equal, or privileged in
    /// the same modes whatever their versions (upstream's `Equivalent`).
    pub(crate) fn equivalent(&self, other: &Policy) -> bool {
        let same = |a: LevelVersion, b: LevelVersion| {
            a == b || (a.level == Level::Privileged && b.level == Level::Privileged)
        };
        same(self.enforce, other.enforce)
            && same(self.audit, other.audit)
            && same(self.warn, other.warn)
    }

    /// The policy `labels` ask for over `defaults`. A policy always comes
    /// back; the errors name every label whose value was not understood
    /// (its stand-in is `restricted` for enforce, `privileged` for audit
    /// and warn, `latest` for a version).
    pub(crate) fn from_labels(
        labels: &BTreeMap<String, String>,
        defaults: &Policy,
    ) -> (Policy, Vec<FieldError>) {
        let mut policy = *defaults;
        let mut errors = Vec::new();
        let modes = [
            (
                &mut policy.enforce,
                ENFORCE_LABEL,
                ENFORCE_VERSION_LABEL,
                Level::Restricted,
            ),
            (
                &mut policy.audit,
                AUDIT_LABEL,
                AUDIT_VERSION_LABEL,
                Level::Privileged,
            ),
            (
                &mut policy.warn,
                WARN_LABEL,
                WARN_VERSION_LABEL,
                Level::Privileged,
            ),
        ];
        for (mode, level_label, version_label, fallback) in modes {
            if let Some(value) = labels.get(level_label) {
                mode.level = Level::parse(value).unwrap_or_else(|| {
                    errors.push(label_error(level_label, value, LEVEL_ERROR));
                    fallback
                });
            }
            if let Some(value) = labels.get(version_label) {
                mode.version = Version::parse(value).unwrap_or_else(|| {
                    errors.push(label_error(version_label, value, VERSION_ERROR));
                    Version::Latest
                });
            }
        }
        (policy, errors)
    }
}

fn label_error(label: &str, value: &str, detail: &str) -> FieldError {
    FieldError::invalid(format!("metadata.labels[{label}]"), value, detail)
}

#[cfg(test)]
mod tests {
    use skiff_common::labels::from_pairs as labels;

    use super::*;

    #[test]
    fn versions_parse_as_upstream() {
        assert_eq!(Version::parse("latest"), Some(Version::Latest));
        assert_eq!(Version::parse("v1.0"), Some(Version::Minor(0)));
        assert_eq!(Version::parse("v1.33"), Some(Version::Minor(33)));
        for bad in [
            "", "1.33", "v1.033", "v2.1", "v1.", "v1.x", "Latest", "v1.-1",
        ] {
            assert_eq!(Version::parse(bad), None, "{bad}");
        }
        assert!(Version::Minor(99) < Version::Latest);
        assert_eq!(Version::Minor(33).effective_minor(), NEWEST_POLICY_MINOR);
        assert_eq!(Version::Minor(25).effective_minor(), 25);
        assert_eq!(Version::Latest.effective_minor(), NEWEST_POLICY_MINOR);
        assert_eq!(Version::Minor(7).to_string(), "v1.7");
    }

    #[test]
    fn labels_override_defaults_mode_by_mode() {
        let defaults = Policy {
            audit: LevelVersion {
                level: Level::Baseline,
                version: Version::Minor(30),
            },
            ..Policy::default()
        };
        let (policy, errors) = Policy::from_labels(
            &labels(&[
                (ENFORCE_LABEL, "restricted"),
                (WARN_LABEL, "baseline"),
                (WARN_VERSION_LABEL, "v1.25"),
            ]),
            &defaults,
        );
        assert!(errors.is_empty());
        assert_eq!(policy.enforce.to_string(), "restricted:latest");
        assert_eq!(policy.audit.to_string(), "baseline:v1.30");
        assert_eq!(policy.warn.to_string(), "baseline:v1.25");
        assert!(!policy.fully_privileged());
        assert!(Policy::default().fully_privileged());
    }

    #[test]
    fn bad_values_fail_closed_for_enforce_and_open_for_audit_and_warn() {
        let (policy, errors) = Policy::from_labels(
            &labels(&[
                (ENFORCE_LABEL, "strict"),
                (ENFORCE_VERSION_LABEL, "v1"),
                (AUDIT_LABEL, "loud"),
                (WARN_LABEL, "RESTRICTED"),
            ]),
            &Policy::default(),
        );
        assert_eq!(policy.enforce.to_string(), "restricted:latest");
        assert_eq!(policy.audit.level, Level::Privileged);
        assert_eq!(policy.warn.level, Level::Privileged);
        let rendered: Vec<String> = errors.iter().map(FieldError::render).collect();
        assert_eq!(
            rendered,
            [
                "metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted",
                "metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: \"v1\": must be \"latest\" or \"v1.x\"",
                "metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: \"loud\": must be one of privileged, baseline, restricted",
                "metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: \"RESTRICTED\": must be one of privileged, baseline, restricted",
            ]
        );
    }

    #[test]
    fn privileged_policies_are_equivalent_whatever_their_versions() {
        let mut a = Policy::default();
        a.enforce.version = Version::Minor(20);
        assert!(a.equivalent(&Policy::default()));
        a.warn.level = Level::Baseline;
        assert!(!a.equivalent(&Policy::default()));
    }
}
