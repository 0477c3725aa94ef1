//! The Pod Security Standards as checks over a typed pod spec: which
//! checks a level applies at a policy version, in which order, and how a
//! pod fares against them.
//!
//! As upstream's registry: every check has an ID, a level and revisions
//! that start at a policy version; a pinned version gets each check's
//! newest revision at or below it, and none of a check that did not exist
//! yet. Baseline is every baseline check; restricted is baseline without
//! the checks a restricted revision overrides, plus the restricted checks.
//! Results come baseline first, then restricted, each sorted by ID, so
//! messages read the same as upstream's.
//!
//! Checks only look at the pod: they never read the cluster.

mod baseline;
mod restricted;

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ContainerPort, PodSpec, SecurityContext};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::messages::containers_phrase;
use super::policy::Level::{Baseline, Restricted};
use super::policy::{Level, LevelVersion};

/// One failed check: a short reason (`host namespaces`) and what exactly
/// failed (`hostNetwork=true, hostPID=true`), possibly empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    pub reason: String,
    pub detail: String,
}

impl Violation {
    fn new(reason: impl Into<String>, detail: impl Into<String>) -> Option<Self> {
        Some(Violation {
            reason: reason.into(),
            detail: detail.into(),
        })
    }

    /// A failure whose detail lists `parts`, joined by `separator`; none
    /// when nothing failed.
    fn listing<S: std::borrow::Borrow<str>>(
        reason: &str,
        parts: &[S],
        separator: &str,
    ) -> Option<Self> {
        if parts.is_empty() {
            return None;
        }
        Violation::new(reason, parts.join(separator))
    }
}

/// A check's verdict on one pod: `None` when it passes.
type CheckFn = fn(&ObjectMeta, &PodSpec) -> Option<Violation>;

/// One revision of a check, in force from policy `v1.<since>`.
struct Revision {
    since: u32,
    check: CheckFn,
    /// Baseline checks this (restricted) revision replaces.
    overrides: &'static [&'static str],
}

/// A check with its revisions, oldest first.
struct Check {
    id: &'static str,
    level: Level,
    revisions: &'static [Revision],
}

impl Check {
    /// The revision in force at policy `v1.<minor>`, if the check existed.
    fn at(&self, minor: u32) -> Option<&Revision> {
        self.revisions.iter().rev().find(|r| r.since <= minor)
    }
}

/// The registry as a table: each check's ID, level and revisions
/// (`since => module::check`, oldest first), a restricted revision naming
/// the baseline checks it replaces after `overriding`.
macro_rules! checks {
    ($($id:literal $level:ident [
        $($since:literal => $module:ident::$check:ident $(overriding $overrides:expr)?),+ $(,)?
    ]),* $(,)?) => {
        &[$(Check {
            id: $id,
            level: $level,
            revisions: &[$(Revision {
                since: $since,
                check: $module::$check,
                overrides: checks!(@overrides $($overrides)?),
            }),+],
        }),*]
    };
    (@overrides) => { &[] };
    (@overrides $overrides:expr) => { $overrides };
}

/// Every check, baseline first and each level sorted by ID (a test keeps
/// it so): the order failures are reported in.
static CHECKS: &[Check] = checks![
    "appArmorProfile" Baseline [0 => baseline::app_armor_profile],
    "capabilities_baseline" Baseline [0 => baseline::capabilities],
    "hostNamespaces" Baseline [0 => baseline::host_namespaces],
    "hostPathVolumes" Baseline [0 => baseline::host_path_volumes],
    "hostPorts" Baseline [0 => baseline::host_ports],
    "privileged" Baseline [0 => baseline::privileged],
    "procMount" Baseline [0 => baseline::proc_mount],
    "seLinuxOptions" Baseline [
        0 => baseline::se_linux_options_1_0,
        31 => baseline::se_linux_options_1_31,
    ],
    "seccompProfile_baseline" Baseline [
        0 => baseline::seccomp_annotations,
        19 => baseline::seccomp_profile,
    ],
    "sysctls" Baseline [
        0 => baseline::sysctls_1_0,
        27 => baseline::sysctls_1_27,
        29 => baseline::sysctls_1_29,
        32 => baseline::sysctls_1_32,
    ],
    "windowsHostProcess" Baseline [0 => baseline::windows_host_process],
    "allowPrivilegeEscalation" Restricted [
        8 => restricted::allow_privilege_escalation,
        25 => restricted::allow_privilege_escalation_linux,
    ],
    "capabilities_restricted" Restricted [
        22 => restricted::capabilities overriding &["capabilities_baseline"],
        25 => restricted::capabilities_linux overriding &["capabilities_baseline"],
    ],
    "restrictedVolumes" Restricted [
        0 => restricted::volumes overriding &["hostPathVolumes"],
    ],
    "runAsNonRoot" Restricted [0 => restricted::run_as_non_root],
    "runAsUser" Restricted [23 => restricted::run_as_user],
    "seccompProfile_restricted" Restricted [
        19 => restricted::seccomp_profile overriding &["seccompProfile_baseline"],
        25 => restricted::seccomp_profile_linux overriding &["seccompProfile_baseline"],
    ],
];

