//! k3s's pass-through flags for the components it runs as separate
//! programs (`--kubelet-arg max-pods=250`, `--kube-apiserver-arg
//! audit-log-path=…`), read as the skiff flag that holds the same setting,
//! so the configuration people bring from k3s works unchanged.
//!
//! skiff runs no kubelet or kube-apiserver binary to hand such flags to:
//! each upstream flag is mapped to the skiff flag of the same meaning (most
//! share its name), and one skiff has no setting for is refused at start
//! with what it does take, rather than ignored. A setting given both ways
//! is refused too, since neither would be plainly the one in force.

use std::ffi::{OsStr, OsString};

/// The pass-through flags, by the component they name.
const COMPONENTS: [(&str, &str); 6] = [
    ("kubelet-arg", "kubelet"),
    ("kube-apiserver-arg", "kube-apiserver"),
    ("kube-controller-manager-arg", "kube-controller-manager"),
    ("kube-scheduler-arg", "kube-scheduler"),
    ("kube-proxy-arg", "kube-proxy"),
    ("etcd-arg", "etcd"),
];

/// Upstream flags skiff has a setting for: (component, upstream flag, skiff
/// flag).
pub(crate) const SETTINGS: &[(&str, &str, &str)] = &[
    ("kubelet", "max-pods", "max-pods"),
    ("kubelet", "eviction-hard", "eviction-hard"),
    ("kubelet", "system-reserved", "system-reserved"),
    ("kubelet", "kube-reserved", "kube-reserved"),
    (
        "kubelet",
        "image-gc-high-threshold",
        "image-gc-high-threshold",
    ),
    (
        "kubelet",
        "image-gc-low-threshold",
        "image-gc-low-threshold",
    ),
    (
        "kubelet",
        "minimum-image-ttl-duration",
        "minimum-image-ttl-duration",
    ),
    ("kubelet", "cgroup-root", "cgroup-root"),
    ("kubelet", "cgroups-per-qos", "cgroups-per-qos"),
    ("kubelet", "pod-max-pids", "pod-max-pids"),
    (
        "kubelet",
        "container-log-max-size",
        "container-log-max-size",
    ),
    (
        "kubelet",
        "container-log-max-files",
        "container-log-max-files",
    ),
    (
        "kubelet",
        "container-log-monitor-interval",
        "container-log-monitor-interval",
    ),
    ("kubelet", "sync-frequency", "sync-frequency"),
    (
        "kubelet",
        "allowed-unsafe-sysctls",
        "allowed-unsafe-sysctls",
    ),
    ("kubelet", "node-ip", "node-ip"),
    ("kubelet", "node-labels", "node-label"),
    ("kubelet", "register-with-taints", "node-taint"),
    ("kubelet", "resolv-conf", "resolv-conf"),
    ("kubelet", "cluster-dns", "cluster-dns"),
    ("kubelet", "cluster-domain", "cluster-domain"),
    (
        "kubelet",
        "container-runtime-endpoint",
        "container-runtime-endpoint",
    ),
    ("kubelet", "hostname-override", "node-name"),
    ("kubelet", "port", "kubelet-port"),
    ("kubelet", "address", "kubelet-address"),
    ("kube-apiserver", "audit-log-path", "audit-log-path"),
    ("kube-apiserver", "audit-policy-file", "audit-policy-file"),
    ("kube-apiserver", "audit-log-maxage", "audit-log-maxage"),
    (
        "kube-apiserver",
        "audit-log-maxbackup",
        "audit-log-maxbackup",
    ),
    ("kube-apiserver", "audit-log-maxsize", "audit-log-maxsize"),
    (
        "kube-apiserver",
        "max-requests-inflight",
        "max-requests-inflight",
    ),
    (
        "kube-apiserver",
        "max-mutating-requests-inflight",
        "max-mutating-requests-inflight",
    ),
    (
        "kube-apiserver",
        "min-request-timeout",
        "min-request-timeout",
    ),
    ("kube-apiserver", "request-timeout", "request-timeout"),
    (
        "kube-apiserver",
        "service-node-port-range",
        "service-node-port-range",
    ),
    ("kube-apiserver", "service-cluster-ip-range", "service-cidr"),
    (
        "kube-apiserver",
        "admission-control-config-file",
        "admission-control-config-file",
    ),
    (
        "kube-apiserver",
        "encryption-provider-config",
        "encryption-provider-config",
    ),
    ("kube-apiserver", "secure-port", "https-listen-port"),
    ("kube-apiserver", "anonymous-auth", "anonymous-auth"),
    (
        "kube-apiserver",
        "authentication-config",
        "authentication-config",
    ),
    ("kube-apiserver", "oidc-issuer-url", "oidc-issuer-url"),
    ("kube-apiserver", "oidc-client-id", "oidc-client-id"),
    (
        "kube-apiserver",
        "oidc-username-claim",
        "oidc-username-claim",
    ),
    (
        "kube-apiserver",
        "oidc-username-prefix",
        "oidc-username-prefix",
    ),
    ("kube-apiserver", "oidc-groups-claim", "oidc-groups-claim"),
    ("kube-apiserver", "oidc-groups-prefix", "oidc-groups-prefix"),
    ("kube-apiserver", "oidc-ca-file", "oidc-ca-file"),
    (
        "kube-apiserver",
        "oidc-required-claim",
        "oidc-required-claim",
    ),
    ("kube-apiserver", "oidc-signing-algs", "oidc-signing-algs"),
    ("kube-apiserver", "bind-address", "bind-address"),
    (
        "kube-controller-manager",
        "horizontal-pod-autoscaler-sync-period",
        "horizontal-pod-autoscaler-sync-period",
    ),
    ("kube-controller-manager", "cluster-cidr", "cluster-cidr"),
];

