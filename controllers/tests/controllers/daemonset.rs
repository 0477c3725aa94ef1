//! The DaemonSet controller over the real API server: the test makes nodes
//! and plays the node agent by marking pods ready.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::support::{TestCluster, eventually, merge_patch};
use super::workload_helpers::{WAIT, is_ready, make_ready, pods_owned_by, template};

async fn node(client: &Client, name: &str, taints: serde_json::Value) {
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": taints}
    }))
    .unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &n)
        .await
        .unwrap();
}

/// The node each live pod is pinned to (through its metadata.name affinity).
fn pinned(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .unwrap()
        .affinity
        .as_ref()
        .unwrap()
        .node_affinity
        .as_ref()
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap()
        .node_selector_terms[0]
        .match_fields
        .as_ref()
        .unwrap()[0]
        .values
        .as_ref()
        .unwrap()[0]
        .clone()
}

/// Creates the DaemonSet `name` of pods labelled `app: <name>`; its uid.
async fn create_set(api: &Api<DaemonSet>, name: &str) -> String {
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": template(json!({"app": name}), "agent:1"),
        }
    }))
    .unwrap();
    api.create(&PostParams::default(), &ds)
        .await
        .unwrap()
        .uid()
        .unwrap()
}

async fn live(client: &Client, uid: &str) -> Vec<Pod> {
    pods_owned_by(client, "default", uid)
        .await
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pod_per_eligible_node_and_rolling_updates() {
    let (cluster, client) = TestCluster::start_with_client(&["daemonset"]).await;
    node(&client, "n1", json!([])).await;
    node(
        &client,
        "n2",
        json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]),
    )
    .await;
    node(
        &client,
        "n3",
        json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]),
    )
    .await;
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    let uid = create_set(&api, "agent").await;
    let pods = eventually(WAIT, "pods on n1 and n2", || async {
        let pods = live(&client, &uid).await;
        let nodes: Vec<String> = {
            let mut n: Vec<String> = pods.iter().map(pinned).collect();
            n.sort();
            n
        };
        (nodes == ["n1", "n2"]).then_some(pods)
    })
    .await;
    for pod in &pods {
        assert!(pod.name_any().starts_with("agent-"));
        let tolerations = pod.spec.as_ref().unwrap().tolerations.clone().unwrap();
        assert!(
            tolerations
                .iter()
                .any(|t| t.key.as_deref() == Some("node.kubernetes.io/unreachable"))
        );
        make_ready(&client, "default", &pod.name_any()).await;
    }
    eventually(WAIT, "status", || async {
        let s = api.get("agent").await.ok()?.status?;
        (s.desired_number_scheduled == 2
            && s.current_number_scheduled == 2
            && s.number_ready == 2
            && s.number_available == Some(2)
            && s.updated_number_scheduled == Some(2)
            && s.number_misscheduled == 0)
            .then_some(())
    })
    .await;

    // Tolerating the taint adds n3; the template change rolls every pod.
    merge_patch(
        &api,
        "agent",
        json!({"spec": {"template": {"spec": {"tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}
        ]}}}}),
    )
    .await;
    let old: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
    eventually(WAIT, "rolled out to 3 nodes", || async {
        let pods = live(&client, &uid).await;
        let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
        for p in &pods {
            *per_node.entry(pinned(p)).or_default() += 1;
            if !is_ready(p) {
                make_ready(&client, "default", &p.name_any()).await;
            }
        }
        assert!(
            per_node.values().all(|n| *n == 1),
            "one pod per node: {per_node:?}"
        );
        // maxUnavailable 1: of the nodes that ran the set before, one at
        // a time is without its ready pod (n3, new to the set, waits for
        // its first pod outside that count, as upstream).
        let down = ["n1", "n2"]
            .iter()
            .filter(|n| !pods.iter().any(|p| pinned(p) == **n && is_ready(p)))
            .count();
        assert!(down <= 1, "n1 and n2 both without a ready pod");
        let s = api.get("agent").await.ok()?.status?;
        (s.desired_number_scheduled == 3
            && s.updated_number_scheduled == Some(3)
            && s.number_available == Some(3)
            && pods.iter().all(|p| !old.contains(&p.name_any())))
        .then_some(())
    })
    .await;
    cluster.shutdown().await;
}