/// The checks `policy` applies, in reporting order.
fn checks_for(policy: LevelVersion) -> Vec<CheckFn> {
    if policy.level == Level::Privileged {
        return Vec::new();
    }
    let minor = policy.version.effective_minor();
    let in_force: Vec<(&Check, &Revision)> = CHECKS
        .iter()
        .filter(|c| c.level <= policy.level)
        .filter_map(|c| c.at(minor).map(|r| (c, r)))
        .collect();
    let overridden: Vec<&str> = in_force
        .iter()
        .flat_map(|(_, r)| r.overrides.iter().copied())
        .collect();
    in_force
        .into_iter()
        .filter(|(c, _)| !(c.level == Level::Baseline && overridden.contains(&c.id)))
        .map(|(_, r)| r.check)
        .collect()
}

/// Every check of `policy` that the pod (its metadata and spec) fails, in
/// reporting order; empty when it passes.
pub(crate) fn evaluate(policy: LevelVersion, meta: &ObjectMeta, spec: &PodSpec) -> Vec<Violation> {
    checks_for(policy)
        .into_iter()
        .filter_map(|check| check(meta, spec))
        .collect()
}

/// What the checks look at in a container, init container or ephemeral
/// container.
struct ContainerView<'a> {
    name: &'a str,
    security: Option<&'a SecurityContext>,
    ports: &'a [ContainerPort],
}

/// Init containers, then containers, then ephemeral containers, as
/// upstream visits them.
fn containers(spec: &PodSpec) -> Vec<ContainerView<'_>> {
    let regular = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .map(|c| ContainerView {
            name: &c.name,
            security: c.security_context.as_ref(),
            ports: c.ports.as_deref().unwrap_or_default(),
        });
    let ephemeral = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|c| ContainerView {
            name: &c.name,
            security: c.security_context.as_ref(),
            ports: c.ports.as_deref().unwrap_or_default(),
        });
    regular.chain(ephemeral).collect()
}

/// The names of the containers `bad` holds for, in [`containers`]' order.
fn containers_where(
    spec: &PodSpec,
    mut bad: impl FnMut(&ContainerView<'_>) -> bool,
) -> Vec<String> {
    containers(spec)
        .into_iter()
        .filter(|c| bad(c))
        .map(|c| c.name.to_string())
        .collect()
}

/// The containers that set values a check forbids, and those values
/// (sorted, each once); `forbidden` lists what one container sets that it
/// must not.
fn forbidden_values(
    spec: &PodSpec,
    forbidden: impl Fn(&ContainerView<'_>) -> Vec<String>,
) -> (Vec<String>, BTreeSet<String>) {
    let mut bad_containers = Vec::new();
    let mut values = BTreeSet::new();
    for c in containers(spec) {
        let found = forbidden(&c);
        if !found.is_empty() {
            bad_containers.push(c.name.to_string());
            values.extend(found);
        }
    }
    (bad_containers, values)
}

/// The containers that add capabilities `allowed` does not admit, and
/// those capabilities (sorted, each once).
fn added_capabilities(
    spec: &PodSpec,
    allowed: impl Fn(&str) -> bool,
) -> (Vec<String>, BTreeSet<String>) {
    forbidden_values(spec, |c| {
        c.security
            .and_then(|sc| sc.capabilities.as_ref())
            .and_then(|caps| caps.add.as_ref())
            .into_iter()
            .flatten()
            .filter(|cap| !allowed(cap))
            .cloned()
            .collect()
    })
}

/// `pod`, then `container(s) "..."`: who set a bad value, for the caller
/// to join with ` and `.
fn setters(pod: bool, containers: &[String]) -> Vec<String> {
    let mut who = Vec::new();
    if pod {
        who.push("pod".to_string());
    }
    if !containers.is_empty() {
        who.push(containers_phrase(containers));
    }
    who
}

/// `None` when neither the pod (`pod`) nor any of `containers` failed;
/// else `reason`, with the detail `detail` writes of who failed (`pod and
/// containers "a", "b"`).
fn failed_by(
    pod: bool,
    containers: &[String],
    reason: &str,
    detail: impl FnOnce(&str) -> String,
) -> Option<Violation> {
    let who = setters(pod, containers);
    if who.is_empty() {
        return None;
    }
    Violation::new(reason, detail(&who.join(" and ")))
}

/// The pod declares itself a Windows pod (`spec.os.name: windows`), which
/// the Linux-only restricted checks leave alone from policy v1.25.
fn is_windows(spec: &PodSpec) -> bool {
    spec.os.as_ref().is_some_and(|os| os.name == "windows")
}

#[cfg(test)]
mod tests;
