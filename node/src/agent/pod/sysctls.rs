//! Pod sysctls, as upstream's kubelet handles them: a pod asks for kernel
//! parameters in `spec.securityContext.sysctls`; the node admits it only
//! when each one is on its allowlist (upstream's safe set, plus what the
//! admin allows with `--allowed-unsafe-sysctls`), and the runtime sets them
//! in the pod's sandbox. A pod asking for one the node does not allow is
//! rejected before anything of it runs (`SysctlForbidden`).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Pod, Sysctl};

/// Upstream's reason for a pod rejected over a sysctl.
pub(crate) const FORBIDDEN_REASON: &str = "SysctlForbidden";

/// The sysctls every node allows: namespaced, and isolated from other pods
/// (upstream's safe set; every one is in the kernels this runs on).
const SAFE: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// The Linux namespace a sysctl belongs to; only namespaced sysctls can be
/// set for one pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Namespace {
    Ipc,
    Net,
}

impl Namespace {
    /// The namespace of `name` (dotted), or `None` for a sysctl the kernel
    /// keeps for the whole host.
    fn of(name: &str) -> Option<Self> {
        const IPC_PREFIXES: &[&str] = &["kernel.shm", "kernel.msg", "fs.mqueue."];
        if name == "kernel.sem" || IPC_PREFIXES.iter().any(|p| name.starts_with(p)) {
            Some(Self::Ipc)
        } else if name.starts_with("net.") {
            Some(Self::Net)
        } else {
            None
        }
    }

    /// The word upstream's refusal uses for the host namespace.
    fn word(self) -> &'static str {
        match self {
            Self::Ipc => "ipc",
            Self::Net => "net",
        }
    }
}

/// A pattern of `--allowed-unsafe-sysctls` that no pod could use.
#[derive(Debug, thiserror::Error)]
#[error("the sysctl {0:?} is not known to be namespaced")]
pub struct NotNamespaced(pub String);

/// What this node lets pods set: sysctl names and `prefix*` patterns, each
/// with its namespace.
#[derive(Debug, Clone)]
pub struct Allowlist {
    names: HashMap<String, Namespace>,
    prefixes: Vec<(String, Namespace)>,
}

impl Default for Allowlist {
    /// Upstream's safe set alone, a kubelet's default.
    fn default() -> Self {
        Self::with_unsafe(&[]).unwrap_or_else(|_| Self {
            names: HashMap::new(),
            prefixes: Vec::new(),
        })
    }
}

impl Allowlist {
    /// The safe set plus the admin's `unsafe_patterns` (names, or prefixes
    /// ending in `*`; dots or slashes as separators). A pattern outside
    /// any namespace is refused, as upstream's kubelet refuses to start
    /// with one.
    pub fn with_unsafe(unsafe_patterns: &[String]) -> Result<Self, NotNamespaced> {
        let mut list = Self {
            names: HashMap::new(),
            prefixes: Vec::new(),
        };
        let safe = SAFE.iter().map(|s| (*s).to_owned());
        for pattern in safe.chain(unsafe_patterns.iter().cloned()) {
            let pattern = dotted(&pattern);
            match pattern.strip_suffix('*') {
                Some(prefix) => {
                    let ns = Namespace::of(prefix).ok_or_else(|| NotNamespaced(pattern.clone()))?;
                    list.prefixes.push((prefix.to_owned(), ns));
                }
                None => {
                    let ns =
                        Namespace::of(&pattern).ok_or_else(|| NotNamespaced(pattern.clone()))?;
                    list.names.insert(pattern, ns);
                }
            }
        }
        Ok(list)
    }

