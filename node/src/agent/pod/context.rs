//! What every pod worker shares: the API client, the runtime, the node's
//! identity and directories, and the back-off settings.

use std::path::PathBuf;
use std::sync::Arc;

use super::backoff::BackoffConfig;
use super::downward::NodeAllocatable;
use crate::runtime::Runtime;
use skiff_common::events::EventRecorder;

/// Shared, read-only state of the agent.
pub(crate) struct AgentContext {
    /// The API client, acting as this node (`system:node:<name>`; in-process
    /// in `skiff server`).
    pub client: kube::Client,
    /// The container runtime.
    pub runtime: Arc<dyn Runtime>,
    /// This node's name.
    pub node_name: String,
    /// This node's InternalIP (pods' `hostIP`).
    pub host_ip: String,
    /// `DATA_DIR/agent`.
    pub agent_dir: PathBuf,
    /// Root of the pod log directories.
    pub log_root: PathBuf,
    /// Allocatable resources (defaults of unset limits).
    pub allocatable: NodeAllocatable,
    /// The node's memory in bytes (`MemTotal`), what a Burstable
    /// container's OOM score is a share of.
    pub memory_capacity: u64,
    /// The node's pod cgroups, unless it gives pods none.
    pub cgroups: Option<super::cgroups::PodCgroups>,
    /// Container restart back-off.
    pub crash_backoff: BackoffConfig,
    /// Image pull back-off.
    pub image_backoff: BackoffConfig,
    /// Cluster DNS and the node's resolv.conf, for pods' DNS config.
    pub dns: super::dns_config::PodDnsInputs,
    /// Pod events (FailedMount, image pull failures).
    pub events: EventRecorder,
    /// The sysctls this node lets pods set.
    pub sysctls: super::sysctls::Allowlist,
    /// Whether the host's kernel enforces AppArmor (a pod asking for a
    /// profile on a host without it is refused).
    pub apparmor: bool,
    /// The node's pressure as last observed (new pods are refused under
    /// it, as the kubelet's eviction manager refuses them).
    pub pressure: tokio::sync::watch::Receiver<crate::agent::node::host::Pressure>,
    /// Pods the eviction manager chose to evict, for their workers to stop.
    pub evictions: crate::agent::eviction::Evictions,
    /// The pods bound to this node (the informer's cache), what admitting
    /// another one counts against.
    pub pods: Arc<skiff_informer::Cache<k8s_openapi::api::core::v1::Pod>>,
    /// Every namespace's Services (the informer's cache), for the
    /// containers' service variables.
    pub services: Arc<skiff_informer::Cache<k8s_openapi::api::core::v1::Service>>,
    /// How often API-sourced volume content is read again
    /// ([`super::super::AgentConfig::sync_frequency`]).
    pub volume_resync: std::time::Duration,
    /// Where this node's local-path volumes live (published on its Node).
    pub storage_dir: PathBuf,
}
