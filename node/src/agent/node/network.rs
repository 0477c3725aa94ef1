//! The node's pod network: the pod CIDR the control plane assigned (or the
//! configured fallback, recorded in the Node's spec when none came), this
//! node's end of the network across nodes (`overlay`), and the CNI bridge
//! network written with the MTU that end leaves pods, before the first
//! sandbox starts.

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::agent::{AgentConfig, overlay};
use crate::containerd::bringup::{BringUpError, NodeRuntime, PodNetwork};
use crate::containerd::config::PodCidr;

/// Waits up to `config.pod_cidr_wait` for the Node's `spec.podCIDR`; falls
/// back to `fallback` and records it.
pub(crate) async fn pod_cidr(
    client: &kube::Client,
    node: &str,
    config: &AgentConfig,
    fallback: PodCidr,
) -> PodCidr {
    let nodes: Api<Node> = Api::all(client.clone());
    let deadline = tokio::time::Instant::now() + config.pod_cidr_wait;
    loop {
        if let Ok(n) = nodes.get(node).await
            && let Some(cidr) = n.spec.and_then(|s| s.pod_cidr)
        {
            match cidr.parse() {
                Ok(c) => return c,
                Err(error) => tracing::warn!(%cidr, %error, "ignoring unusable pod CIDR"),
            }
        }
        if tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let cidr = fallback;
    let patch = serde_json::json!({ "spec": { "podCIDR": cidr.to_string(), "podCIDRs": [cidr.to_string()] } });
    if let Err(error) = nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        tracing::warn!(%error, "recording the pod CIDR in the Node failed");
    }
    tracing::info!(%cidr, "no pod CIDR assigned; using the configured one");
    cidr
}

/// Sets up this node's end of the pod network across nodes (see
/// `overlay`). A failure is logged and leaves the node with its own bridge
/// only: pods on it still run and reach each other, as on a single node.
pub(crate) async fn prepare_overlay(
    config: &AgentConfig,
    node_ip: &str,
    cidr: PodCidr,
) -> Option<overlay::Prepared> {
    let overlay = config.overlay.clone();
    let node_ip = node_ip.to_string();
    let net = match skiff_common::cidr::parse_v4(&cidr.to_string()) {
        Ok(net) => net,
        Err(error) => {
            tracing::error!(%error, "pod CIDR unusable for the pod network across nodes");
            return None;
        }
    };
    let prepared =
        tokio::task::spawn_blocking(move || overlay::prepare(&overlay, &node_ip, net)).await;
    match prepared {
        Ok(Ok(prepared)) => Some(prepared),
        Ok(Err(error)) => {
            tracing::error!(%error, backend = %config.overlay.backend,
                "the pod network across nodes is not set up; pods reach only this node");
            None
        }
        Err(error) => {
            tracing::error!(%error, "pod network set-up task failed");
            None
        }
    }
}

/// Writes the CNI network for `cidr`, for pods with the MTU `prepared`
/// gives; without a prepared pod network the bridge masquerades (as on a
/// node of its own), with one its masquerade table does.
pub(crate) fn apply(
    runtime: &NodeRuntime,
    config: &AgentConfig,
    cidr: PodCidr,
    prepared: Option<&overlay::Prepared>,
) -> Result<(), BringUpError> {
    let network = PodNetwork {
        name: config.cni_network.clone(),
        bridge: config.cni_bridge.clone(),
        cidr,
        mtu: prepared.and_then(|p| p.pod_mtu),
        ip_masq: prepared.is_none(),
    };
    runtime.set_pod_network(&network).map(|_| ())
}
