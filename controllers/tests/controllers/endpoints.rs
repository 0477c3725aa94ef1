//! Endpoints from Services' selectors and pod readiness, with named ports
//! resolved per pod; Services without selectors are left alone.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use super::support::{TestCluster, eventually, eventually_gone, merge_patch_status};

pub const WAIT: Duration = Duration::from_secs(20);
pub const NS: &str = "default";

/// Creates a pod bound to `node-1` with a container port, then plays the
/// node: Running with `ip`, Ready as asked.
pub async fn running_pod(
    client: &kube::Client,
    name: &str,
    app: &str,
    port: (&str, i32),
    ip: &str,
    ready: bool,
) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx",
                 "ports": [{"name": port.0, "containerPort": port.1}]}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    set_ready(client, name, ip, ready).await;
}

/// Patches the pod's status as a node would.
pub async fn set_ready(client: &kube::Client, name: &str, ip: &str, ready: bool) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let status = json!({"status": {
        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]
    }});
    merge_patch_status(&pods, name, &status).await;
}

pub async fn service(client: &kube::Client, spec: serde_json::Value, name: &str) -> Service {
    let api: Api<Service> = Api::namespaced(client.clone(), NS);
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"team": "a"}}, "spec": spec
    }))
    .unwrap();
    api.create(&PostParams::default(), &svc).await.unwrap()
}

fn summary(ep: &Endpoints) -> Vec<(Vec<i32>, Vec<String>, Vec<String>)> {
    let mut out: Vec<_> = ep
        .subsets
        .iter()
        .flatten()
        .map(|s| {
            let ips = |a: &Option<Vec<k8s_openapi::api::core::v1::EndpointAddress>>| {
                a.iter().flatten().map(|x| x.ip.clone()).collect::<Vec<_>>()
            };
            (
                s.ports.iter().flatten().map(|p| p.port).collect(),
                ips(&s.addresses),
                ips(&s.not_ready_addresses),
            )
        })
        .collect();
    out.sort();
    out
}

/// What the Endpoints and EndpointSlice tests both start from: the Service
/// `web` (port `http` to the pods' port named `web`) and three of its pods
/// on `node-1`: `a` ready on 8080, `b` not ready on 8080, `c` ready on 9090.
pub async fn web_service_and_pods(client: &kube::Client) -> Service {
    let svc = service(
        client,
        json!({"selector": {"app": "web"},
               "ports": [{"name": "http", "port": 80, "targetPort": "web"}]}),
        "web",
    )
    .await;
    running_pod(client, "a", "web", ("web", 8080), "10.42.0.10", true).await;
    running_pod(client, "b", "web", ("web", 8080), "10.42.0.11", false).await;
    running_pod(client, "c", "web", ("web", 9090), "10.42.0.12", true).await;
    svc
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_follow_pods_readiness_and_named_ports() {
    let (cluster, client) = TestCluster::start_with_client(&["endpoint"]).await;
    web_service_and_pods(&client).await;
    running_pod(&client, "other", "db", ("web", 8080), "10.42.0.13", true).await;

    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), NS);
    let expected = vec![
        (
            vec![8080],
            vec!["10.42.0.10".to_string()],
            vec!["10.42.0.11".to_string()],
        ),
        (vec![9090], vec!["10.42.0.12".to_string()], vec![]),
    ];
    let ep = eventually(WAIT, "endpoints with both port groups", || async {
        let ep = endpoints.get_opt("web").await.unwrap()?;
        (summary(&ep) == expected).then_some(ep)
    })
    .await;
    assert_eq!(
        ep.metadata.labels.unwrap().get("team").map(String::as_str),
        Some("a")
    );
    let subset = &ep.subsets.unwrap()[0];
    let address = &subset.addresses.as_ref().unwrap()[0];
    assert_eq!(address.node_name.as_deref(), Some("node-1"));
    assert_eq!(
        address.target_ref.as_ref().unwrap().name.as_deref(),
        Some("a")
    );
    assert_eq!(
        subset.ports.as_ref().unwrap()[0].name.as_deref(),
        Some("http")
    );

    // b turns ready; a starts terminating (bound pods keep a grace period).
    set_ready(&client, "b", "10.42.0.11", true).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    let expected = vec![
        (vec![8080], vec!["10.42.0.11".to_string()], vec![]),
        (vec![9090], vec!["10.42.0.12".to_string()], vec![]),
    ];
    eventually(WAIT, "endpoints without the terminating pod", || async {
        let ep = endpoints.get_opt("web").await.unwrap()?;
        (summary(&ep) == expected).then_some(())
    })
    .await;

    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually_gone(WAIT, &endpoints, "web").await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_without_selectors_keep_their_own_endpoints() {
    let (cluster, client) = TestCluster::start_with_client(&["endpoint"]).await;
    service(&client, json!({"ports": [{"port": 5432}]}), "external").await;
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), NS);
    let manual: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "external"},
        "subsets": [{"addresses": [{"ip": "192.168.1.5"}], "ports": [{"port": 5432}]}]
    }))
    .unwrap();
    endpoints
        .create(&PostParams::default(), &manual)
        .await
        .unwrap();
    // A selector service proves the controller is running.
    service(
        &client,
        json!({"selector": {"app": "x"}, "ports": [{"port": 1}]}),
        "probe",
    )
    .await;
    eventually(WAIT, "the probe service's endpoints", || async {
        endpoints.get_opt("probe").await.unwrap()
    })
    .await;
    let ep = endpoints.get("external").await.unwrap();
    assert_eq!(
        summary(&ep),
        vec![(vec![5432], vec!["192.168.1.5".to_string()], vec![])]
    );
    cluster.shutdown().await;
}
