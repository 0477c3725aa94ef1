//! Node lifecycle: a node whose Lease stops being renewed turns Unknown and
//! tainted, its untolerating pods are evicted, and the taints go when the
//! Lease is renewed again.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use skiff_common::node_conditions::ready_condition;
use tokio::sync::watch;

use super::support::{TestCluster, eventually, merge_patch, merge_patch_status};
use skiff_controllers::Context;
use skiff_controllers::node_lifecycle::{NodeLifecycleConfig, run_with};

const WAIT: Duration = Duration::from_secs(20);

async fn ready_node(client: &kube::Client, name: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let status = json!({"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}
    ]}});
    merge_patch_status(&nodes, name, &status).await;
    renew(client, name).await;
}

/// Plays the node agent's heartbeat.
async fn renew(client: &kube::Client, name: &str) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                 "renewTime": MicroTime(Timestamp::now())}
    });
    leases
        .patch(
            name,
            &PatchParams::apply("test-node"),
            &Patch::Apply(&lease),
        )
        .await
        .unwrap();
}

/// A cluster where the test plays the nodes' agents (their heartbeats run
/// until [`shutdown`](Self::shutdown)), and the controller once
/// [`run_controller`](Self::run_controller) started it.
struct Lifecycle {
    cluster: TestCluster,
    client: kube::Client,
    beats: watch::Sender<bool>,
    controller: Option<(watch::Sender<bool>, tokio::task::JoinHandle<()>)>,
}

impl Lifecycle {
    async fn start() -> Self {
        let (cluster, client) = TestCluster::start_with_client(&[]).await;
        let (beats, _) = watch::channel(false);
        Self {
            cluster,
            client,
            beats,
            controller: None,
        }
    }

    /// Where most tests begin: the Ready node `name`, its heartbeat on, and
    /// the controller with the default settings.
    async fn with_beating_node(name: &'static str) -> Self {
        let mut t = Self::start().await;
        ready_node(&t.client, name).await;
        t.beat(name);
        t.run_controller(NodeLifecycleConfig::default());
        t
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// Plays node `name`'s agent: renews its Lease every 200 ms.
    fn beat(&self, name: &'static str) {
        let client = self.client.clone();
        let mut stop = self.beats.subscribe();
        tokio::spawn(async move {
            while !*stop.borrow() {
                renew(&client, name).await;
                tokio::select! {
                    _ = stop.changed() => {}
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
            }
        });
    }

    /// Starts the controller, looking every 200 ms (with `config`'s other
    /// settings).
    fn run_controller(&mut self, config: NodeLifecycleConfig) {
        let (stop_tx, stop) = watch::channel(false);
        let ctx = Context::new(self.client.clone(), self.cluster.factory.clone());
        let config = NodeLifecycleConfig {
            monitor_period: Duration::from_millis(200),
            ..config
        };
        self.controller = Some((stop_tx, tokio::spawn(run_with(ctx, stop, config))));
    }

    /// Stops the heartbeats, the controller and the cluster.
    async fn shutdown(self) {
        let _ = self.beats.send(true);
        if let Some((stop_tx, controller)) = self.controller {
            let _ = stop_tx.send(true);
            let _ = tokio::time::timeout(Duration::from_secs(10), controller).await;
        }
        self.cluster.shutdown().await;
    }
}

async fn pod_on(client: &kube::Client, name: &str, node: &str, tolerations: serde_json::Value) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"nodeName": node, "tolerations": tolerations,
                 "containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    merge_patch_status(
        &pods,
        name,
        json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}}),
    )
    .await;
}

