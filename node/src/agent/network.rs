//! The node's pod network: the pod CIDR the control plane assigned (or the
//! configured fallback, recorded in the Node's spec when none came), written
//! as the CNI bridge network before the first sandbox starts.

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};

use super::AgentConfig;
use crate::containerd::bringup::{BringUpError, NodeRuntime, PodNetwork};
use crate::containerd::config::PodCidr;

/// Waits up to `config.pod_cidr_wait` for the Node's `spec.podCIDR`; falls
/// back to `fallback` and records it.
pub async fn pod_cidr(
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

/// Writes the CNI network for `cidr`.
pub fn apply(
    runtime: &NodeRuntime,
    config: &AgentConfig,
    cidr: PodCidr,
) -> Result<(), BringUpError> {
    let network = PodNetwork {
        name: config.cni_network.clone(),
        bridge: config.cni_bridge.clone(),
        cidr,
    };
    runtime.set_pod_network(&network).map(|_| ())
}