    /// Admits `pod` as upstream's kubelet does, or says which sysctl is
    /// forbidden, in upstream's words (the message of a rejected pod).
    pub(crate) fn admit(&self, pod: &Pod) -> Result<(), String> {
        let Some(spec) = pod.spec.as_ref() else {
            return Ok(());
        };
        let host_net = spec.host_network.unwrap_or(false);
        let host_ipc = spec.host_ipc.unwrap_or(false);
        for sysctl in asked(pod) {
            let name = dotted(&sysctl.name);
            let ns = self.names.get(&name).copied().or_else(|| {
                self.prefixes
                    .iter()
                    .find(|(p, _)| name.starts_with(p.as_str()))
                    .map(|(_, ns)| *ns)
            });
            let shared = |ns: Namespace| match ns {
                Namespace::Ipc => host_ipc,
                Namespace::Net => host_net,
            };
            match ns {
                None => return Err(format!("forbidden sysctl: {name:?} not allowlisted")),
                Some(ns) if shared(ns) => {
                    return Err(format!(
                        "forbidden sysctl: {name:?} not allowed with host {} enabled",
                        ns.word()
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

/// The sysctls the runtime sets in `pod`'s sandbox, by dotted name.
pub(crate) fn of(pod: &Pod) -> HashMap<String, String> {
    asked(pod)
        .iter()
        .map(|s| (dotted(&s.name), s.value.clone()))
        .collect()
}

/// What `pod` asks for in `spec.securityContext.sysctls`.
fn asked(pod: &Pod) -> &[Sysctl] {
    let context = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    context
        .and_then(|s| s.sysctls.as_deref())
        .unwrap_or_default()
}

/// `name` with dots as separators. A name whose first separator is a slash
/// uses slashes between its parts and may hold dots inside one (an
/// interface `eth0.100`): those swap, as upstream converts them.
fn dotted(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|c| match c {
                '/' => '.',
                '.' => '/',
                c => c,
            })
            .collect(),
        _ => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec};

    use super::*;

    fn pod(sysctls: &[&str], host_network: bool) -> Pod {
        Pod {
            spec: Some(PodSpec {
                host_network: Some(host_network),
                security_context: Some(PodSecurityContext {
                    sysctls: Some(
                        sysctls
                            .iter()
                            .map(|name| Sysctl {
                                name: (*name).to_owned(),
                                value: "1".into(),
                            })
                            .collect(),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_safe_set_is_admitted_and_the_rest_refused_in_upstreams_words() {
        let list = Allowlist::default();
        assert_eq!(
            list.admit(&pod(&["net.ipv4.tcp_syncookies"], false)),
            Ok(())
        );
        assert_eq!(
            list.admit(&pod(&["kernel.msgmax"], false)),
            Err(r#"forbidden sysctl: "kernel.msgmax" not allowlisted"#.into())
        );
        assert_eq!(
            list.admit(&pod(&["net.ipv4.tcp_syncookies"], true)),
            Err(
                r#"forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host net enabled"#
                    .into()
            )
        );
    }

    #[test]
    fn unsafe_patterns_widen_the_list_and_must_be_namespaced() {
        let list = Allowlist::with_unsafe(&["kernel.msg*".into(), "net.core.somaxconn".into()])
            .expect("namespaced");
        assert_eq!(
            list.admit(&pod(&["kernel.msgmax", "net.core.somaxconn"], false)),
            Ok(())
        );
        let refused = Allowlist::with_unsafe(&["vm.swappiness".into()]).unwrap_err();
        assert_eq!(
            refused.to_string(),
            r#"the sysctl "vm.swappiness" is not known to be namespaced"#
        );
    }

    #[test]
    fn slashed_names_become_dotted_keeping_dots_inside_a_part() {
        assert_eq!(
            dotted("net/ipv4/conf/eth0.100/forwarding"),
            "net.ipv4.conf.eth0/100.forwarding"
        );
        assert_eq!(dotted("kernel.shm_rmid_forced"), "kernel.shm_rmid_forced");
        let mut asked = pod(&["net/ipv4/ip_local_port_range"], false);
        asked
            .spec
            .as_mut()
            .and_then(|s| s.security_context.as_mut())
            .and_then(|s| s.sysctls.as_mut())
            .expect("sysctls")[0]
            .value = "1024 65000".into();
        assert_eq!(of(&asked)["net.ipv4.ip_local_port_range"], "1024 65000");
    }
}