/// A pass-through flag skiff cannot honour.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ComponentArgError {
    /// The upstream flag has no skiff setting (for this command).
    #[error(
        "--{flag} {name}=…: skiff {command} has no setting for the {component}'s --{name}; \
         from --{flag} it takes {takes}"
    )]
    Unsupported {
        command: String,
        flag: &'static str,
        component: &'static str,
        name: String,
        takes: String,
    },
    /// The same setting is also given as a skiff flag or twice.
    #[error("--{flag}={value} sets --{target}, which is also given otherwise; give it once")]
    Twice {
        flag: &'static str,
        value: String,
        target: &'static str,
    },
    /// The flag came without its `name=value`.
    #[error("--{flag} needs a value such as name=value")]
    Missing { flag: &'static str },
}

/// How a skiff flag of the command takes values, as clap says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FlagKind {
    /// Given at most once.
    Single,
    /// Repeatable (a list).
    Repeated,
}

/// `args` (program name, subcommand, flags) with every pass-through flag
/// of `server` or `agent` replaced by the skiff flag it stands for;
/// `flag_kind(command, long)` says whether the command has that flag.
pub(crate) fn translate(
    args: Vec<OsString>,
    flag_kind: impl Fn(&str, &str) -> Option<FlagKind>,
) -> Result<Vec<OsString>, ComponentArgError> {
    let Some(command) = args.get(1).and_then(|a| a.to_str()).map(str::to_owned) else {
        return Ok(args);
    };
    if command != "server" && command != "agent" {
        return Ok(args);
    }
    let mut out: Vec<OsString> = Vec::with_capacity(args.len());
    let mut translated: Vec<(&'static str, String, &'static str)> = Vec::new();
    let mut rest = args.into_iter();
    out.extend(rest.by_ref().take(2));
    while let Some(arg) = rest.next() {
        let Some((flag, inline)) = pass_through(&arg) else {
            out.push(arg);
            continue;
        };
        let value = match inline {
            Some(v) => v,
            None => rest
                .next()
                .and_then(|v| v.into_string().ok())
                .ok_or(ComponentArgError::Missing { flag })?,
        };
        let component = component_of(flag);
        let setting = value.trim_start_matches('-');
        let (name, given) = match setting.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (setting, None),
        };
        let target = SETTINGS
            .iter()
            .find(|(c, upstream, _)| *c == component && *upstream == name)
            .map(|(_, _, target)| *target)
            .filter(|target| flag_kind(&command, target).is_some());
        let Some(target) = target else {
            let takes: Vec<&str> = SETTINGS
                .iter()
                .filter(|(c, _, target)| *c == component && flag_kind(&command, target).is_some())
                .map(|(_, upstream, _)| *upstream)
                .collect();
            return Err(ComponentArgError::Unsupported {
                command,
                flag,
                component,
                name: name.to_string(),
                takes: if takes.is_empty() {
                    "nothing".into()
                } else {
                    takes.join(", ")
                },
            });
        };
        // A boolean given bare (`--cgroups-per-qos`) means true.
        let given = given.unwrap_or("true");
        translated.push((flag, value.clone(), target));
        out.push(format!("--{target}={given}").into());
    }
    for (flag, value, target) in &translated {
        if flag_kind(&command, target) == Some(FlagKind::Repeated) {
            continue;
        }
        let uses = out.iter().filter(|a| names_flag(a, target)).count();
        if uses > 1 {
            return Err(ComponentArgError::Twice {
                flag,
                value: value.clone(),
                target,
            });
        }
    }
    Ok(out)
}

