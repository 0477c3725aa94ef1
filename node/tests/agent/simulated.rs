//! The simulated runtime against a real in-process API server (no
//! containerd): a pod deleted while it runs is reported in its terminal
//! phase before the node's final delete, as the containerd path does.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use skiff_node::simulated::{self, SimulatedConfig};
use skiff_testkit::{Spawned, TestCluster, eventually, eventually_gone};

use crate::harness::{ready_condition, release};

/// An API server and one simulated node (`sim-node-0`) registered with it.
struct OneNode {
    cluster: TestCluster,
    node: Spawned<Result<(), simulated::SimulatedError>>,
}

impl OneNode {
    /// Starts the server, then the node renewing its Lease every `renew`.
    async fn start(renew: Duration) -> Self {
        let cluster = TestCluster::start().await;
        let mut config = SimulatedConfig::new(1);
        config.lease_renew_interval = renew;
        let client = cluster.client.clone();
        let factory = cluster.factory.clone();
        let node = skiff_testkit::spawn_until_stopped(|stop| async move {
            simulated::run(
                simulated::NodeClients::Shared(client),
                &factory,
                config,
                stop,
            )
            .await
        });
        Self { cluster, node }
    }

    /// The Node API, where `sim-node-0` registers.
    fn nodes(&self) -> Api<k8s_openapi::api::core::v1::Node> {
        Api::all(self.cluster.client.clone())
    }

    /// Stops the node, which must have run without error, then the server.
    async fn stop(self) {
        self.node.stop().await.unwrap();
        self.cluster.shutdown();
    }
}

/// `sim-node-0`'s Ready condition, when it has one.
async fn sim_node_ready(
    api: Api<k8s_openapi::api::core::v1::Node>,
) -> Option<k8s_openapi::api::core::v1::NodeCondition> {
    let node = api.get("sim-node-0").await.ok()?;
    ready_condition(&node).cloned()
}

#[tokio::test]
async fn a_deleted_running_pod_is_reported_failed_before_it_goes() {
    let sim = OneNode::start(Duration::from_secs(60)).await;

    let pods: Api<Pod> = Api::namespaced(sim.cluster.client.clone(), "default");
    // A finalizer of the test's own keeps the object after the node's final
    // delete, so the status it was left with can be read.
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "finalizers": ["example.com/hold"]},
        "spec": {"nodeName": "sim-node-0",
            "containers": [{"name": "c", "image": "busybox"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    eventually(Duration::from_secs(10), "pod running", || async {
        let p = pods.get("web").await.ok()?;
        (p.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await;

    pods.delete("web", &DeleteParams::default()).await.unwrap();
    let last = eventually(
        Duration::from_secs(10),
        "the node's final delete",
        || async {
            let p = pods.get("web").await.ok()?;
            (p.metadata.deletion_grace_period_seconds == Some(0)).then_some(p)
        },
    )
    .await;
    let status = last.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Failed"), "{status:?}");
    let container = &status.container_statuses.unwrap()[0];
    let terminated = container.state.as_ref().unwrap().terminated.as_ref();
    assert_eq!(terminated.map(|t| t.exit_code), Some(143), "{container:?}");
    assert!(!container.ready);

    release(&pods, "web").await;
    eventually_gone(Duration::from_secs(10), &pods, "web").await;
    sim.stop().await;
}

#[tokio::test]
async fn a_node_marked_unknown_reports_itself_ready_again() {
    // Renewals every 100 ms: a status report every 6 of them.
    let sim = OneNode::start(Duration::from_millis(100)).await;
    let api = sim.nodes();
    let ready = |api| async move { sim_node_ready(api).await.map(|c| c.status) };
    eventually(Duration::from_secs(10), "node registered Ready", || async {
        (ready(api.clone()).await.as_deref() == Some("True")).then_some(())
    })
    .await;
    // The architecture in Kubernetes' (Go's) spelling, as charts select it.
    let node = api.get("sim-node-0").await.unwrap();
    let arch = node.metadata.labels.unwrap_or_default()["kubernetes.io/arch"].clone();
    assert!(
        ["amd64", "arm64"].contains(&arch.as_str()) || !arch.contains('_'),
        "{arch}"
    );
    assert_ne!(arch, "x86_64");
    assert_eq!(node.status.unwrap().node_info.unwrap().architecture, arch);
    // What the node lifecycle controller writes when renewals stop arriving.
    let marked = api
        .patch_status(
            "sim-node-0",
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {"conditions": [
                {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}})),
        )
        .await
        .unwrap();
    let marked_ready = ready_condition(&marked).map(|c| c.status.as_str());
    assert_eq!(marked_ready, Some("Unknown"));
    eventually(Duration::from_secs(10), "node Ready again", || async {
        (ready(api.clone()).await.as_deref() == Some("True")).then_some(())
    })
    .await;
    sim.stop().await;
}

#[tokio::test]
async fn a_node_keeps_the_time_its_ready_condition_last_changed() {
    // Renewals every 100 ms: a status report every 6 of them.
    let sim = OneNode::start(Duration::from_millis(100)).await;
    let api = sim.nodes();
    let ready = |api| async move {
        let ready = sim_node_ready(api).await?;
        Some((
            ready.status,
            ready.last_heartbeat_time?.0,
            ready.last_transition_time?.0,
        ))
    };
    let (_, heartbeat, since) = eventually(Duration::from_secs(10), "node Ready", || async {
        ready(api.clone())
            .await
            .filter(|(status, _, _)| status == "True")
    })
    .await;
    // Times are written to the second: wait for a heartbeat in a later one.
    let (status, _, later_since) =
        eventually(Duration::from_secs(10), "a later heartbeat", || async {
            ready(api.clone())
                .await
                .filter(|(_, beat, _)| *beat > heartbeat)
        })
        .await;
    assert_eq!(status, "True");
    assert_eq!(
        later_since, since,
        "Ready has held since it was first reported"
    );
    sim.stop().await;
}
