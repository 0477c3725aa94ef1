//! The Node object and its heartbeats: registration, the status (capacity,
//! allocatable, addresses, nodeInfo, conditions) refreshed when it changes
//! and at least every minute, and the Lease renewed every 10 s. Ready
//! follows the runtime's health.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeStatus, NodeSystemInfo};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use skiff_common::wakeups::Ticks;
use tokio::sync::watch;

use super::eviction::EvictionHard;
use super::host::{self, HostFacts, Pressure};
use super::reserved::KeptBack;
use crate::runtime::{Runtime, RuntimeHealth, RuntimeVersion};

/// The kubelet version skiff reports.
pub const KUBELET_VERSION: &str = "v1.33.0-skiff";
const LEASE_NAMESPACE: &str = "kube-node-lease";
const LEASE_DURATION_SECONDS: i32 = 40;
/// Status is written at least this often even when unchanged.
const STATUS_REFRESH: Duration = Duration::from_secs(60);

/// The pieces of the Node's status that change.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeHealth {
    /// The runtime's health, or the error reaching it.
    pub runtime: Result<RuntimeHealth, String>,
    /// Pressure signals.
    pub pressure: Pressure,
}

/// Why a `--node-taint` is not a taint.
#[derive(Debug, thiserror::Error)]
pub enum TaintError {
    /// Not `key[=value]:Effect`.
    #[error("invalid taint spec {0:?}: want key=value:Effect or key:Effect")]
    Shape(String),
    /// The effect is none of the three.
    #[error(
        "invalid taint effect {effect:?} in {spec:?}: unsupported taint effect, want NoSchedule, PreferNoSchedule or NoExecute"
    )]
    Effect {
        /// The whole spec.
        spec: String,
        /// Its effect.
        effect: String,
    },
}

/// A taint written as kubectl and `--register-with-taints` write it:
/// `key=value:Effect`, or `key:Effect` without a value. (The key's and the
/// value's syntax is the API server's to judge when the Node is created.)
pub fn parse_taint(spec: &str) -> Result<k8s_openapi::api::core::v1::Taint, TaintError> {
    let (key_value, effect) = spec
        .rsplit_once(':')
        .ok_or_else(|| TaintError::Shape(spec.to_string()))?;
    let (key, value) = match key_value.split_once('=') {
        Some((key, value)) => (key, Some(value.to_string())),
        None => (key_value, None),
    };
    if key.is_empty() {
        return Err(TaintError::Shape(spec.to_string()));
    }
    if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
        return Err(TaintError::Effect {
            spec: spec.to_string(),
            effect: effect.to_string(),
        });
    }
    Ok(k8s_openapi::api::core::v1::Taint {
        key: key.to_string(),
        value,
        effect: effect.to_string(),
        time_added: None,
    })
}

