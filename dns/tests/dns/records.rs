//! Cluster records over UDP and TCP.

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{RData, RecordType};
use serde_json::json;

use super::support::{TestDns, answers, ask};

async fn cluster() -> TestDns {
    let dns = TestDns::start(Vec::new()).await;
    dns.add_service(
        "default",
        "kubernetes",
        json!({"clusterIP": "10.43.0.1", "clusterIPs": ["10.43.0.1"],
               "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}),
    );
    dns.add_service(
        "apps",
        "dual",
        json!({"clusterIP": "10.43.0.30", "clusterIPs": ["10.43.0.30", "fd00:43::30"]}),
    );
    dns.add_service(
        "db",
        "pg",
        json!({"clusterIP": "None", "ports": [{"name": "sql", "port": 5432}]}),
    );
    dns.add_slice(
        "db",
        "pg",
        json!([
            {"addresses": ["10.42.0.5"], "hostname": "pg-0", "conditions": {"ready": true}},
            {"addresses": ["10.42.0.6"], "hostname": "pg-1", "conditions": {"ready": true}},
            {"addresses": ["10.42.0.7"], "hostname": "pg-2", "conditions": {"ready": false}}
        ]),
        json!([{"name": "sql", "port": 5432, "protocol": "TCP"}]),
    );
    dns.add_pod("apps", "client", "10.42.0.9");
    dns
}

#[tokio::test]
async fn every_record_kind_answers_over_udp_and_tcp() {
    let dns = cluster().await;
    let kubernetes = "kubernetes.default.svc.cluster.local.";
    let https = "_https._tcp.kubernetes.default.svc.cluster.local.";
    // A name, a type and the answers' data, sorted.
    let cases: &[(&str, RecordType, &[&str])] = &[
        (kubernetes, RecordType::A, &["10.43.0.1"]),
        (
            "dual.apps.svc.cluster.local.",
            RecordType::AAAA,
            &["fd00:43::30"],
        ),
        // A headless Service: its ready endpoints only.
        (
            "pg.db.svc.cluster.local.",
            RecordType::A,
            &["10.42.0.5", "10.42.0.6"],
        ),
        (
            "pg-1.pg.db.svc.cluster.local.",
            RecordType::A,
            &["10.42.0.6"],
        ),
        (
            "10-42-0-9.apps.pod.cluster.local.",
            RecordType::A,
            &["10.42.0.9"],
        ),
        (
            https,
            RecordType::SRV,
            &["0 100 443 kubernetes.default.svc.cluster.local."],
        ),
        (
            "_sql._tcp.pg.db.svc.cluster.local.",
            RecordType::SRV,
            &[
                "0 100 5432 pg-0.pg.db.svc.cluster.local.",
                "0 100 5432 pg-1.pg.db.svc.cluster.local.",
            ],
        ),
        ("1.0.43.10.in-addr.arpa.", RecordType::PTR, &[kubernetes]),
        (
            "9.0.42.10.in-addr.arpa.",
            RecordType::PTR,
            &["10-42-0-9.apps.pod.cluster.local."],
        ),
        (
            "5.0.42.10.in-addr.arpa.",
            RecordType::PTR,
            &["pg-0.pg.db.svc.cluster.local."],
        ),
    ];
    for tcp in [false, true] {
        for &(name, qtype, want) in cases {
            let answer = ask(dns.addr(), name, qtype, tcp).await;
            assert_eq!(answer.metadata.response_code, ResponseCode::NoError);
            assert!(answer.metadata.authoritative, "{name} {qtype:?}");
            assert_eq!(answers(&answer), want, "{name} {qtype:?} tcp={tcp}");
        }
        // An SRV answer carries its target's address.
        let srv = ask(dns.addr(), https, RecordType::SRV, tcp).await;
        assert_eq!(answers_of(&srv.additionals), ["10.43.0.1"]);
    }
}

fn answers_of(records: &[hickory_proto::rr::Record]) -> Vec<String> {
    records.iter().map(|r| r.data.to_string()).collect()
}

#[tokio::test]
async fn unknown_cluster_names_are_nxdomain_with_the_soa() {
    let dns = cluster().await;
    // A name that does not exist is NXDOMAIN; one that exists without the
    // type asked, NOERROR. Neither has answers; both carry the zone's SOA.
    let cases = [
        (
            "nope.default.svc.cluster.local.",
            RecordType::A,
            ResponseCode::NXDomain,
        ),
        (
            "kubernetes.default.svc.cluster.local.",
            RecordType::AAAA,
            ResponseCode::NoError,
        ),
    ];
    for tcp in [false, true] {
        for (name, qtype, code) in cases {
            let answer = ask(dns.addr(), name, qtype, tcp).await;
            assert_eq!(answer.metadata.response_code, code, "{name}");
            assert!(answer.answers.is_empty(), "{name}");
            assert!(
                matches!(
                    answer.authorities.first().map(|r| &r.data),
                    Some(RData::SOA(_))
                ),
                "{name}: {:?}",
                answer.authorities
            );
            assert_eq!(answer.authorities[0].name.to_ascii(), "cluster.local.");
        }
    }
}
