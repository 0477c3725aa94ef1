//! The EventRecorder: events.k8s.io/v1 Events, repeats aggregated into a
//! series, cluster-scoped objects reported into `default`.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use super::support::{TestCluster, eventually, list_all};
use skiff_controllers::events::{EventRecorder, object_reference};

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeats_become_a_series_and_distinct_events_stay_apart() {
    let (cluster, client) = TestCluster::start_with_client(&[]).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "subject"}})).unwrap();
    let cm = cms.create(&PostParams::default(), &cm).await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
    let node = nodes.create(&PostParams::default(), &node).await.unwrap();

    let recorder = EventRecorder::with_instance(client.clone(), "test-controller", "test-1");
    let subject = object_reference(&cm);
    for _ in 0..3 {
        recorder.normal(&subject, "Synced", "Sync", "synced the subject");
    }
    recorder
        .clone()
        .warning(&subject, "Failed", "Sync", "could not sync");
    recorder.warning(&object_reference(&node), "NodeBroke", "Check", "node broke");

    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let list = eventually(WAIT, "three events, one with a series of 3", || async {
        let list = list_all(&events).await;
        let series = list
            .iter()
            .find(|e| e.reason.as_deref() == Some("Synced"))?
            .series
            .as_ref()?
            .count;
        (list.len() == 3 && series == 3).then_some(list)
    })
    .await;
    let synced = list
        .iter()
        .find(|e| e.reason.as_deref() == Some("Synced"))
        .unwrap();
    assert_eq!(synced.type_.as_deref(), Some("Normal"));
    assert_eq!(synced.action.as_deref(), Some("Sync"));
    assert_eq!(synced.note.as_deref(), Some("synced the subject"));
    assert_eq!(
        synced.reporting_controller.as_deref(),
        Some("test-controller")
    );
    assert_eq!(synced.reporting_instance.as_deref(), Some("test-1"));
    assert!(synced.event_time.is_some());
    let regarding = synced.regarding.as_ref().unwrap();
    assert_eq!(regarding.kind.as_deref(), Some("ConfigMap"));
    assert_eq!(regarding.name.as_deref(), Some("subject"));
    assert_eq!(regarding.uid, cm.metadata.uid);
    let failed = list
        .iter()
        .find(|e| e.reason.as_deref() == Some("Failed"))
        .unwrap();
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
    assert!(failed.series.is_none());
    let broke = list
        .iter()
        .find(|e| e.reason.as_deref() == Some("NodeBroke"))
        .unwrap();
    assert_eq!(
        broke.regarding.as_ref().unwrap().kind.as_deref(),
        Some("Node")
    );
    cluster.shutdown().await;
}
