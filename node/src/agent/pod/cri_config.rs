//! CRI configs built from a pod: the sandbox (metadata, hostname, log
//! directory, labels with the pod UID, host ports) and each container
//! (command, args, env, mounts, resources, log path).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::cgroups::{CPU_PERIOD_US, MIN_QUOTA_US, cpu_shares};
use super::dns_config;
use super::labels;
use crate::runtime::cri_api as api;
use skiff_common::quantity;

/// A writable mount of the host's `host` at `container_path`: how every
/// file or directory the agent prepared reaches a container.
fn bind_mount(container_path: &str, host: &Path) -> api::Mount {
    api::Mount {
        container_path: container_path.to_owned(),
        host_path: host.to_string_lossy().into_owned(),
        ..Default::default()
    }
}

/// Whether the volume `name` holds files the agent writes (configMap,
/// secret, downwardAPI, projected): always mounted read-only, as upstream
/// mounts them since CVE-2017-1002102, so a container cannot plant links
/// the agent would follow when it writes them again.
fn written_by_agent(pod: &Pod, name: &str) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .find(|v| v.name == name)
        .is_some_and(|v| {
            v.config_map.is_some()
                || v.secret.is_some()
                || v.downward_api.is_some()
                || v.projected.is_some()
        })
}

/// A mount's `mountPropagation` as the runtime names it (`None` and unset:
/// private). The host side needs a shared mount for the other two, which
/// the agent makes of its pods directory (`volumes::propagation`).
fn propagation(mode: Option<&str>) -> api::MountPropagation {
    match mode {
        Some("HostToContainer") => api::MountPropagation::PropagationHostToContainer,
        Some("Bidirectional") => api::MountPropagation::PropagationBidirectional,
        _ => api::MountPropagation::PropagationPrivate,
    }
}

/// The pod's log directory: `<root>/<namespace>_<name>_<uid>`.
pub fn pod_log_dir(log_root: &Path, pod: &Pod) -> PathBuf {
    let m = &pod.metadata;
    log_root.join(format!(
        "{}_{}_{}",
        m.namespace.as_deref().unwrap_or("default"),
        m.name.as_deref().unwrap_or_default(),
        m.uid.as_deref().unwrap_or_default()
    ))
}

/// A container instance's log file relative to the pod log dir.
pub fn container_log_path(container: &str, restart_count: u32) -> String {
    format!("{container}/{restart_count}.log")
}

