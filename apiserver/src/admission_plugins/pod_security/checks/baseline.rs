//! The baseline checks: what every non-privileged namespace refuses —
//! host namespaces, privileged containers, added capabilities beyond the
//! default set, hostPath volumes, host ports, unmasked /proc, custom
//! SELinux users, roles and types, unconfined AppArmor and seccomp
//! profiles, unsafe sysctls and Windows host processes. Each function is
//! one revision of one upstream check, with upstream's reason and detail.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec, SELinuxOptions, SecurityContext};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::super::messages::{join_quote, pluralize, volumes_phrase};
use super::{
    Violation, added_capabilities, containers, containers_where, failed_by, forbidden_values,
    setters,
};
use crate::go_format::go_quote;

/// Capabilities a baseline container may add (the container runtimes'
/// default set).
const DEFAULT_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";
const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";

/// Where a profile type (AppArmor's or seccomp's, as `on_pod` and
/// `on_container` read it) is set to something other than
/// `RuntimeDefault` or `Localhost`: whether on the pod, on which
/// containers, and the types found.
fn unconfined_profiles(
    spec: &PodSpec,
    on_pod: fn(&PodSecurityContext) -> Option<&str>,
    on_container: fn(&SecurityContext) -> Option<&str>,
) -> (bool, Vec<String>, BTreeSet<String>) {
    let unconfined = |t: &&str| *t != "RuntimeDefault" && *t != "Localhost";
    let pod = spec
        .security_context
        .as_ref()
        .and_then(on_pod)
        .filter(unconfined);
    let (bad_containers, mut types) = forbidden_values(spec, |c| {
        c.security
            .and_then(on_container)
            .filter(unconfined)
            .map(String::from)
            .into_iter()
            .collect()
    });
    types.extend(pod.map(String::from));
    (pod.is_some(), bad_containers, types)
}

/// AppArmor: the profile fields (pod and containers) must be
/// `RuntimeDefault` or `Localhost`, and the beta annotations empty,
/// `runtime/default` or `localhost/...`.
pub(super) fn app_armor_profile(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let (pod_bad, bad_containers, bad_values) = unconfined_profiles(
        spec,
        |sc| sc.app_armor_profile.as_ref().map(|p| p.type_.as_str()),
        |sc| sc.app_armor_profile.as_ref().map(|p| p.type_.as_str()),
    );
    let mut who = setters(pod_bad, &bad_containers);
    let mut values: Vec<String> = bad_values.into_iter().collect();
    let annotations: Vec<String> = meta
        .annotations
        .iter()
        .flatten()
        .filter(|(k, v)| {
            k.starts_with(APPARMOR_ANNOTATION_PREFIX)
                && !(v.is_empty() || *v == "runtime/default" || v.starts_with("localhost/"))
        })
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect();
    if !annotations.is_empty() {
        who.push(pluralize("annotation", "annotations", annotations.len()).to_string());
        values.extend(annotations);
    }
    if who.is_empty() {
        return None;
    }
    Violation::new(
        pluralize(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            values.len(),
        ),
        format!(
            "{} must not set AppArmor profile type to {}",
            who.join(" and "),
            join_quote(&values)
        ),
    )
}

/// Containers may add only capabilities of the default set.
pub(super) fn capabilities(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let (bad_containers, added) =
        added_capabilities(spec, |cap| DEFAULT_CAPABILITIES.contains(&cap));
    failed_by(false, &bad_containers, "non-default capabilities", |who| {
        format!(
            "{who} must not include {} in securityContext.capabilities.add",
            join_quote(&added)
        )
    })
}

/// The pod must not share the host's network, PID or IPC namespace.
pub(super) fn host_namespaces(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let shared: Vec<&str> = [
        (spec.host_network, "hostNetwork=true"),
        (spec.host_pid, "hostPID=true"),
        (spec.host_ipc, "hostIPC=true"),
    ]
    .into_iter()
    .filter(|(set, _)| *set == Some(true))
    .map(|(_, text)| text)
    .collect();
    Violation::listing("host namespaces", &shared, ", ")
}

