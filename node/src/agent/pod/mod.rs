//! How a pod runs on this node: one worker per pod (`pod_workers`) woken
//! by the pod informer and by the runtime's relist (`pleg`); each wake is
//! one `sync` step — sandbox, image (`images`, `pull_secrets`), init
//! containers then containers built from the pod (`cri_config`, `security`,
//! `apparmor`, `hosts_file`, `env` with `service_env`,
//! `dns_config`), `probes` (gRPC ones in `grpc_probe`), lifecycle `hooks`, restart `backoff`, the
//! `ephemeral` containers
//! `kubectl debug` adds — followed by the
//! `status` report and the containers' events (`container_events`); a
//! deleted pod ends through `termination`. The
//! runtime is read back by pod UID (`labels`, `runtime_view`), the
//! containers' log files are read by `logs`, and CRI errors are worded as
//! a kubelet words them (`cri_text`).

pub(crate) mod admission;
pub(crate) mod apparmor;
pub mod backoff;
pub(crate) mod cgroups;
pub(crate) mod container_events;
pub(crate) mod context;
pub mod cri_config;
pub(crate) mod cri_text;
pub mod dns_config;
pub(crate) mod downward;
pub(crate) mod env;
pub(crate) mod ephemeral;
pub(crate) mod expand;
pub(crate) mod grpc_probe;
pub(crate) mod hooks;
pub(crate) mod hosts_file;
pub(crate) mod images;
pub mod labels;
pub mod log_rotation;
pub mod logs;
pub(crate) mod pleg;
pub(crate) mod pod_workers;
pub(crate) mod probes;
pub(crate) mod pull_secrets;
pub(crate) mod resize;
pub(crate) mod runtime_view;
pub(crate) mod security;
pub(crate) mod service_env;
pub(crate) mod status;
pub(crate) mod sync;
pub mod sysctls;
pub(crate) mod termination;

/// Where `Localhost` seccomp profiles live for an agent in `agent_dir`
/// (the kubelet's `<root-dir>/seccomp`).
pub fn seccomp_root(agent_dir: &std::path::Path) -> std::path::PathBuf {
    agent_dir.join("seccomp")
}