/// The sandbox config of `pod`; `dns` gives its resolv.conf and host name,
/// `cgroup_parent` the pod's cgroup (containerd creates the sandbox and
/// every container below it).
pub fn sandbox_config(
    pod: &Pod,
    log_root: &Path,
    attempt: u32,
    dns: &dns_config::PodDnsInputs,
    cgroup_parent: Option<String>,
) -> api::PodSandboxConfig {
    let m = &pod.metadata;
    let namespace = m.namespace.clone().unwrap_or_else(|| "default".into());
    let name = m.name.clone().unwrap_or_default();
    let uid = m.uid.clone().unwrap_or_default();
    let spec = pod.spec.as_ref();
    let mut sandbox_labels: HashMap<String, String> =
        m.labels.clone().unwrap_or_default().into_iter().collect();
    sandbox_labels.extend(labels::pod_labels(&namespace, &name, &uid));
    let hostname = dns_config::sandbox_hostname(pod, &dns.cluster.domain);
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let port_mappings = spec
        .into_iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let host_port = p.host_port.filter(|h| *h > 0)?;
            let protocol = match p.protocol.as_deref() {
                Some("UDP") => api::Protocol::Udp,
                Some("SCTP") => api::Protocol::Sctp,
                _ => api::Protocol::Tcp,
            };
            Some(api::PortMapping {
                protocol: protocol as i32,
                container_port: p.container_port,
                host_port,
                host_ip: p.host_ip.clone().unwrap_or_default(),
            })
        })
        .collect();
    api::PodSandboxConfig {
        metadata: Some(api::PodSandboxMetadata {
            name,
            uid,
            namespace,
            attempt,
        }),
        hostname: if host_network {
            String::new()
        } else {
            hostname
        },
        log_directory: pod_log_dir(log_root, pod).to_string_lossy().into_owned(),
        dns_config: Some(dns_config::sandbox_dns(pod, dns)),
        port_mappings,
        labels: sandbox_labels,
        annotations: m
            .annotations
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        linux: Some(api::LinuxPodSandboxConfig {
            security_context: Some(api::LinuxSandboxSecurityContext {
                namespace_options: Some(namespace_options(pod, None)),
                // The runtime refuses a privileged container in a sandbox
                // that is not privileged itself.
                privileged: has_privileged_container(pod),
                ..Default::default()
            }),
            sysctls: super::sysctls::of(pod),
            cgroup_parent: cgroup_parent.unwrap_or_default(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Whether any container of the pod, init and ephemeral ones included, is
/// privileged (what makes the kubelet's sandbox privileged).
fn has_privileged_container(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    let privileged = |sc: Option<&k8s_openapi::api::core::v1::SecurityContext>| {
        sc.and_then(|sc| sc.privileged).unwrap_or(false)
    };
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .any(|c| privileged(c.security_context.as_ref()))
        || spec
            .ephemeral_containers
            .iter()
            .flatten()
            .any(|c| privileged(c.security_context.as_ref()))
}

/// The namespaces the sandbox and each of its containers run in: the
/// host's network for `hostNetwork`, one PID namespace for the pod with
/// `shareProcessNamespace` (else the container's own, or that of the
/// container `pid_target` names), IPC always shared by the pod.
fn namespace_options(pod: &Pod, pid_target: Option<&str>) -> api::NamespaceOption {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let share_pid = spec
        .and_then(|s| s.share_process_namespace)
        .unwrap_or(false);
    api::NamespaceOption {
        network: if host_network {
            api::NamespaceMode::Node
        } else {
            api::NamespaceMode::Pod
        } as i32,
        pid: match (share_pid, pid_target) {
            (true, _) => api::NamespaceMode::Pod,
            (false, Some(_)) => api::NamespaceMode::Target,
            (false, None) => api::NamespaceMode::Container,
        } as i32,
        ipc: api::NamespaceMode::Pod as i32,
        target_id: pid_target.unwrap_or_default().to_string(),
        ..Default::default()
    }
}

/// Everything a container config needs beyond the spec.
pub struct ContainerInputs<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// Image reference to run.
    pub image: String,
    /// Resolved environment.
    pub env: Vec<(String, String)>,
    /// Command after `$(VAR)` expansion.
    pub command: Vec<String>,
    /// Args after `$(VAR)` expansion.
    pub args: Vec<String>,
    /// Volume name → host path.
    pub volumes: &'a HashMap<String, PathBuf>,
    /// Mount index → the pinned mount point of its part of a volume
    /// (`volumes::sub_path`); a mount with a sub path missing here is left
    /// out rather than given the whole volume.
    pub sub_paths: HashMap<usize, PathBuf>,
    /// Restart count of the new instance.
    pub restart_count: u32,
    /// Whether it is an init container.
    pub init: bool,
    /// The runtime id of the container whose process namespace this one
    /// joins (an ephemeral container's target).
    pub pid_target: Option<String>,
    /// The host file mounted at the container's `terminationMessagePath`
    /// (read back when it ends), when there is one.
    pub termination_log: Option<PathBuf>,
    /// The pod's managed `/etc/hosts` (see `hosts_file`), mounted unless
    /// the container mounts a volume there itself.
    pub hosts_file: Option<PathBuf>,
    /// Where `Localhost` seccomp profiles are named from
    /// (`DATA_DIR/agent/seccomp`).
    pub seccomp_root: &'a Path,
    /// The container's `oom_score_adj` (`crate::oom_score`).
    pub oom_score_adj: i64,
}

/// The CRI config of one container instance.
pub fn container_config(
    container: &Container,
    inputs: &ContainerInputs<'_>,
) -> api::ContainerConfig {
    let m = &inputs.pod.metadata;
    let mut container_labels = labels::pod_labels(
        m.namespace.as_deref().unwrap_or("default"),
        m.name.as_deref().unwrap_or_default(),
        m.uid.as_deref().unwrap_or_default(),
    );
    container_labels.insert(labels::CONTAINER_NAME.into(), container.name.clone());
    let mut annotations = HashMap::from([(
        labels::RESTART_COUNT.to_string(),
        inputs.restart_count.to_string(),
    )]);
    if inputs.init {
        annotations.insert(labels::INIT_CONTAINER.into(), "true".into());
    }
    let termination = inputs.termination_log.as_ref().and_then(|host| {
        let path = container.termination_message_path.as_deref()?;
        (!path.is_empty()).then(|| bind_mount(path, host))
    });
    let own_hosts = container
        .volume_mounts
        .iter()
        .flatten()
        .any(|vm| vm.mount_path == "/etc/hosts");
    let hosts = inputs
        .hosts_file
        .as_ref()
        .filter(|_| !own_hosts)
        .map(|host| bind_mount("/etc/hosts", host));
    let mounts = container
        .volume_mounts
        .iter()
        .flatten()
        .enumerate()
        .filter_map(|(index, vm)| {
            let base = inputs.volumes.get(&vm.name)?;
            let has_sub_path = [&vm.sub_path, &vm.sub_path_expr]
                .iter()
                .any(|s| s.as_deref().is_some_and(|s| !s.is_empty()));
            let host = match inputs.sub_paths.get(&index) {
                Some(pinned) => pinned.clone(),
                None if has_sub_path => return None,
                None => base.clone(),
            };
            Some(api::Mount {
                readonly: vm.read_only.unwrap_or(false) || written_by_agent(inputs.pod, &vm.name),
                propagation: propagation(vm.mount_propagation.as_deref()) as i32,
                ..bind_mount(&vm.mount_path, &host)
            })
        })
        .chain(termination)
        .chain(hosts)
        .collect();
    let security = container.security_context.as_ref();
    let settings = super::security::effective(inputs.pod, container);
    let (apparmor, apparmor_profile) =
        super::apparmor::for_runtime(super::apparmor::profile(inputs.pod, container).as_ref());
    api::ContainerConfig {
        metadata: Some(api::ContainerMetadata {
            name: container.name.clone(),
            attempt: inputs.restart_count,
        }),
        image: Some(api::ImageSpec {
            image: inputs.image.clone(),
            ..Default::default()
        }),
        command: inputs.command.clone(),
        args: inputs.args.clone(),
        working_dir: container.working_dir.clone().unwrap_or_default(),
        envs: inputs
            .env
            .iter()
            .map(|(key, value)| api::KeyValue {
                key: key.clone(),
                value: value.clone(),
            })
            .collect(),
        mounts,
        labels: container_labels,
        annotations,
        log_path: container_log_path(&container.name, inputs.restart_count),
        stdin: container.stdin.unwrap_or(false),
        stdin_once: container.stdin_once.unwrap_or(false),
        tty: container.tty.unwrap_or(false),
        linux: Some(api::LinuxContainerConfig {
            resources: Some(api::LinuxContainerResources {
                oom_score_adj: inputs.oom_score_adj,
                ..linux_resources(container)
            }),
            security_context: Some(api::LinuxContainerSecurityContext {
                privileged: security.and_then(|s| s.privileged).unwrap_or(false),
                readonly_rootfs: security
                    .and_then(|s| s.read_only_root_filesystem)
                    .unwrap_or(false),
                run_as_user: settings.run_as_user.map(|value| api::Int64Value { value }),
                run_as_group: settings.run_as_group.map(|value| api::Int64Value { value }),
                supplemental_groups: settings.supplemental_groups.clone(),
                no_new_privs: settings.no_new_privs,
                seccomp: seccomp_profile(settings.seccomp.as_ref(), inputs.seccomp_root),
                apparmor,
                #[allow(deprecated)]
                apparmor_profile,
                namespace_options: Some(namespace_options(
                    inputs.pod,
                    inputs.pid_target.as_deref(),
                )),
                capabilities: security.and_then(|s| s.capabilities.as_ref()).map(|c| {
                    api::Capability {
                        add_capabilities: c.add.clone().unwrap_or_default(),
                        drop_capabilities: c.drop.clone().unwrap_or_default(),
                        ..Default::default()
                    }
                }),
                ..Default::default()
            }),
        }),
        ..Default::default()
    }
}

/// The runtime's seccomp profile for the one asked for: none, the
/// runtime's default, or a `Localhost` file named below `root` (the
/// kubelet's `<root-dir>/seccomp`; `security::verify_seccomp` has kept the
/// name inside it).
fn seccomp_profile(
    asked: Option<&k8s_openapi::api::core::v1::SeccompProfile>,
    root: &Path,
) -> Option<api::SecurityProfile> {
    use api::security_profile::ProfileType;
    let asked = asked?;
    let (profile_type, localhost_ref) = match asked.type_.as_str() {
        "Unconfined" => (ProfileType::Unconfined, String::new()),
        "Localhost" => (
            ProfileType::Localhost,
            root.join(asked.localhost_profile.as_deref().unwrap_or_default())
                .display()
                .to_string(),
        ),
        _ => (ProfileType::RuntimeDefault, String::new()),
    };
    Some(api::SecurityProfile {
        profile_type: profile_type as i32,
        localhost_ref,
    })
}

/// CPU shares from the request, CFS quota and memory limit from the limits.
pub fn linux_resources(container: &Container) -> api::LinuxContainerResources {
    let resources = container.resources.as_ref();
    let request = |name: &str| {
        resources
            .and_then(|r| r.requests.as_ref())
            .and_then(|m| m.get(name))
    };
    let limit = |name: &str| {
        resources
            .and_then(|r| r.limits.as_ref())
            .and_then(|m| m.get(name))
    };
    // A limit without a request requests the limit (API defaulting does the
    // same, but the agent may see objects from older servers).
    let cpu_request = request("cpu")
        .or(limit("cpu"))
        .and_then(quantity::milli_value);
    let shares = i64::try_from(cpu_shares(cpu_request.unwrap_or(0))).unwrap_or(i64::MAX);
    let quota = limit("cpu")
        .and_then(quantity::milli_value)
        .map(|milli| (milli * CPU_PERIOD_US / 1000).max(MIN_QUOTA_US))
        .unwrap_or(0);
    api::LinuxContainerResources {
        cpu_shares: shares,
        cpu_period: if quota > 0 { CPU_PERIOD_US } else { 0 },
        cpu_quota: quota,
        memory_limit_in_bytes: limit("memory").and_then(quantity::value).unwrap_or(0),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_map_to_shares_quota_and_memory() {
        let c: Container = serde_json::from_value(serde_json::json!({
            "name": "c",
            "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m", "memory": "64Mi"}}
        }))
        .unwrap();
        let r = linux_resources(&c);
        assert_eq!(r.cpu_shares, 256);
        assert_eq!((r.cpu_period, r.cpu_quota), (100_000, 50_000));
        assert_eq!(r.memory_limit_in_bytes, 64 << 20);
        let none = linux_resources(&Container::default());
        assert_eq!(
            (none.cpu_shares, none.cpu_quota, none.memory_limit_in_bytes),
            (2, 0, 0)
        );
    }

    #[test]
    fn sandbox_carries_uid_labels_log_dir_and_host_ports() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "labels": {"app": "x"}},
            "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}
        }))
        .unwrap();
        let dns = dns_config::PodDnsInputs {
            cluster: Default::default(),
            host: dns_config::ResolvConf::parse("nameserver 192.0.2.53\n"),
        };
        let cfg = sandbox_config(
            &pod,
            Path::new("/logs"),
            2,
            &dns,
            Some("/kubepods/podu1".into()),
        );
        assert_eq!(cfg.labels[labels::POD_UID], "u1");
        assert_eq!(cfg.labels["app"], "x");
        assert_eq!(cfg.log_directory, "/logs/ns_web_u1");
        assert_eq!(cfg.hostname, "web");
        assert_eq!(cfg.metadata.unwrap().attempt, 2);
        assert_eq!(cfg.port_mappings[0].host_port, 8080);
        assert_eq!(cfg.linux.as_ref().unwrap().cgroup_parent, "/kubepods/podu1");
        let resolv = cfg.dns_config.expect("pods get a DNS config");
        assert_eq!(resolv.servers, ["10.43.0.10"]);
        assert_eq!(resolv.searches[0], "ns.svc.cluster.local");
    }
}