/// A daemon pod being deleted keeps its node until it has stopped, as
/// upstream: no second daemon pod (bound to the same host ports, say) starts
/// beside it; the replacement comes once the node agent has let it go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_daemon_pod_holds_its_node_until_it_is_gone() {
    let (cluster, client) = TestCluster::start_with_client(&["daemonset"]).await;
    node(&client, "n1", json!([])).await;
    let sets: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let uid = create_set(&sets, "agent").await;
    let first = eventually(WAIT, "a pod for n1", || async {
        live(&client, &uid).await.into_iter().next()
    })
    .await
    .name_any();
    // Scheduled (so deleting it waits for its node agent) and running.
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": first},
        "target": {"kind": "Node", "name": "n1"}
    });
    pods.create_subresource::<_, serde_json::Value>(
        "binding",
        &first,
        &PostParams::default(),
        &binding,
    )
    .await
    .unwrap();
    make_ready(&client, "default", &first).await;
    eventually(WAIT, "the pod counted ready", || async {
        let s = sets.get("agent").await.ok()?.status?;
        (s.number_ready == 1).then_some(())
    })
    .await;

    pods.delete(&first, &DeleteParams::default()).await.unwrap();
    let stopping = pods.get(&first).await.unwrap();
    assert!(stopping.metadata.deletion_timestamp.is_some());
    // Several syncs: the status is written, and nothing is made beside it.
    eventually(WAIT, "the status written after the deletion", || async {
        let s = sets.get("agent").await.ok()?.status?;
        (s.number_unavailable == Some(0) && s.current_number_scheduled == 1).then_some(())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let owned: Vec<String> = pods_owned_by(&client, "default", &uid)
        .await
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert_eq!(
        owned,
        vec![first.clone()],
        "a second pod while the first stops"
    );

    // The node agent is done with it: the replacement follows.
    pods.delete(&first, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let second = eventually(WAIT, "a replacement on n1", || async {
        live(&client, &uid).await.into_iter().next()
    })
    .await;
    assert_ne!(second.name_any(), first);
    assert_eq!(pinned(&second), "n1");
    cluster.shutdown().await;
}

/// `maxSurge: 1, maxUnavailable: 0`: each node's new pod starts beside its
/// old one, which goes only once the new one is available, one node at a
/// time; no node is ever without a ready daemon pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_surging_update_starts_the_new_pod_before_the_old_one_goes() {
    let (cluster, client) = TestCluster::start_with_client(&["daemonset"]).await;
    node(&client, "n1", json!([])).await;
    node(&client, "n2", json!([])).await;
    let sets: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": template(json!({"app": "agent"}), "agent:1"),
            "updateStrategy": {"type": "RollingUpdate",
                               "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        }
    }))
    .unwrap();
    let uid = sets
        .create(&PostParams::default(), &ds)
        .await
        .unwrap()
        .uid()
        .unwrap();
    let first = eventually(WAIT, "pods on n1 and n2", || async {
        let pods = live(&client, &uid).await;
        (pods.len() == 2).then_some(pods)
    })
    .await;
    for pod in &first {
        make_ready(&client, "default", &pod.name_any()).await;
    }
    eventually(WAIT, "both counted available", || async {
        let s = sets.get("agent").await.ok()?.status?;
        (s.number_available == Some(2)).then_some(())
    })
    .await;

    merge_patch(
        &sets,
        "agent",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "agent:2"}]}}}}),
    )
    .await;
    let old: Vec<String> = first.iter().map(|p| p.name_any()).collect();
    let surged = std::sync::Mutex::new(Vec::<String>::new());
    eventually(WAIT, "both nodes updated", || async {
        let pods = live(&client, &uid).await;
        let mut per_node: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
        for p in &pods {
            per_node.entry(pinned(p)).or_default().push(p);
        }
        for (node, here) in &per_node {
            assert!(
                here.iter().any(|p| is_ready(p)),
                "{node} has no ready daemon pod: {:?}",
                here.iter().map(|p| p.name_any()).collect::<Vec<_>>()
            );
            let mut surged = surged.lock().unwrap();
            if here.len() == 2 && !surged.contains(node) {
                surged.push(node.clone());
            }
        }
        let doubled = per_node.values().filter(|here| here.len() > 1).count();
        assert!(
            doubled <= 1,
            "more than maxSurge nodes surged: {per_node:?}"
        );
        // Play the node agent: the new pods come up after a moment.
        for p in &pods {
            if !old.contains(&p.name_any()) && !is_ready(p) {
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                make_ready(&client, "default", &p.name_any()).await;
            }
        }
        (pods.len() == 2 && pods.iter().all(|p| !old.contains(&p.name_any()))).then_some(())
    })
    .await;
    let mut surged = surged.into_inner().unwrap();
    surged.sort();
    assert_eq!(
        surged,
        ["n1", "n2"],
        "each node had its new pod beside the old"
    );
    cluster.shutdown().await;
}

/// A node that fails every daemon pod (a kubelet refusing them under disk
/// pressure) gets its replacements with a growing wait, as upstream's
/// controller backs off: not one new pod per sync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_daemon_pods_are_replaced_with_a_growing_wait() {
    use super::workload_helpers::{event_reasons, set_pod_status};
    let (cluster, client) = TestCluster::start_with_client(&["daemonset"]).await;
    node(&client, "n1", json!([])).await;
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    let uid = create_set(&api, "refused").await;
    // Play a node that fails each pod as soon as it sees it, for 4 s.
    let mut seen = std::collections::BTreeSet::new();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(4);
    while std::time::Instant::now() < until {
        for pod in live(&client, &uid).await {
            let failed = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed");
            if seen.insert(pod.name_any()) || !failed {
                set_pod_status(&client, "default", &pod.name_any(), "Failed", false).await;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Replaced at once, then after 1 s and after 2 s more: at most four
    // pods in 4 s (a controller without the wait makes one per sync).
    assert!(
        (2..=4).contains(&seen.len()),
        "daemon pods made in 4 s: {seen:?}"
    );
    assert!(
        event_reasons(&client, "default", "refused")
            .await
            .contains(&"FailedDaemonPod".to_string())
    );
    cluster.shutdown().await;
}