/// No hostPath volumes.
pub(super) fn host_path_volumes(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let names: Vec<&str> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.host_path.is_some())
        .map(|v| v.name.as_str())
        .collect();
    if names.is_empty() {
        return None;
    }
    Violation::new("hostPath volumes", volumes_phrase(&names))
}

/// No container port may bind a host port.
pub(super) fn host_ports(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    // Upstream lists the ports as a set of strings, so they sort as text.
    let (bad_containers, ports) = forbidden_values(spec, |c| {
        c.ports
            .iter()
            .filter_map(|port| port.host_port.filter(|p| *p != 0))
            .map(|p| p.to_string())
            .collect()
    });
    failed_by(false, &bad_containers, "hostPort", |who| {
        format!(
            "{who} {} {} {}",
            pluralize("uses", "use", bad_containers.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// No privileged containers.
pub(super) fn privileged(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let bad = containers_where(spec, |c| {
        c.security.and_then(|sc| sc.privileged) == Some(true)
    });
    failed_by(false, &bad, "privileged", |who| {
        format!("{who} must not set securityContext.privileged=true")
    })
}

/// /proc stays masked: procMount unset or `Default`.
pub(super) fn proc_mount(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let (bad_containers, types) = forbidden_values(spec, |c| {
        c.security
            .and_then(|sc| sc.proc_mount.clone())
            .filter(|kind| kind != "Default")
            .into_iter()
            .collect()
    });
    failed_by(false, &bad_containers, "procMount", |who| {
        format!(
            "{who} must not set securityContext.procMount to {}",
            join_quote(&types)
        )
    })
}

/// SELinux types a container may run as before policy v1.31.
const SELINUX_TYPES_1_0: &[&str] = &["", "container_t", "container_init_t", "container_kvm_t"];
/// From v1.31, container engines running in containers too.
const SELINUX_TYPES_1_31: &[&str] = &[
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

pub(super) fn se_linux_options_1_0(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    se_linux_options(meta, spec, SELINUX_TYPES_1_0)
}

pub(super) fn se_linux_options_1_31(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    se_linux_options(meta, spec, SELINUX_TYPES_1_31)
}

/// SELinux options may set only an allowed type, never a user or role.
fn se_linux_options(_: &ObjectMeta, spec: &PodSpec, allowed: &[&str]) -> Option<Violation> {
    let mut bad_types = BTreeSet::new();
    let (mut set_user, mut set_role) = (false, false);
    let mut acceptable = |options: &SELinuxOptions| {
        let mut ok = true;
        let kind = options.type_.as_deref().unwrap_or("");
        if !allowed.contains(&kind) {
            ok = false;
            bad_types.insert(kind.to_string());
        }
        if options.user.as_deref().is_some_and(|u| !u.is_empty()) {
            ok = false;
            set_user = true;
        }
        if options.role.as_deref().is_some_and(|r| !r.is_empty()) {
            ok = false;
            set_role = true;
        }
        ok
    };
    let pod_bad = spec
        .security_context
        .as_ref()
        .and_then(|sc| sc.se_linux_options.as_ref())
        .is_some_and(|o| !acceptable(o));
    let bad_containers = containers_where(spec, |c| {
        c.security
            .and_then(|sc| sc.se_linux_options.as_ref())
            .is_some_and(|o| !acceptable(o))
    });
    let mut problems = Vec::new();
    if !bad_types.is_empty() {
        problems.push(format!(
            "{} {}",
            pluralize("type", "types", bad_types.len()),
            join_quote(&bad_types)
        ));
    }
    if set_user {
        problems.push("user may not be set".to_string());
    }
    if set_role {
        problems.push("role may not be set".to_string());
    }
    failed_by(pod_bad, &bad_containers, "seLinuxOptions", |who| {
        format!(
            "{who} set forbidden securityContext.seLinuxOptions: {}",
            problems.join("; ")
        )
    })
}

/// Before policy v1.19: the seccomp alpha annotations may name only the
/// runtime's default or a local profile.
pub(super) fn seccomp_annotations(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let allowed =
        |v: &str| v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/");
    let annotations = meta.annotations.as_ref();
    let value_of = |key: &str| annotations.and_then(|a| a.get(key));
    let mut forbidden = BTreeSet::new();
    if let Some(value) = value_of(SECCOMP_POD_ANNOTATION).filter(|v| !allowed(v)) {
        forbidden.insert(format!("{SECCOMP_POD_ANNOTATION}={}", go_quote(value)));
    }
    for c in containers(spec) {
        let key = format!("{SECCOMP_CONTAINER_ANNOTATION_PREFIX}{}", c.name);
        if let Some(value) = value_of(&key).filter(|v| !allowed(v)) {
            forbidden.insert(format!("{key}={}", go_quote(value)));
        }
    }
    if forbidden.is_empty() {
        return None;
    }
    Violation::new(
        "seccompProfile",
        format!(
            "forbidden {} {}",
            pluralize("annotation", "annotations", forbidden.len()),
            forbidden.into_iter().collect::<Vec<_>>().join(", ")
        ),
    )
}

/// From policy v1.19: a seccomp profile, where set, must be
/// `RuntimeDefault` or `Localhost` (unset is fine at baseline).
pub(super) fn seccomp_profile(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let (pod_bad, bad_containers, bad_values) = unconfined_profiles(
        spec,
        |sc| sc.seccomp_profile.as_ref().map(|p| p.type_.as_str()),
        |sc| sc.seccomp_profile.as_ref().map(|p| p.type_.as_str()),
    );
    failed_by(pod_bad, &bad_containers, "seccompProfile", |who| {
        format!(
            "{who} must not set securityContext.seccompProfile.type to {}",
            join_quote(&bad_values)
        )
    })
}

/// Sysctls safe to set from any policy version.
const SYSCTLS_1_0: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];
/// Added at v1.27.
const SYSCTLS_1_27: &[&str] = &["net.ipv4.ip_local_reserved_ports"];
/// Added at v1.29.
const SYSCTLS_1_29: &[&str] = &[
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];
/// Added at v1.32.
const SYSCTLS_1_32: &[&str] = &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];

pub(super) fn sysctls_1_0(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    sysctls(meta, spec, &[SYSCTLS_1_0])
}

pub(super) fn sysctls_1_27(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    sysctls(meta, spec, &[SYSCTLS_1_0, SYSCTLS_1_27])
}

pub(super) fn sysctls_1_29(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    sysctls(meta, spec, &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29])
}

pub(super) fn sysctls_1_32(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    sysctls(
        meta,
        spec,
        &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29, SYSCTLS_1_32],
    )
}

/// Only namespaced sysctls isolated from other pods may be set.
fn sysctls(_: &ObjectMeta, spec: &PodSpec, safe: &[&[&str]]) -> Option<Violation> {
    let forbidden: Vec<&str> = spec
        .security_context
        .as_ref()
        .and_then(|sc| sc.sysctls.as_ref())
        .into_iter()
        .flatten()
        .map(|s| s.name.as_str())
        .filter(|name| !safe.iter().any(|set| set.contains(name)))
        .collect();
    Violation::listing("forbidden sysctls", &forbidden, ", ")
}

/// No Windows host-process pods or containers.
pub(super) fn windows_host_process(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let pod_bad = spec
        .security_context
        .as_ref()
        .and_then(|sc| sc.windows_options.as_ref())
        .and_then(|w| w.host_process)
        == Some(true);
    let bad_containers = containers_where(spec, |c| {
        c.security
            .and_then(|sc| sc.windows_options.as_ref())
            .and_then(|w| w.host_process)
            == Some(true)
    });
    failed_by(pod_bad, &bad_containers, "hostProcess", |who| {
        format!("{who} must not set securityContext.windowsOptions.hostProcess=true")
    })
}