/// The pass-through flag `arg` is, with its value when given inline.
fn pass_through(arg: &OsStr) -> Option<(&'static str, Option<String>)> {
    let text = arg.to_str()?.strip_prefix("--")?;
    COMPONENTS.iter().find_map(|(flag, _)| {
        let rest = text.strip_prefix(flag)?;
        if rest.is_empty() {
            Some((*flag, None))
        } else {
            rest.strip_prefix('=').map(|v| (*flag, Some(v.to_string())))
        }
    })
}

fn component_of(flag: &str) -> &'static str {
    COMPONENTS
        .iter()
        .find(|(f, _)| *f == flag)
        .map(|(_, c)| *c)
        .unwrap_or("component")
}

/// Whether `arg` is the long flag `--name` (alone or with `=value`).
fn names_flag(arg: &OsStr, name: &str) -> bool {
    arg.to_str()
        .and_then(|a| a.strip_prefix("--"))
        .and_then(|a| a.strip_prefix(name))
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('='))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(_: &str, flag: &str) -> Option<FlagKind> {
        match flag {
            "node-label" => Some(FlagKind::Repeated),
            "max-pods" | "audit-log-path" | "cgroups-per-qos" | "node-name" => {
                Some(FlagKind::Single)
            }
            _ => None,
        }
    }

    fn run(args: &[&str]) -> Result<Vec<String>, ComponentArgError> {
        translate(args.iter().map(OsString::from).collect(), kinds).map(|out| {
            out.into_iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        })
    }

    #[test]
    fn upstream_flags_become_the_skiff_flags_of_the_same_setting() {
        let out = run(&[
            "skiff",
            "server",
            "--kubelet-arg=max-pods=250",
            "--kubelet-arg",
            "--node-labels=a=b,c=d",
            "--kube-apiserver-arg=audit-log-path=/var/log/audit.log",
            "--kubelet-arg=cgroups-per-qos",
            "--node-label=e=f",
            "--kubelet-arg=hostname-override=edge-1",
        ])
        .expect("translated");
        assert_eq!(
            out,
            [
                "skiff",
                "server",
                "--max-pods=250",
                "--node-label=a=b,c=d",
                "--audit-log-path=/var/log/audit.log",
                "--cgroups-per-qos=true",
                "--node-label=e=f",
                "--node-name=edge-1",
            ]
        );
        // Other commands are left alone.
        let other = run(&["skiff", "images", "--kubelet-arg=max-pods=1"]).expect("untouched");
        assert_eq!(other[2], "--kubelet-arg=max-pods=1");
    }

    #[test]
    fn what_skiff_cannot_honour_is_refused_with_what_it_takes() {
        let err = run(&["skiff", "agent", "--kubelet-arg=feature-gates=Foo=true"])
            .expect_err("no such setting");
        let text = err.to_string();
        assert!(
            text.contains("skiff agent has no setting for the kubelet's --feature-gates"),
            "{text}"
        );
        assert!(text.contains("it takes max-pods"), "{text}");
        // A setting of a component this command does not run.
        let err = run(&["skiff", "agent", "--kube-scheduler-arg=v=2"]).expect_err("scheduler");
        assert!(err.to_string().contains("takes nothing"), "{err}");
        // Given twice, one way or two.
        let err = run(&[
            "skiff",
            "server",
            "--max-pods=9",
            "--kubelet-arg=max-pods=250",
        ])
        .expect_err("twice");
        assert!(err.to_string().contains("sets --max-pods"), "{err}");
        let err = run(&["skiff", "server", "--kubelet-arg"]).expect_err("no value");
        assert!(err.to_string().contains("needs a value"), "{err}");
    }
}
