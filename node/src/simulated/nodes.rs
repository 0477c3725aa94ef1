//! Node objects and Leases of the simulated nodes.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeStatus, NodeSystemInfo};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use super::{NodeClients, SimulatedConfig, SimulatedError, ips};
use crate::agent::node::registration::go_arch;
use crate::agent::node::registration::renew_lease;

/// The container runtime version every simulated Node reports.
pub const SIMULATED_RUNTIME_VERSION: &str = "simulated://0.1.0";

/// Node registrations in flight at once.
const REGISTER_CONCURRENCY: usize = 32;

/// The name of simulated node `index`.
pub fn node_name(config: &SimulatedConfig, index: usize) -> String {
    format!("{}{index}", config.name_prefix)
}

/// Creates (or refreshes) every simulated Node, then its Lease.
pub(super) async fn register_all(
    clients: &NodeClients,
    config: &Arc<SimulatedConfig>,
) -> Result<(), SimulatedError> {
    let results: Vec<_> = futures::stream::iter(0..config.nodes)
        .map(|index| {
            let client = clients.for_node(index).clone();
            let config = config.clone();
            async move { register(&client, &config, index).await }
        })
        .buffer_unordered(REGISTER_CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect()
}

async fn register(
    client: &kube::Client,
    config: &SimulatedConfig,
    index: usize,
) -> Result<(), SimulatedError> {
    let name = node_name(config, index);
    let err = |source| SimulatedError::Register {
        node: name.clone(),
        source,
    };
    let nodes: Api<Node> = Api::all(client.clone());
    let node = node_object(config, index);
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => return Err(err(e)),
    }
    // Status is its own subresource: a create ignores it, so write it now (and
    // refresh it after a restart).
    post_status(client, config, index).await.map_err(err)?;
    renew_lease(client, &name).await.map_err(err)
}

/// Writes the node's status as it is now: Ready, heartbeats at this moment.
/// A condition whose status holds keeps the time it last changed, as a
/// kubelet's does; one that changes (Unknown back to True) gets this moment.
async fn post_status(
    client: &kube::Client,
    config: &SimulatedConfig,
    index: usize,
) -> Result<(), kube::Error> {
    let api = Api::<Node>::all(client.clone());
    let name = node_name(config, index);
    let mut node = node_object(config, index);
    if let Some(current) = api.get_opt(&name).await? {
        keep_transition_times(&mut node, &current);
    }
    let status = serde_json::json!({ "status": node.status });
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map(drop)
}

/// Gives each of `fresh`'s conditions the transition time it has in
/// `current` when its status there is the same.
fn keep_transition_times(fresh: &mut Node, current: &Node) {
    let Some(before) = current.status.as_ref().and_then(|s| s.conditions.as_ref()) else {
        return;
    };
    let conditions = fresh.status.as_mut().and_then(|s| s.conditions.as_mut());
    for condition in conditions.into_iter().flatten() {
        if let Some(old) = before
            .iter()
            .find(|old| old.type_ == condition.type_ && old.status == condition.status)
        {
            condition.last_transition_time = old.last_transition_time.clone();
        }
    }
}

fn node_object(config: &SimulatedConfig, index: usize) -> Node {
    let name = node_name(config, index);
    let now = Time(Timestamp::now());
    let capacity: BTreeMap<String, Quantity> = [
        ("cpu", config.cpu.clone()),
        ("memory", config.memory.clone()),
        ("pods", config.pods.to_string()),
        ("ephemeral-storage", "100Gi".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), Quantity(v)))
    .collect();
    let condition = |type_: &str, status: &str, reason: &str, message: &str| NodeCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_heartbeat_time: Some(now.clone()),
        last_transition_time: Some(now.clone()),
    };
    Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(
                [
                    ("kubernetes.io/hostname", name.as_str()),
                    ("kubernetes.io/os", "linux"),
                    ("kubernetes.io/arch", go_arch()),
                    ("type", "simulated"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ),
            annotations: Some(
                [("node.alpha.kubernetes.io/ttl".to_string(), "0".to_string())].into(),
            ),
            ..Default::default()
        },
        spec: None,
        status: Some(NodeStatus {
            capacity: Some(capacity.clone()),
            allocatable: Some(capacity),
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".to_string(),
                    address: ips::node_ip(index).to_string(),
                },
                NodeAddress {
                    type_: "Hostname".to_string(),
                    address: name.clone(),
                },
            ]),
            conditions: Some(vec![
                condition("Ready", "True", "KubeletReady", "simulated node is ready"),
                condition(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "simulated",
                ),
                condition(
                    "DiskPressure",
                    "False",
                    "KubeletHasNoDiskPressure",
                    "simulated",
                ),
                condition(
                    "PIDPressure",
                    "False",
                    "KubeletHasSufficientPID",
                    "simulated",
                ),
            ]),
            node_info: Some(NodeSystemInfo {
                architecture: go_arch().to_string(),
                container_runtime_version: SIMULATED_RUNTIME_VERSION.to_string(),
                kubelet_version: "v1.33.0-skiff".to_string(),
                kube_proxy_version: String::new(),
                operating_system: "linux".to_string(),
                os_image: "skiff simulated node".to_string(),
                kernel_version: "simulated".to_string(),
                machine_id: format!("simulated-{index}"),
                system_uuid: format!("simulated-{index}"),
                boot_id: format!("simulated-{index}"),
                ..Default::default()
            }),
            ..Default::default()
        }),
    }
}

/// Renews every node's Lease each interval, spreading the writes over the
/// interval instead of bursting them.
/// Every this many Lease renewals a node also posts its status again, as a
/// kubelet reports its status periodically: a Node whose renewals were
/// refused for a while (429 under overload) and which the node lifecycle
/// controller marked Unknown turns Ready again.
const STATUS_EVERY_RENEWALS: usize = 6;

pub(super) async fn renew_leases(clients: NodeClients, config: Arc<SimulatedConfig>) {
    let per_node = config.lease_renew_interval / (config.nodes.max(1) as u32);
    let mut ticker = tokio::time::interval(per_node.max(std::time::Duration::from_micros(100)));
    let mut index = 0;
    let mut round = 0usize;
    loop {
        ticker.tick().await;
        let name = node_name(&config, index);
        let client = clients.for_node(index).clone();
        let report = (round % STATUS_EVERY_RENEWALS == STATUS_EVERY_RENEWALS - 1)
            .then(|| (config.clone(), index));
        // Not awaited: one slow write must not delay every other node's renewal.
        tokio::spawn(async move {
            if let Err(error) = renew_lease(&client, &name).await {
                tracing::warn!(node = %name, %error, "lease renewal failed");
            }
            if let Some((config, index)) = report
                && let Err(error) = post_status(&client, &config, index).await
            {
                tracing::warn!(node = %name, %error, "node status report failed");
            }
        });
        index = (index + 1) % config.nodes.max(1);
        if index == 0 {
            round += 1;
        }
    }
}
