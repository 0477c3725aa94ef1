//! Names outside the cluster go to the upstream resolvers.

use std::sync::atomic::Ordering;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;

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