fn unreachable_taints(node: &Node) -> Vec<String> {
    let mut effects: Vec<String> = node
        .spec
        .iter()
        .flat_map(|s| s.taints.iter().flatten())
        .filter(|t| t.key == "node.kubernetes.io/unreachable")
        .map(|t| t.effect.clone())
        .collect();
    effects.sort();
    effects
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_is_tainted_and_evicted_until_its_lease_returns() {
    let mut t = Lifecycle::start().await;
    let client = t.client.clone();
    ready_node(&client, "silent").await;
    ready_node(&client, "healthy").await;
    t.beat("healthy");
    // The API server gives every pod a 300 s toleration of the unreachable taint; the
    // victim's own, shorter one is what it gets instead.
    pod_on(
        &client,
        "victim",
        "silent",
        json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
            "effect": "NoExecute", "tolerationSeconds": 1}]),
    )
    .await;
    pod_on(
        &client,
        "tolerant",
        "silent",
        json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}]),
    )
    .await;
    pod_on(&client, "bystander", "healthy", json!([])).await;
    // No tolerations of its own: it keeps the API server's 300 s one.
    pod_on(&client, "patient", "silent", json!([])).await;

    let config = NodeLifecycleConfig {
        grace: Duration::from_secs(1),
        default_toleration: Duration::from_secs(1),
        ..NodeLifecycleConfig::default()
    };
    t.run_controller(config);

    let nodes = t.nodes();
    let node = eventually(WAIT, "the silent node to be tainted", || async {
        let node = nodes.get("silent").await.unwrap();
        (unreachable_taints(&node) == ["NoExecute", "NoSchedule"]).then_some(node)
    })
    .await;
    let ready = ready_condition(&node).unwrap();
    assert_eq!(ready.status, "Unknown");
    assert_eq!(ready.reason.as_deref(), Some("NodeStatusUnknown"));
    assert_eq!(
        ready.message.as_deref(),
        Some("Kubelet stopped posting node status.")
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    eventually(WAIT, "the untolerating pod to be evicted", || async {
        let pod = pods.get_opt("victim").await.unwrap();
        pod.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
            .then_some(())
    })
    .await;
    let tolerant = pods.get("tolerant").await.unwrap();
    assert!(tolerant.metadata.deletion_timestamp.is_none());
    // Past the controller's own fallback for pods without tolerations (1 s here).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let patient = pods.get("patient").await.unwrap();
    assert!(
        patient.metadata.deletion_timestamp.is_none(),
        "the default toleration (300 s) outlasts the victim's (1 s)"
    );
    let not_ready = tolerant
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .any(|c| c.type_ == "Ready" && c.status == "False");
    assert!(
        not_ready,
        "pods of an unreachable node are marked not ready"
    );
    let bystander = pods.get("bystander").await.unwrap();
    assert!(bystander.metadata.deletion_timestamp.is_none());
    assert!(unreachable_taints(&nodes.get("healthy").await.unwrap()).is_empty());

    // The agent comes back: the taints go.
    t.beat("silent");
    eventually(WAIT, "the taints to be removed", || async {
        let node = nodes.get("silent").await.unwrap();
        unreachable_taints(&node).is_empty().then_some(())
    })
    .await;

    t.shutdown().await;
}

/// The effects of `key`'s taints on `node`.
fn taint_effects(node: &Node, key: &str) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| t.key == key)
        .map(|t| t.effect.clone())
        .collect()
}

/// `kubectl cordon` sets `spec.unschedulable`; the node then carries the
/// unschedulable NoSchedule taint (what `kubectl describe node` lists), and
/// loses it again when uncordoned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cordoned_node_carries_the_unschedulable_taint() {
    let t = Lifecycle::with_beating_node("busy").await;
    let nodes = t.nodes();
    const KEY: &str = "node.kubernetes.io/unschedulable";
    merge_patch(&nodes, "busy", json!({"spec": {"unschedulable": true}})).await;
    eventually(WAIT, "the cordoned node to be tainted", || async {
        let node = nodes.get("busy").await.unwrap();
        (taint_effects(&node, KEY) == ["NoSchedule"]).then_some(())
    })
    .await;
    merge_patch(&nodes, "busy", json!({"spec": {"unschedulable": false}})).await;
    eventually(WAIT, "the taint to go with the cordon", || async {
        let node = nodes.get("busy").await.unwrap();
        taint_effects(&node, KEY).is_empty().then_some(())
    })
    .await;
    t.shutdown().await;
}

/// Whether the pod `name` was deleted for a taint: deletion started (no
/// kubelet here finishes it) and the taint manager's condition on it.
async fn evicted_for_a_taint(pods: &Api<Pod>, name: &str) -> bool {
    let Ok(pod) = pods.get(name).await else {
        return false;
    };
    let marked = (pod.status.iter())
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| {
            c.type_ == "DisruptionTarget"
                && c.status == "True"
                && c.reason.as_deref() == Some("DeletionByTaintManager")
        });
    pod.metadata.deletion_timestamp.is_some() && marked
}

