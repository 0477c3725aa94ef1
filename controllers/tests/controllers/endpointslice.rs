//! EndpointSlices: ready/serving/terminating conditions, named ports per
//! pod, labels and ownerReferences, headless and empty Services.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, ListParams, PostParams};
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