/// The Node as registered: labels, and the taints it starts with.
pub fn node_object(
    name: &str,
    labels: &BTreeMap<String, String>,
    taints: &[k8s_openapi::api::core::v1::Taint],
) -> Node {
    let mut all_labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", go_arch()),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", go_arch()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    all_labels.extend(labels.clone());
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(all_labels),
            ..Default::default()
        },
        spec: (!taints.is_empty()).then(|| k8s_openapi::api::core::v1::NodeSpec {
            taints: Some(taints.to_vec()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub(crate) use skiff_common::platform::go_arch;

/// Millicores as a quantity: whole cores bare (`2`), else in `m` (`1750m`),
/// as upstream's arithmetic on quantities prints them.
fn milli_cores(milli: u64) -> String {
    if milli.is_multiple_of(1000) {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// The Node's addresses in the order k3s publishes them: InternalIP,
/// ExternalIP when the node has one, Hostname.
fn node_addresses(name: &str, facts: &HostFacts) -> Vec<NodeAddress> {
    let address = |type_: &str, address: &str| NodeAddress {
        type_: type_.into(),
        address: address.to_string(),
    };
    let mut addresses = vec![address("InternalIP", &facts.internal_ip)];
    addresses.extend(
        facts
            .external_ip
            .as_deref()
            .map(|ip| address("ExternalIP", ip)),
    );
    addresses.push(address("Hostname", name));
    addresses
}

/// The Node status.
pub fn node_status(
    name: &str,
    facts: &HostFacts,
    version: Option<&RuntimeVersion>,
    health: &NodeHealth,
    kept_back: &KeptBack,
    previous: Option<&NodeStatus>,
) -> NodeStatus {
    let now = Time(Timestamp::now());
    let capacity: BTreeMap<String, Quantity> = [
        ("cpu", facts.cpus.to_string()),
        ("memory", format!("{}Ki", facts.memory / 1024)),
        ("pods", facts.max_pods.to_string()),
        ("ephemeral-storage", format!("{}Ki", facts.disk / 1024)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), Quantity(v)))
    .collect();
    let mut allocatable = capacity.clone();
    let offered = kept_back.allocatable(facts.capacity());
    allocatable.extend([
        ("cpu".to_owned(), Quantity(milli_cores(offered.cpu_milli))),
        (
            "memory".to_owned(),
            Quantity(format!("{}Ki", offered.memory / 1024)),
        ),
        (
            "ephemeral-storage".to_owned(),
            Quantity(offered.ephemeral_storage.to_string()),
        ),
    ]);
    let (ready, ready_reason, ready_message) = match &health.runtime {
        Ok(h) if h.is_ready() => (
            true,
            "KubeletReady",
            "kubelet is posting ready status".to_string(),
        ),
        Ok(h) => (
            false,
            "KubeletNotReady",
            format!("container runtime not ready: {}", h.message),
        ),
        Err(e) => (
            false,
            "KubeletNotReady",
            format!("container runtime is down: {e}"),
        ),
    };
    let p = health.pressure;
    let wanted = [
        ("Ready", ready, ready_reason, ready_message),
        (
            "MemoryPressure",
            p.memory,
            if p.memory {
                "KubeletHasInsufficientMemory"
            } else {
                "KubeletHasSufficientMemory"
            },
            format!(
                "kubelet has {} memory available",
                if p.memory {
                    "insufficient"
                } else {
                    "sufficient"
                }
            ),
        ),
        (
            "DiskPressure",
            p.disk,
            if p.disk {
                "KubeletHasDiskPressure"
            } else {
                "KubeletHasNoDiskPressure"
            },
            format!(
                "kubelet has {}disk pressure",
                if p.disk { "" } else { "no " }
            ),
        ),
        (
            "PIDPressure",
            p.pids,
            if p.pids {
                "KubeletHasInsufficientPID"
            } else {
                "KubeletHasSufficientPID"
            },
            format!(
                "kubelet has {} PID available",
                if p.pids { "insufficient" } else { "sufficient" }
            ),
        ),
    ];
    let conditions = wanted
        .into_iter()
        .map(|(type_, on, reason, message)| {
            let status = if on { "True" } else { "False" }.to_string();
            let transition = previous
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
                .filter(|c| c.status == status)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| now.clone());
            NodeCondition {
                type_: type_.to_string(),
                status,
                reason: Some(reason.to_string()),
                message: Some(message),
                last_heartbeat_time: Some(now.clone()),
                last_transition_time: Some(transition),
            }
        })
        .collect();
    NodeStatus {
        capacity: Some(capacity),
        allocatable: Some(allocatable),
        addresses: Some(node_addresses(name, facts)),
        conditions: Some(conditions),
        node_info: Some(NodeSystemInfo {
            architecture: go_arch().to_string(),
            container_runtime_version: version
                .map(RuntimeVersion::node_runtime_version)
                .unwrap_or_default(),
            kubelet_version: KUBELET_VERSION.to_string(),
            kube_proxy_version: String::new(),
            operating_system: "linux".to_string(),
            os_image: facts.os_image.clone(),
            kernel_version: facts.kernel.clone(),
            machine_id: facts.machine_id.clone(),
            system_uuid: facts.machine_id.clone(),
            boot_id: facts.boot_id.clone(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Creates the Node if it does not exist; returns the status an existing
/// one had (what the node reported before this start).
pub async fn register(
    client: &kube::Client,
    node: &Node,
) -> Result<Option<NodeStatus>, kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    match nodes.create(&PostParams::default(), node).await {
        Ok(_) => Ok(None),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            Ok(nodes.get_opt(name).await?.and_then(|n| n.status))
        }
        Err(e) => Err(e),
    }
}

/// Writes where this node keeps its local-path volumes on its Node (the
/// provisioner names directories under it), when the Node says otherwise.
pub async fn publish_storage_dir(
    client: &kube::Client,
    name: &str,
    dir: &std::path::Path,
) -> Result<(), kube::Error> {
    use skiff_common::local_path::STORAGE_DIR_ANNOTATION;
    let nodes: Api<Node> = Api::all(client.clone());
    let dir = dir.to_string_lossy();
    let published = nodes.get(name).await?;
    let current = published
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(STORAGE_DIR_ANNOTATION));
    if current.map(String::as_str) == Some(&*dir) {
        return Ok(());
    }
    let patch =
        serde_json::json!({ "metadata": { "annotations": { STORAGE_DIR_ANNOTATION: dir } } });
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
}

/// The role labels k3s's server puts on its own Node (`kubectl get nodes`
/// shows ROLES `control-plane,master`). A node may not set them itself
/// (NodeRestriction), so the server applies them with its own identity.
pub const CONTROL_PLANE_LABELS: [(&str, &str); 2] = [
    ("node-role.kubernetes.io/control-plane", "true"),
    ("node-role.kubernetes.io/master", "true"),
];

/// Waits for the Node `name` to be registered, then gives it the
/// control-plane role labels; at every start, as k3s does, so an
/// administrator's removal lasts until the next one. `client` is the server's own identity, not the node's. Returns
/// when done or when `stop` is raised; errors are retried every second.
pub async fn mark_control_plane(client: kube::Client, name: &str, mut stop: watch::Receiver<bool>) {
    let nodes: Api<Node> = Api::all(client);
    let labels: serde_json::Map<String, serde_json::Value> = CONTROL_PLANE_LABELS
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
        .collect();
    let patch = serde_json::json!({ "metadata": { "labels": labels } });
    loop {
        match nodes.get_opt(name).await {
            Ok(Some(node)) => {
                let present = node.metadata.labels.as_ref().is_some_and(|have| {
                    CONTROL_PLANE_LABELS
                        .iter()
                        .all(|(k, v)| have.get(*k).map(String::as_str) == Some(*v))
                });
                if present {
                    return;
                }
                match nodes
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => {
                        tracing::info!(node = name, "control-plane role labels set");
                        return;
                    }
                    Err(error) => {
                        tracing::warn!(node = name, %error, "cannot set the control-plane role labels")
                    }
                }
            }
            // Not registered yet: the agent creates it once its runtime is up.
            Ok(None) => {}
            Err(error) => tracing::warn!(node = name, %error, "reading the node to label it"),
        }
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Writes the Node's status.
pub async fn write_status(
    client: &kube::Client,
    name: &str,
    status: &NodeStatus,
) -> Result<Node, kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let patch = serde_json::json!({ "status": status });
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

/// Creates or renews the node's Lease.
pub async fn renew_lease(client: &kube::Client, node: &str) -> Result<(), kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let now = MicroTime(Timestamp::now());
    let patch = serde_json::json!({ "spec": {
        "renewTime": now, "holderIdentity": node, "leaseDurationSeconds": LEASE_DURATION_SECONDS } });
    match leases
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(node.to_string()),
                    namespace: Some(LEASE_NAMESPACE.to_string()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(node.to_string()),
                    lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
                    renew_time: Some(now),
                    ..Default::default()
                }),
            };
            match leases.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// Reads the runtime's health and the host's pressure against the hard
/// eviction thresholds.
pub async fn observe(
    runtime: &dyn Runtime,
    agent_dir: &std::path::Path,
    thresholds: &EvictionHard,
) -> NodeHealth {
    let runtime = runtime.health().await.map_err(|e| e.to_string());
    NodeHealth {
        runtime,
        pressure: host::pressure(agent_dir, thresholds),
    }
}

/// Everything the heartbeat loop needs.
pub struct Heartbeat {
    /// API client.
    pub client: kube::Client,
    /// The runtime whose health decides Ready.
    pub runtime: Arc<dyn Runtime>,
    /// Node name.
    pub node_name: String,
    /// Host facts (fixed).
    pub facts: HostFacts,
    /// The runtime's version.
    pub version: Option<RuntimeVersion>,
    /// `DATA_DIR/agent` (its disk decides DiskPressure).
    pub agent_dir: PathBuf,
    /// The reservations and hard eviction thresholds: the thresholds are
    /// behind the pressure conditions, and both are kept back from
    /// allocatable.
    pub kept_back: KeptBack,
    /// Where each observation's pressure goes, for admitting pods.
    pub pressure: watch::Sender<Pressure>,
    /// Lease renewal and health check interval.
    pub interval: Duration,
    /// The node's own events (condition changes, cordons).
    pub(crate) events: super::events::NodeEvents,
}

impl Heartbeat {
    /// Renews the Lease every interval and writes the status when the
    /// node's health changes (and every minute), until `stop` is raised.
    /// Between status writes it reads the Node, so a cordon is reported
    /// within an interval. Until the node is first Ready it looks every
    /// [`STARTUP_CHECK`] instead, as the kubelet's start-up status updates
    /// do: the pod network is configured just after registration, and
    /// Ready is reported as soon as it is, not an interval later.
    pub async fn run(
        mut self,
        stop: watch::Receiver<bool>,
        previous: Option<NodeStatus>,
        last_health: Option<NodeHealth>,
    ) {
        let mut reported = Reported {
            previous,
            last_health,
            written: Instant::now(),
        };
        let started = Instant::now();
        let mut renewed = Instant::now();
        let mut checks = Ticks::new(STARTUP_CHECK, stop.clone());
        while !reported.ready() && started.elapsed() < STARTUP_CHECKS_FOR && checks.next().await {
            // The Lease keeps its pace: a node slow to get Ready is not lost.
            if renewed.elapsed() >= self.interval {
                if let Err(error) = renew_lease(&self.client, &self.node_name).await {
                    tracing::warn!(%error, "lease renewal failed");
                }
                renewed = Instant::now();
            }
            let health = observe(
                self.runtime.as_ref(),
                &self.agent_dir,
                &self.kept_back.eviction,
            )
            .await;
            if reported.last_health.as_ref() != Some(&health) {
                self.report(health, &mut reported).await;
            }
        }
        let mut ticks = Ticks::new(self.interval, stop);
        while ticks.next().await {
            if let Err(error) = renew_lease(&self.client, &self.node_name).await {
                tracing::warn!(%error, "lease renewal failed");
            }
            let health = observe(
                self.runtime.as_ref(),
                &self.agent_dir,
                &self.kept_back.eviction,
            )
            .await;
            if reported.last_health.as_ref() == Some(&health)
                && reported.written.elapsed() < STATUS_REFRESH
            {
                match Api::<Node>::all(self.client.clone())
                    .get(&self.node_name)
                    .await
                {
                    Ok(node) => self.events.node_seen(&node),
                    Err(error) => tracing::debug!(%error, "reading the node failed"),
                }
                continue;
            }
            self.report(health, &mut reported).await;
        }
    }

    /// Publishes the pressure `health` shows and writes the status it
    /// makes.
    async fn report(&mut self, health: NodeHealth, reported: &mut Reported) {
        self.pressure.send_if_modified(|seen| {
            let changed = *seen != health.pressure;
            *seen = health.pressure;
            changed
        });
        let status = node_status(
            &self.node_name,
            &self.facts,
            self.version.as_ref(),
            &health,
            &self.kept_back,
            reported.previous.as_ref(),
        );
        match write_status(&self.client, &self.node_name, &status).await {
            Ok(node) => {
                if reported.last_health.as_ref().map(|h| h.runtime.is_ok())
                    != Some(health.runtime.is_ok())
                {
                    tracing::info!(runtime = ?health.runtime, "node status changed");
                }
                self.events
                    .status_written(reported.previous.as_ref(), node.status.as_ref());
                self.events.node_seen(&node);
                reported.previous = node.status;
                reported.last_health = Some(health);
                reported.written = Instant::now();
            }
            Err(error) => tracing::warn!(%error, "node status update failed"),
        }
    }
}

/// How often the node looks at its health until it is first Ready.
const STARTUP_CHECK: Duration = Duration::from_millis(100);
/// How long it looks that often; a node not Ready by then waits for its
/// regular heartbeats.
const STARTUP_CHECKS_FOR: Duration = Duration::from_secs(120);

/// What the heartbeat last wrote.
struct Reported {
    previous: Option<NodeStatus>,
    last_health: Option<NodeHealth>,
    written: Instant,
}

impl Reported {
    /// Whether the node was last reported Ready (its runtime and network up).
    fn ready(&self) -> bool {
        self.last_health
            .as_ref()
            .is_some_and(|h| h.runtime.as_ref().is_ok_and(|r| r.is_ready()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> HostFacts {
        HostFacts {
            hostname: "h".into(),
            internal_ip: "192.0.2.7".into(),
            external_ip: None,
            cpus: 2,
            memory: 4 << 30,
            disk: 100 << 30,
            max_pods: 110,
            max_pids: 4_194_304,
            os_image: "Debian".into(),
            kernel: "6.1".into(),
            machine_id: "m".into(),
            boot_id: "b".into(),
        }
    }

    #[test]
    fn node_taints_are_read_as_kubectl_writes_them_and_registered() {
        let taint = parse_taint("dedicated=edge:NoSchedule").expect("taint");
        assert_eq!(
            (
                taint.key.as_str(),
                taint.value.as_deref(),
                taint.effect.as_str()
            ),
            ("dedicated", Some("edge"), "NoSchedule")
        );
        let bare = parse_taint("CriticalAddonsOnly:NoExecute").expect("taint");
        assert_eq!(
            (bare.key.as_str(), bare.value),
            ("CriticalAddonsOnly", None)
        );
        let prefixed = parse_taint("example.com/gpu=true:PreferNoSchedule").expect("taint");
        assert_eq!(prefixed.key, "example.com/gpu");
        for bad in ["dedicated=edge", ":NoSchedule", "=v:NoSchedule"] {
            assert!(
                matches!(parse_taint(bad), Err(TaintError::Shape(_))),
                "{bad}"
            );
        }
        let wrong = parse_taint("dedicated=edge:Never").unwrap_err().to_string();
        assert!(wrong.contains("unsupported taint effect"), "{wrong}");

        let node = node_object("n1", &BTreeMap::new(), std::slice::from_ref(&taint));
        assert_eq!(node.spec.and_then(|s| s.taints), Some(vec![taint]));
        let plain = node_object("n1", &BTreeMap::new(), &[]);
        assert!(plain.spec.is_none(), "no taints: no spec at all");
    }

    #[test]
    fn an_external_ip_is_published_between_the_internal_ip_and_the_hostname() {
        let mut facts = facts();
        let listed = |facts: &HostFacts| -> Vec<(String, String)> {
            node_addresses("n1", facts)
                .into_iter()
                .map(|a| (a.type_, a.address))
                .collect()
        };
        let pair = |t: &str, a: &str| (t.to_string(), a.to_string());
        assert_eq!(
            listed(&facts),
            vec![pair("InternalIP", "192.0.2.7"), pair("Hostname", "n1")]
        );
        facts.external_ip = Some("198.51.100.9".into());
        assert_eq!(
            listed(&facts),
            vec![
                pair("InternalIP", "192.0.2.7"),
                pair("ExternalIP", "198.51.100.9"),
                pair("Hostname", "n1")
            ]
        );
    }

    #[test]
    fn ready_follows_the_runtime_and_allocatable_is_reduced() {
        let healthy = NodeHealth {
            runtime: Ok(RuntimeHealth {
                runtime_ready: true,
                network_ready: true,
                message: String::new(),
            }),
            pressure: Pressure::default(),
        };
        let version = RuntimeVersion {
            runtime_name: "containerd".into(),
            runtime_version: "1.6.20".into(),
            runtime_api_version: "v1".into(),
        };
        let defaults = KeptBack {
            reserved: Default::default(),
            eviction: EvictionHard::default(),
        };
        let s = node_status("n", &facts(), Some(&version), &healthy, &defaults, None);
        fn condition<'a>(s: &'a NodeStatus, type_: &str) -> &'a NodeCondition {
            s.conditions
                .as_ref()
                .unwrap()
                .iter()
                .find(|c| c.type_ == type_)
                .unwrap()
        }
        let cond = |s: &NodeStatus, t: &str| condition(s, t).status.clone();
        assert_eq!(cond(&s, "Ready"), "True");
        assert_eq!(cond(&s, "MemoryPressure"), "False");
        assert_eq!(
            s.node_info.as_ref().unwrap().container_runtime_version,
            "containerd://1.6.20"
        );
        assert_eq!(
            s.capacity.as_ref().unwrap()["memory"].0,
            format!("{}Ki", 4u64 << 20)
        );
        assert_eq!(
            s.allocatable.as_ref().unwrap()["memory"].0,
            format!("{}Ki", (4u64 << 20) - 102400)
        );
        let down = NodeHealth {
            runtime: Err("connection refused".into()),
            pressure: Pressure::default(),
        };
        let s2 = node_status("n", &facts(), None, &down, &defaults, Some(&s));
        assert_eq!(cond(&s2, "Ready"), "False");
        // Unchanged conditions keep their transition time.
        let t = |s: &NodeStatus, ty: &str| condition(s, ty).last_transition_time.clone();
        assert_eq!(t(&s, "DiskPressure"), t(&s2, "DiskPressure"));
    }

    #[test]
    fn reservations_come_off_allocatable_as_upstream_prints_it() {
        let kept = KeptBack {
            reserved: "cpu=250m,memory=1Gi,ephemeral-storage=10Gi"
                .parse()
                .unwrap(),
            eviction: EvictionHard::default(),
        };
        let healthy = NodeHealth {
            runtime: Err("not yet".into()),
            pressure: Pressure::default(),
        };
        let s = node_status("n", &facts(), None, &healthy, &kept, None);
        let allocatable = s.allocatable.unwrap();
        let shown = |r: &str| allocatable[r].0.clone();
        assert_eq!(shown("cpu"), "1750m");
        assert_eq!(shown("memory"), format!("{}Ki", (3u64 << 20) - 102400));
        assert_eq!(
            shown("ephemeral-storage"),
            ((90u64 << 30) - (10u64 << 30)).to_string()
        );
        assert_eq!(s.capacity.unwrap()["cpu"].0, "2", "capacity stays whole");
        assert_eq!(milli_cores(2000), "2");
    }
}