/// Any NoExecute taint evicts, as upstream's taint manager does: a pod not
/// tolerating it at once, one tolerating it for a while after that while,
/// one tolerating it without limit never; a NoSchedule taint evicts nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_execute_taint_evicts_the_pods_that_do_not_tolerate_it() {
    let t = Lifecycle::with_beating_node("shared").await;
    let client = t.client.clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let tolerating = |seconds: Option<i64>| {
        json!([{"key": "dedicated", "operator": "Equal", "value": "db",
            "effect": "NoExecute", "tolerationSeconds": seconds}])
    };
    pod_on(&client, "plain", "shared", json!([])).await;
    pod_on(&client, "for-a-while", "shared", tolerating(Some(3))).await;
    pod_on(&client, "for-good", "shared", tolerating(None)).await;

    // NoSchedule keeps new pods away and evicts nobody.
    let taint = |effect: &str| json!({"key": "dedicated", "value": "db", "effect": effect});
    merge_patch(
        &t.nodes(),
        "shared",
        json!({"spec": {"taints": [taint("NoSchedule")]}}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!evicted_for_a_taint(&pods, "plain").await);

    // As `kubectl taint` writes it: no timeAdded.
    let tainted_at = std::time::Instant::now();
    merge_patch(
        &t.nodes(),
        "shared",
        json!({"spec": {"taints": [taint("NoExecute")]}}),
    )
    .await;
    eventually(WAIT, "the untolerating pod evicted", || async {
        evicted_for_a_taint(&pods, "plain").await.then_some(())
    })
    .await;
    assert!(
        !evicted_for_a_taint(&pods, "for-a-while").await,
        "evicted before its toleration ran out"
    );
    eventually(WAIT, "the pod whose toleration ran out evicted", || async {
        evicted_for_a_taint(&pods, "for-a-while")
            .await
            .then_some(())
    })
    .await;
    assert!(tainted_at.elapsed() >= Duration::from_secs(3));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let kept = pods.get("for-good").await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_none());
    t.shutdown().await;
}

/// A node reporting disk pressure carries the disk-pressure NoSchedule
/// taint while it lasts, as upstream taints nodes by condition; Ready and
/// its other taints stay as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_under_pressure_carries_the_matching_taint() {
    let t = Lifecycle::with_beating_node("full").await;
    let nodes = t.nodes();
    let report = |disk: &'static str| {
        let nodes = nodes.clone();
        async move {
            let status = json!({"status": {"conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"},
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "DiskPressure", "status": disk, "reason": "KubeletHasDiskPressure"}
            ]}});
            merge_patch_status(&nodes, "full", &status).await;
        }
    };
    const DISK: &str = "node.kubernetes.io/disk-pressure";
    report("True").await;
    eventually(WAIT, "the disk-pressure taint", || async {
        let node = nodes.get("full").await.unwrap();
        (taint_effects(&node, DISK) == ["NoSchedule"]).then_some(node)
    })
    .await;
    let node = nodes.get("full").await.unwrap();
    assert!(taint_effects(&node, "node.kubernetes.io/memory-pressure").is_empty());
    assert!(taint_effects(&node, "node.kubernetes.io/not-ready").is_empty());
    report("False").await;
    eventually(WAIT, "the taint to go with the pressure", || async {
        let node = nodes.get("full").await.unwrap();
        taint_effects(&node, DISK).is_empty().then_some(())
    })
    .await;
    t.shutdown().await;
}

/// The node controller's events about `node` as `kubectl describe node`
/// finds them (by the Node's uid): (reason, note).
async fn controller_events(client: &kube::Client, node: &Node) -> Vec<(String, String)> {
    let uid = node.metadata.uid.clone().unwrap_or_default();
    let name = node.metadata.name.clone().unwrap_or_default();
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    let selector = format!("regarding.kind=Node,regarding.name={name},regarding.uid={uid}");
    let listed = events
        .list(&kube::api::ListParams::default().fields(&selector))
        .await
        .unwrap();
    listed
        .items
        .into_iter()
        .map(|e| {
            assert_eq!(e.reporting_controller.as_deref(), Some("node-controller"));
            (e.reason.unwrap_or_default(), e.note.unwrap_or_default())
        })
        .collect()
}

/// Upstream's controller reports each node it starts following and each
/// it stops following, which `kubectl describe node` lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_reports_nodes_it_registers_and_removes() {
    let mut t = Lifecycle::start().await;
    let client = t.client.clone();
    ready_node(&client, "edge").await;
    t.run_controller(NodeLifecycleConfig::default());
    let nodes = t.nodes();
    let node = nodes.get("edge").await.unwrap();
    let reported = |wanted: (&'static str, &'static str)| {
        let (client, node) = (client.clone(), node.clone());
        async move {
            let events = controller_events(&client, &node).await;
            events
                .iter()
                .any(|(reason, note)| (reason.as_str(), note.as_str()) == wanted)
                .then_some(events)
        }
    };
    let registered = (
        "RegisteredNode",
        "Node edge event: Registered Node edge in Controller",
    );
    let events = eventually(WAIT, "the node registered", || reported(registered)).await;
    assert_eq!(events.len(), 1, "{events:?}");
    nodes
        .delete("edge", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    let removing = (
        "RemovingNode",
        "Node edge event: Removing Node edge from Controller",
    );
    eventually(WAIT, "the node removed", || reported(removing)).await;
    t.shutdown().await;
}
