//! EndpointSlices: ready/serving/terminating conditions, named ports per
//! pod, labels and ownerReferences, headless and empty Services.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::endpoints::{NS, WAIT, running_pod, service, web_service_and_pods};
use super::support::{TestCluster, eventually};

async fn slices_of(client: &kube::Client, svc: &str) -> Vec<EndpointSlice> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let lp = ListParams::default().labels(&format!("kubernetes.io/service-name={svc}"));
    api.list(&lp).await.unwrap().items
}

/// (ports, [(ip, ready, serving, terminating)]) per slice, sorted.
type Shape = Vec<(Vec<i32>, Vec<(String, bool, bool, bool)>)>;

fn shape(slices: &[EndpointSlice]) -> Shape {
    let mut out: Shape = slices
        .iter()
        .map(|s| {
            let ports = s.ports.iter().flatten().filter_map(|p| p.port).collect();
            let eps = s
                .endpoints
                .iter()
                .map(|e| {
                    let c = e.conditions.clone().unwrap_or_default();
                    (
                        e.addresses[0].clone(),
                        c.ready.unwrap_or(false),
                        c.serving.unwrap_or(false),
                        c.terminating.unwrap_or(false),
                    )
                })
                .collect();
            (ports, eps)
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_track_pod_conditions_and_named_ports() {
    let (cluster, client) = TestCluster::start_with_client(&["endpointslice"]).await;
    let svc = web_service_and_pods(&client).await;

    let s = |ip: &str, r, sv, t| (ip.to_string(), r, sv, t);
    // The fixture's two slices, pod a's (ready, serving, terminating) as given.
    let with_a = |(r, sv, t)| -> Shape {
        vec![
            (
                vec![8080],
                vec![
                    s("10.42.0.10", r, sv, t),
                    s("10.42.0.11", false, false, false),
                ],
            ),
            (vec![9090], vec![s("10.42.0.12", true, true, false)]),
        ]
    };
    let expected = with_a((true, true, false));
    let slices = eventually(WAIT, "two slices, one per port", || async {
        let slices = slices_of(&client, "web").await;
        (shape(&slices) == expected).then_some(slices)
    })
    .await;
    for slice in &slices {
        let labels = slice.labels();
        assert_eq!(
            labels
                .get("endpointslice.kubernetes.io/managed-by")
                .map(String::as_str),
            Some("endpointslice-controller.k8s.io")
        );
        assert_eq!(labels.get("team").map(String::as_str), Some("a"));
        assert_eq!(slice.address_type, "IPv4");
        let owner = &slice.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.clone()),
            ("Service", svc.uid().unwrap())
        );
        assert_eq!(owner.controller, Some(true));
        assert_eq!(
            slice.ports.as_ref().unwrap()[0].name.as_deref(),
            Some("http")
        );
    }

    // A second slice for the same ports (what two syncs racing ahead of the
    // slice cache would leave) is noticed and removed.
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let mut twin = slices[0].clone();
    twin.metadata.name = None;
    twin.metadata.resource_version = None;
    twin.metadata.uid = None;
    twin.metadata.generate_name = Some("web-twin-".into());
    api.create(&PostParams::default(), &twin).await.unwrap();
    eventually(WAIT, "the twin slice removed", || async {
        (shape(&slices_of(&client, "web").await) == expected).then_some(())
    })
    .await;

    // A terminating pod stays, serving but not ready.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    let expected = with_a((false, true, true));
    eventually(WAIT, "the terminating pod's conditions", || async {
        (shape(&slices_of(&client, "web").await) == expected).then_some(())
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_and_empty_services_get_slices() {
    let (cluster, client) = TestCluster::start_with_client(&["endpointslice"]).await;
    service(
        &client,
        json!({"selector": {"app": "db"}, "clusterIP": "None"}),
        "db",
    )
    .await;
    running_pod(&client, "db-0", "db", ("sql", 5432), "10.42.0.20", true).await;
    service(
        &client,
        json!({"selector": {"app": "nobody"}, "ports": [{"port": 80}]}),
        "empty",
    )
    .await;
    service(&client, json!({"ports": [{"port": 80}]}), "manual").await;

    let slices = eventually(WAIT, "the headless service's slice", || async {
        let slices = slices_of(&client, "db").await;
        (shape(&slices) == vec![(vec![], vec![("10.42.0.20".to_string(), true, true, false)])])
            .then_some(slices)
    })
    .await;
    assert!(
        slices[0]
            .labels()
            .contains_key("service.kubernetes.io/headless")
    );
    let empty = eventually(WAIT, "the placeholder slice", || async {
        let slices = slices_of(&client, "empty").await;
        (!slices.is_empty()).then_some(slices)
    })
    .await;
    assert_eq!(empty.len(), 1);
    assert!(empty[0].endpoints.is_empty());
    assert!(slices_of(&client, "manual").await.is_empty());
    cluster.shutdown().await;
}

/// Every sync of a burst of pod changes acts on a cache that shows the
/// controller's own earlier writes: a watch of the Service's slices never
/// sees a second slice for the one port the pods share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_pods_never_makes_a_second_slice() {
    let (cluster, client) = TestCluster::start_with_client(&["endpointslice"]).await;
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let watch = WatchParams::default().labels("kubernetes.io/service-name=burst");
    let mut events = api.watch(&watch, "0").await.unwrap().boxed();
    let most = Arc::new(AtomicUsize::new(0));
    let watcher = tokio::spawn({
        let most = most.clone();
        async move {
            let mut live = HashSet::new();
            while let Some(Ok(event)) = events.next().await {
                match event {
                    WatchEvent::Added(s) => live.insert(s.name_any()),
                    WatchEvent::Deleted(s) => live.remove(&s.name_any()),
                    _ => continue,
                };
                most.fetch_max(live.len(), Ordering::SeqCst);
            }
        }
    });

    service(
        &client,
        json!({"selector": {"app": "burst"}, "ports": [{"port": 80, "targetPort": "http"}]}),
        "burst",
    )
    .await;
    let pods = 20;
    futures::future::join_all((0..pods).map(|i| {
        let (client, name, ip) = (
            client.clone(),
            format!("burst-{i}"),
            format!("10.42.1.{}", i + 1),
        );
        async move { running_pod(&client, &name, "burst", ("http", 8080), &ip, true).await }
    }))
    .await;
    eventually(WAIT, "every pod in the slice", || async {
        let slices = slices_of(&client, "burst").await;
        (slices.len() == 1 && slices[0].endpoints.len() == pods).then_some(())
    })
    .await;
    watcher.abort();
    assert_eq!(
        most.load(Ordering::SeqCst),
        1,
        "at some moment the Service had more than one slice"
    );
    cluster.shutdown().await;
}
