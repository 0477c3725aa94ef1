//! The words Pod Security answers with, as upstream writes them: the
//! pieces checks build their details from (`container "a"` / `containers
//! "a", "b"`), the joined list of failed checks, the enforce refusal, the
//! warn and audit texts, and the warnings about existing pods and exempt
//! namespaces.
//!
//! Only text is made here; nothing is decided.

use std::collections::BTreeMap;

use super::checks::Violation;
use super::policy::{LevelVersion, Policy};

/// `singular` for one, `plural` otherwise.
pub(super) fn pluralize<'a>(singular: &'a str, plural: &'a str, count: usize) -> &'a str {
    if count == 1 { singular } else { plural }
}

/// `"a", "b", "c"` (names are quoted, never escaped, as upstream).
pub(super) fn join_quote<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    let quoted: Vec<String> = items
        .into_iter()
        .map(|item| format!("\"{}\"", item.as_ref()))
        .collect();
    quoted.join(", ")
}

/// `container "a"` or `containers "a", "b"`.
pub(super) fn containers_phrase(names: &[String]) -> String {
    format!(
        "{} {}",
        pluralize("container", "containers", names.len()),
        join_quote(names)
    )
}

/// `volume "a"` or `volumes "a", "b"`.
pub(super) fn volumes_phrase(names: &[&str]) -> String {
    format!(
        "{} {}",
        pluralize("volume", "volumes", names.len()),
        join_quote(names)
    )
}

/// Every failed check, each as `reason (detail)` (or the bare reason when
/// it has no detail), joined with `, ` in check order.
pub(crate) fn detail(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| {
            if v.detail.is_empty() {
                v.reason.clone()
            } else {
                format!("{} ({})", v.reason, v.detail)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The reasons alone, joined with `, ` (what a namespace's existing pods
/// are summarized by).
pub(super) fn reasons(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| v.reason.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The enforce refusal's detail (the Status message adds `pods "x" is
/// forbidden: ` in front).
pub(super) fn violates(policy: LevelVersion, violations: &[Violation]) -> String {
    format!("violates PodSecurity \"{policy}\": {}", detail(violations))
}

/// The warn header text and the audit annotation value.
pub(super) fn would_violate(policy: LevelVersion, violations: &[Violation]) -> String {
    format!(
        "would violate PodSecurity \"{policy}\": {}",
        detail(violations)
    )
}

/// The first warning of a namespace whose new enforce level some existing
/// pods fail.
pub(super) fn existing_pods_violate(namespace: &str, enforce: LevelVersion) -> String {
    format!(
        "existing pods in namespace \"{namespace}\" violate the new PodSecurity enforce level \"{enforce}\""
    )
}

/// The warning when the pod check stopped early (time or count).
pub(super) fn only_checked(checked: usize, total: usize) -> String {
    format!(
        "new PodSecurity enforce level only checked against the first {checked} of {total} existing pods"
    )
}

/// Pods sharing one summary of failed checks: the lexically first name and
/// how many there are.
#[derive(Debug, Clone)]
pub(super) struct PodGroup {
    pub first: String,
    pub count: usize,
}

/// One warning per distinct summary, prefixed with the pods it covers
/// (`p`, `p (and 1 other pod)`, `p (and 3 other pods)`), sorted.
pub(super) fn pod_warnings(groups: &BTreeMap<String, PodGroup>) -> Vec<String> {
    let mut warnings: Vec<String> = groups
        .iter()
        .map(|(summary, group)| match group.count {
            0 | 1 => format!("{}: {summary}", group.first),
            2 => format!("{} (and 1 other pod): {summary}", group.first),
            n => format!("{} (and {} other pods): {summary}", group.first, n - 1),
        })
        .collect();
    warnings.sort();
    warnings
}

/// The warning when an exempt namespace asks for a policy it will not get,
/// naming the non-privileged modes its labels set; `None` when there is
/// nothing to say.
pub(super) fn exempt_namespace(
    namespace: &str,
    policy: &Policy,
    defaults: &Policy,
    has_label: impl Fn(&str) -> bool,
) -> Option<String> {
    use super::policy::{
        AUDIT_LABEL, AUDIT_VERSION_LABEL, ENFORCE_LABEL, ENFORCE_VERSION_LABEL, Level, WARN_LABEL,
        WARN_VERSION_LABEL,
    };
    if policy.fully_privileged() || policy.equivalent(defaults) {
        return None;
    }
    let modes = [
        (
            "enforce",
            policy.enforce,
            ENFORCE_LABEL,
            ENFORCE_VERSION_LABEL,
        ),
        ("audit", policy.audit, AUDIT_LABEL, AUDIT_VERSION_LABEL),
        ("warn", policy.warn, WARN_LABEL, WARN_VERSION_LABEL),
    ];
    let set: Vec<String> = modes
        .iter()
        .filter(|(_, lv, level, version)| {
            lv.level != Level::Privileged && (has_label(level) || has_label(version))
        })
        .map(|(mode, lv, _, _)| format!("{mode}={lv}"))
        .collect();
    Some(format!(
        "namespace \"{namespace}\" is exempt from Pod Security, and the policy ({}) will be ignored",
        set.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go_format::go_quote;

    fn violation(reason: &str, detail: &str) -> Violation {
        Violation {
            reason: reason.into(),
            detail: detail.into(),
        }
    }

    #[test]
    fn details_join_reasons_with_their_parenthesized_detail() {
        let found = [
            violation("host namespaces", "hostPID=true"),
            violation("bare", ""),
            violation(
                "privileged",
                "container \"c\" must not set securityContext.privileged=true",
            ),
        ];
        assert_eq!(
            detail(&found),
            "host namespaces (hostPID=true), bare, privileged (container \"c\" must not set securityContext.privileged=true)"
        );
        assert_eq!(reasons(&found), "host namespaces, bare, privileged");
    }

    #[test]
    fn phrases_pluralize_and_quote() {
        assert_eq!(containers_phrase(&["a".into()]), "container \"a\"");
        assert_eq!(
            containers_phrase(&["a".into(), "b".into()]),
            "containers \"a\", \"b\""
        );
        assert_eq!(go_quote("un\"conf\\ined\n"), r#""un\"conf\\ined\n""#);
    }

    #[test]
    fn pod_warnings_name_the_first_pod_and_count_the_others() {
        let mut groups = BTreeMap::new();
        groups.insert(
            "privileged".to_string(),
            PodGroup {
                first: "b".into(),
                count: 1,
            },
        );
        groups.insert(
            "host namespaces".to_string(),
            PodGroup {
                first: "a".into(),
                count: 2,
            },
        );
        groups.insert(
            "hostPort".to_string(),
            PodGroup {
                first: "c".into(),
                count: 4,
            },
        );
        assert_eq!(
            pod_warnings(&groups),
            [
                "a (and 1 other pod): host namespaces",
                "b: privileged",
                "c (and 3 other pods): hostPort",
            ]
        );
    }
}
