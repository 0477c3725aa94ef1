use std::sync::Arc;

use hickory_proto::rr::{RData, RecordType};
use serde_json::json;

use super::*;

fn zone() -> (ClusterZone, ZoneSources) {
    let sources = ZoneSources {
        services: Arc::new(Cache::new()),
        slices: Arc::new(Cache::new()),
        pods: Arc::new(Cache::new()),
    };
    let zone = ClusterZone::new("cluster.local", 5, sources.clone()).unwrap();
    (zone, sources)
}

fn service(ns: &str, name: &str, spec: serde_json::Value) -> Arc<Service> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name}, "spec": spec}))
            .unwrap(),
    )
}

fn slice(ns: &str, service: &str, endpoints: serde_json::Value) -> Arc<EndpointSlice> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"namespace": ns, "name": format!("{service}-abc"),
                "labels": {SERVICE_NAME_LABEL: service}},
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": [{"name": "web", "port": 8080, "protocol": "TCP"}]
        }))
        .unwrap(),
    )
}

fn values(lookup: &Lookup) -> Vec<String> {
    match lookup {
        Lookup::Answer { answers, .. } => {
            let mut v: Vec<String> = answers.iter().map(|r| r.data.to_string()).collect();
            v.sort();
            v
        }
        other => panic!("expected an answer, got {other:?}"),
    }
}

#[test]
fn service_names_answer_the_cluster_ip_and_no_other_family() {
    let (zone, sources) = zone();
    sources.services.insert(service(
        "default",
        "web",
        json!({"clusterIP": "10.43.0.20", "clusterIPs": ["10.43.0.20"]}),
    ));
    let a = zone.lookup("Web.Default.svc.cluster.local.", RecordType::A);
    assert_eq!(values(&a), ["10.43.0.20"]);
    assert_eq!(
        zone.lookup("web.default.svc.cluster.local", RecordType::AAAA),
        Lookup::NoData
    );
    assert_eq!(
        zone.lookup("nope.default.svc.cluster.local", RecordType::A),
        Lookup::NxDomain
    );
    assert_eq!(zone.lookup("example.com", RecordType::A), Lookup::Forward);
}

#[test]
fn headless_services_answer_every_ready_endpoint() {
    let (zone, sources) = zone();
    sources
        .services
        .insert(service("db", "pg", json!({"clusterIP": "None"})));
    sources.slices.insert(slice(
        "db",
        "pg",
        json!([
            {"addresses": ["10.42.0.5"], "conditions": {"ready": true}, "hostname": "pg-0"},
            {"addresses": ["10.42.0.6"], "hostname": "pg-1"},
            {"addresses": ["10.42.0.7"], "conditions": {"ready": false}, "hostname": "pg-2"}
        ]),
    ));
    let a = zone.lookup("pg.db.svc.cluster.local", RecordType::A);
    assert_eq!(values(&a), ["10.42.0.5", "10.42.0.6"]);
    let host = zone.lookup("pg-1.pg.db.svc.cluster.local", RecordType::A);
    assert_eq!(values(&host), ["10.42.0.6"]);
    let by_ip = zone.lookup("10-42-0-5.pg.db.svc.cluster.local", RecordType::A);
    assert_eq!(values(&by_ip), ["10.42.0.5"]);
    assert_eq!(
        zone.lookup("pg-2.pg.db.svc.cluster.local", RecordType::A),
        Lookup::NxDomain
    );
    let ptr = zone.lookup("5.0.42.10.in-addr.arpa", RecordType::PTR);
    assert_eq!(values(&ptr), ["pg-0.pg.db.svc.cluster.local."]);
}

#[test]
fn srv_records_name_ports_for_plain_and_headless_services() {
    let (zone, sources) = zone();
    sources.services.insert(service(
        "default",
        "web",
        json!({"clusterIP": "10.43.0.20", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}),
    ));
    let srv = zone.lookup("_http._tcp.web.default.svc.cluster.local", RecordType::SRV);
    assert_eq!(values(&srv), ["0 100 80 web.default.svc.cluster.local."]);
    let Lookup::Answer { additionals, .. } = &srv else {
        unreachable!()
    };
    assert_eq!(additionals[0].data.to_string(), "10.43.0.20");
    assert_eq!(
        zone.lookup("_http._udp.web.default.svc.cluster.local", RecordType::SRV),
        Lookup::NxDomain
    );

    sources.services.insert(service(
        "db",
        "pg",
        json!({"clusterIP": "None", "ports": [{"name": "web", "port": 80}]}),
    ));
    sources.slices.insert(slice(
        "db",
        "pg",
        json!([{"addresses": ["10.42.0.5"], "hostname": "pg-0"}, {"addresses": ["10.42.0.6"]}]),
    ));
    let srv = zone.lookup("_web._tcp.pg.db.svc.cluster.local", RecordType::SRV);
    assert_eq!(
        values(&srv),
        [
            "0 100 8080 10-42-0-6.pg.db.svc.cluster.local.",
            "0 100 8080 pg-0.pg.db.svc.cluster.local."
        ]
    );
}

#[test]
fn pod_names_and_reverse_lookups() {
    let (zone, sources) = zone();
    let a = zone.lookup("10-42-0-9.apps.pod.cluster.local", RecordType::A);
    assert_eq!(values(&a), ["10.42.0.9"]);
    assert_eq!(
        zone.lookup("web-0.apps.pod.cluster.local", RecordType::A),
        Lookup::NxDomain
    );
    assert_eq!(
        zone.lookup("9.0.42.10.in-addr.arpa", RecordType::PTR),
        Lookup::Forward,
        "an address no pod has is not ours"
    );
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"namespace": "apps", "name": "p"},
        "status": {"podIP": "10.42.0.9", "podIPs": [{"ip": "10.42.0.9"}]}
    }))
    .unwrap();
    sources.pods.insert(Arc::new(pod));
    let ptr = zone.lookup("9.0.42.10.in-addr.arpa", RecordType::PTR);
    assert_eq!(values(&ptr), ["10-42-0-9.apps.pod.cluster.local."]);

    sources.services.insert(service(
        "default",
        "kubernetes",
        json!({"clusterIP": "10.43.0.1"}),
    ));
    let ptr = zone.lookup("1.0.43.10.in-addr.arpa.", RecordType::PTR);
    assert_eq!(values(&ptr), ["kubernetes.default.svc.cluster.local."]);
}

#[test]
fn external_names_are_cnames_and_the_apex_has_an_soa() {
    let (zone, sources) = zone();
    sources.services.insert(service(
        "default",
        "ext",
        json!({"type": "ExternalName", "externalName": "db.example.com"}),
    ));
    let cname = zone.lookup("ext.default.svc.cluster.local", RecordType::A);
    assert_eq!(values(&cname), ["db.example.com."]);
    let soa = zone.lookup("cluster.local", RecordType::SOA);
    let Lookup::Answer { answers, .. } = soa else {
        panic!("no SOA")
    };
    assert!(matches!(answers[0].data, RData::SOA(_)));
    assert_eq!(
        zone.lookup("default.svc.cluster.local", RecordType::A),
        Lookup::NoData,
        "a namespace with services exists"
    );
    assert_eq!(
        zone.lookup("ghost.svc.cluster.local", RecordType::A),
        Lookup::NxDomain
    );
    assert_eq!(
        zone.lookup("a.b.c.d.e.f.svc.cluster.local", RecordType::A),
        Lookup::NxDomain
    );
}
