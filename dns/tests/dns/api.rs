//! The DNS server on real informers over the in-process API server: a new
//! Service resolves as soon as its watch event arrives, and the server
//! publishes its address as the kube-dns endpoints.

use std::net::SocketAddr;
use std::time::Duration;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use skiff_dns::{ClusterDns, DnsConfig, PublishConfig};
use skiff_testkit::{Spawned, TestCluster, present_after_a_moment};

use super::support::{answers, ask};

/// Waits up to 10 s for `check`.
async fn eventually<T, Fut>(what: &str, check: impl FnMut() -> Fut) -> T
where
    Fut: std::future::Future<Output = Option<T>>,
{
    skiff_testkit::eventually(Duration::from_secs(10), what, check).await
}

/// Runs `skiff_dns::run` in a task until it is stopped or dropped.
fn spawn_dns(
    client: &kube::Client,
    factory: &skiff_informer::SharedInformerFactory,
    config: DnsConfig,
) -> Spawned<Result<(), skiff_dns::DnsError>> {
    let (client, factory) = (client.clone(), factory.clone());
    skiff_testkit::spawn_until_stopped(|stop| async move {
        skiff_dns::run(client, &factory, config, stop).await
    })
}

#[tokio::test]
async fn services_resolve_and_disappear_with_their_watch_events() {
    let cluster = TestCluster::start().await;
    let (client, factory) = (cluster.client.clone(), cluster.factory.clone());
    let config = DnsConfig::new("cluster.local", "127.0.0.1:0".parse().unwrap());
    let dns = ClusterDns::start(&factory, &config).await.unwrap();
    factory.wait_for_sync().await;
    let addr = dns.local_addrs()[0];

    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}
    }))
    .unwrap();
    let created = services.create(&PostParams::default(), &svc).await.unwrap();
    let ip = created.spec.unwrap().cluster_ip.expect("a cluster IP");
    let name = "web.default.svc.cluster.local.";
    let resolved = eventually("the new Service to resolve", || async {
        let answer = ask(addr, name, RecordType::A, false).await;
        (!answer.answers.is_empty()).then(|| answers(&answer))
    })
    .await;
    assert_eq!(resolved, [ip]);

    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deleted Service to be gone", || async {
        let answer = ask(addr, name, RecordType::A, false).await;
        (answer.metadata.response_code == ResponseCode::NXDomain).then_some(())
    })
    .await;

    dns.shutdown().await;
    cluster.shutdown();
}

