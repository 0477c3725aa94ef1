//! Names outside the cluster go to the upstream resolvers.

use std::sync::atomic::Ordering;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use skiff_common::metrics::exposition;

use super::support::{EXAMPLE_IP, FakeUpstream, TestDns, answers, ask};

#[tokio::test]
async fn other_names_are_answered_by_the_upstream() {
    let upstream = FakeUpstream::start().await;
    let dns = TestDns::start(vec![upstream.addr]).await;
    for tcp in [false, true] {
        let a = ask(dns.addr(), "example.com.", RecordType::A, tcp).await;
        assert_eq!(a.metadata.response_code, ResponseCode::NoError);
        assert_eq!(answers(&a), [EXAMPLE_IP]);
        assert!(!a.metadata.authoritative, "forwarded answers are not ours");

        let missing = ask(dns.addr(), "missing.example.com.", RecordType::A, tcp).await;
        assert_eq!(missing.metadata.response_code, ResponseCode::NXDomain);
    }
    assert!(upstream.udp_queries.load(Ordering::Relaxed) >= 2);
    assert!(
        upstream.tcp_queries.load(Ordering::Relaxed) >= 2,
        "TCP clients are forwarded over TCP"
    );
    // Cluster names never reach the upstream.
    let before = upstream.udp_queries.load(Ordering::Relaxed);
    let cluster = ask(
        dns.addr(),
        "nope.default.svc.cluster.local.",
        RecordType::A,
        false,
    )
    .await;
    assert_eq!(cluster.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(upstream.udp_queries.load(Ordering::Relaxed), before);

    // CoreDNS's metrics say the same; the server label names this
    // server's port, so the counts are this test's alone.
    let samples = exposition::parse(&skiff_dns::metrics::gather()).expect("exposition text");
    let server = format!("dns://:{}", dns.addr().port());
    let count = |name: &str, labels: &[(&str, &str)]| {
        let mut labels = labels.to_vec();
        labels.push(("server", &server));
        exposition::value(&samples, name, &labels).unwrap_or(0.0)
    };
    let responses = "coredns_dns_responses_total";
    assert_eq!(
        count(responses, &[("rcode", "NOERROR"), ("plugin", "forward")]),
        2.0
    );
    assert_eq!(
        count(responses, &[("rcode", "NXDOMAIN"), ("plugin", "forward")]),
        2.0
    );
    assert_eq!(
        count(
            responses,
            &[("rcode", "NXDOMAIN"), ("plugin", "kubernetes")]
        ),
        1.0
    );
    let requests = "coredns_dns_requests_total";
    let a = [("type", "A"), ("zone", "."), ("family", "1")];
    assert_eq!(
        count(requests, &[&a[..], &[("proto", "udp")]].concat()),
        3.0
    );
    assert_eq!(
        count(requests, &[&a[..], &[("proto", "tcp")]].concat()),
        2.0
    );
    assert_eq!(
        count(
            "coredns_dns_request_duration_seconds_count",
            &[("type", "A")]
        ),
        5.0
    );
    let to = upstream.addr.to_string();
    assert_eq!(
        exposition::value(&samples, "coredns_forward_requests_total", &[("to", &to)]),
        Some(4.0)
    );
}

#[tokio::test]
async fn a_truncated_upstream_answer_is_fetched_again_over_tcp() {
    let upstream = FakeUpstream::start().await;
    let dns = TestDns::start(vec![upstream.addr]).await;
    let big = ask(dns.addr(), "big.example.com.", RecordType::A, true).await;
    assert_eq!(big.answers.len(), 100);
    let tcp_before = upstream.tcp_queries.load(Ordering::Relaxed);
    // Over UDP the client gets what fits, flagged truncated, so it retries over TCP.
    let udp = ask(dns.addr(), "big.example.com.", RecordType::A, false).await;
    assert!(
        upstream.tcp_queries.load(Ordering::Relaxed) > tcp_before,
        "the forwarder retried over TCP"
    );
    assert!(
        udp.metadata.truncation,
        "100 A records do not fit a 512-byte answer"
    );
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_server_failure() {
    let dead = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let dns = TestDns::start(vec![dead.local_addr().unwrap()]).await;
    let answer = ask(dns.addr(), "example.com.", RecordType::A, false).await;
    assert_eq!(answer.metadata.response_code, ResponseCode::ServFail);
}