#[tokio::test]
async fn run_creates_kube_dns_and_publishes_its_listen_port_as_the_endpoints() {
    let cluster = TestCluster::start().await;
    let (client, factory) = (cluster.client.clone(), cluster.factory.clone());
    let mut config = DnsConfig::new("cluster.local", "127.0.0.1:0".parse().unwrap());
    config.publish = PublishConfig {
        advertise: Some("192.0.2.2".parse().unwrap()),
        node_name: Some("node-a".into()),
        service_ip: Some("10.43.0.10".parse().unwrap()),
        owner_lease: None,
    };
    config.metrics_listen = vec!["127.0.0.1:0".parse().unwrap()];
    let dns = spawn_dns(&client, &factory, config);
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "kube-system");
    let slice = eventually("the kube-dns slice", || async {
        slices.get_opt(skiff_dns::publish::SLICE).await.unwrap()
    })
    .await;
    let endpoint = &slice.endpoints[0];
    assert_eq!(endpoint.addresses, ["192.0.2.2"]);
    assert_eq!(endpoint.node_name.as_deref(), Some("node-a"));
    let slice_ports = slice.ports.unwrap();
    let port = slice_ports[0].port.unwrap();
    assert_ne!(port, 0, "the real listen port is published");
    let metrics = slice_ports
        .iter()
        .find(|p| p.name.as_deref() == Some("metrics"))
        .and_then(|p| p.port)
        .expect("the metrics port is published");
    // The published port is where the server answers.
    let local: SocketAddr = ([127, 0, 0, 1], port as u16).into();
    let answer = ask(
        local,
        "nope.default.svc.cluster.local.",
        RecordType::A,
        false,
    )
    .await;
    assert_eq!(answer.metadata.response_code, ResponseCode::NXDomain);
    // The published metrics port serves CoreDNS's metrics, that query counted.
    let page = http_get(([127, 0, 0, 1], metrics as u16).into(), "/metrics").await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("text/plain; version=0.0.4"), "{page}");
    let (_, body) = page.split_once("\r\n\r\n").expect("a body");
    let samples = skiff_common::metrics::exposition::parse(body).expect("exposition text");
    let server = format!("dns://:{port}");
    let labels = [("server", server.as_str()), ("rcode", "NXDOMAIN")];
    assert_eq!(
        skiff_common::metrics::exposition::value(&samples, "coredns_dns_responses_total", &labels),
        Some(1.0)
    );

    let services: Api<Service> = Api::namespaced(client.clone(), "kube-system");
    let svc = services
        .get("kube-dns")
        .await
        .expect("the kube-dns Service");
    let spec = svc.spec.unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("10.43.0.10"));
    assert!(
        spec.selector.is_none(),
        "its endpoints are the published slice"
    );
    // What the Service holds (ports and labels) is what `publish::service`
    // builds, which its unit test checks.
    let wanted = skiff_dns::publish::service("10.43.0.10".parse().unwrap());
    assert_eq!(spec.ports, wanted.spec.and_then(|s| s.ports));
    assert_eq!(svc.metadata.labels, wanted.metadata.labels);

    dns.stop().await.unwrap();
    cluster.shutdown();
}

#[tokio::test]
async fn a_server_s_slice_is_owned_by_its_identity_lease_and_replaces_the_shared_one() {
    let cluster = TestCluster::start().await;
    let (client, factory) = (cluster.client.clone(), cluster.factory.clone());
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "kube-system");
    // The slice every server wrote before slices were per server.
    let shared = skiff_dns::publish::endpoint_slice(
        skiff_dns::publish::SLICE,
        "192.0.2.9".parse().unwrap(),
        53,
        None,
        None,
    );
    slices
        .create(&PostParams::default(), &shared)
        .await
        .unwrap();

    let mut config = DnsConfig::new("cluster.local", "127.0.0.1:0".parse().unwrap());
    config.publish = PublishConfig {
        advertise: Some("192.0.2.2".parse().unwrap()),
        owner_lease: Some("apiserver-00aa11bb".into()),
        ..PublishConfig::default()
    };
    let dns = spawn_dns(&client, &factory, config);
    // Nothing is published while the owner is missing: a slice nothing owns
    // would outlive its server.
    assert!(!present_after_a_moment(&slices, "kube-dns-skiff-00aa11bb").await);
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let lease: Lease = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "apiserver-00aa11bb", "namespace": "kube-system"},
        "spec": {"holderIdentity": "apiserver-00aa11bb", "leaseDurationSeconds": 15},
    }))
    .unwrap();
    let lease = leases.create(&PostParams::default(), &lease).await.unwrap();

    let slice = eventually("the server's own slice", || async {
        slices.get_opt("kube-dns-skiff-00aa11bb").await.unwrap()
    })
    .await;
    assert_eq!(slice.endpoints[0].addresses, ["192.0.2.2"]);
    let owners = slice.metadata.owner_references.unwrap_or_default();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].name.as_str()),
        ("Lease", "apiserver-00aa11bb")
    );
    assert_eq!(Some(&owners[0].uid), lease.metadata.uid.as_ref());
    eventually("the shared slice gone", || async {
        slices
            .get_opt(skiff_dns::publish::SLICE)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;

    dns.stop().await.unwrap();
    cluster.shutdown();
}

/// A plain HTTP/1.1 GET; the whole answer.
async fn http_get(address: SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: dns\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}
