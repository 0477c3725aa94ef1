//! CoreDNS's Prometheus metrics on its names (what dashboards for k3s's
//! CoreDNS read): requests by server, zone, protocol, address family and
//! type; responses by rcode and the plugin that answered; request
//! duration; queries forwarded per upstream. [`serve`] is the metrics
//! listener (CoreDNS's `prometheus :9153`): plain HTTP, as CoreDNS's, on the
//! addresses the DNS itself answers on; it shows nothing but these counts.

use std::net::SocketAddr;
use std::sync::LazyLock;
use std::time::Duration;

use hickory_proto::rr::RecordType;
use skiff_common::metrics::prometheus::{HistogramVec, IntCounterVec};
use skiff_common::metrics::{self as m, Component};
use tokio::net::TcpListener;

const C: Component = Component::Dns;

/// CoreDNS's `zone` label: the server block skiff's one zone handler is
/// (`.`, every name, as in k3s's Corefile).
pub const ZONE: &str = ".";

static REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    m::counter_vec(
        C,
        "coredns_dns_requests_total",
        "Counter of DNS requests made per zone, protocol and family.",
        &["server", "zone", "view", "proto", "family", "type"],
    )
});

static RESPONSES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    m::counter_vec(
        C,
        "coredns_dns_responses_total",
        "Counter of response status codes.",
        &["server", "zone", "view", "rcode", "plugin"],
    )
});

static DURATION: LazyLock<HistogramVec> = LazyLock::new(|| {
    m::histogram_vec(
        C,
        "coredns_dns_request_duration_seconds",
        "Histogram of the time (in seconds) each request took per zone.",
        &["server", "zone", "view", "type"],
        m::exponential_buckets(0.00025, 2.0, 16),
    )
});

static FORWARDS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    m::counter_vec(
        C,
        "coredns_forward_requests_total",
        "Counter of requests made per upstream.",
        &["to"],
    )
});

/// The record types CoreDNS counts by name; any other is `other`, so
/// clients cannot add series by asking for odd types.
fn type_label(query_type: RecordType) -> &'static str {
    match query_type {
        RecordType::A => "A",
        RecordType::AAAA => "AAAA",
        RecordType::ANY => "ANY",
        RecordType::AXFR => "AXFR",
        RecordType::CNAME => "CNAME",
        RecordType::HTTPS => "HTTPS",
        RecordType::IXFR => "IXFR",
        RecordType::MX => "MX",
        RecordType::NS => "NS",
        RecordType::PTR => "PTR",
        RecordType::SOA => "SOA",
        RecordType::SRV => "SRV",
        RecordType::TXT => "TXT",
        _ => "other",
    }
}

/// One answered query, as CoreDNS's `metrics` plugin records it.
pub struct Answered<'a> {
    /// `dns://:<port>`, the server block's address.
    pub server: &'a str,
    /// The query's type (`None` for a message without one).
    pub query_type: Option<RecordType>,
    /// Whether it came over TCP.
    pub tcp: bool,
    /// The client's address.
    pub client: SocketAddr,
    /// The response code's mnemonic (`NOERROR`, `NXDOMAIN`, ...).
    pub rcode: &'a str,
    /// Which part answered: `kubernetes` (cluster names), `forward`, or
    /// empty for errors written by the server itself.
    pub plugin: &'a str,
    /// How long it took.
    pub took: Duration,
}

/// Records one answered query.
pub fn record(answered: &Answered<'_>) {
    let kind = answered.query_type.map_or("other", type_label);
    let proto = if answered.tcp { "tcp" } else { "udp" };
    let family = if answered.client.is_ipv4() { "1" } else { "2" };
    REQUESTS
        .with_label_values(&[answered.server, ZONE, "", proto, family, kind])
        .inc();
    RESPONSES
        .with_label_values(&[answered.server, ZONE, "", answered.rcode, answered.plugin])
        .inc();
    DURATION
        .with_label_values(&[answered.server, ZONE, "", kind])
        .observe(answered.took.as_secs_f64());
}

/// Counts one query sent to `upstream`.
pub fn forwarded(upstream: SocketAddr) {
    FORWARDS.with_label_values(&[&upstream.to_string()]).inc();
}

/// The DNS's metrics in the text format.
pub fn gather() -> String {
    m::gather(&[C])
}

/// Serves `GET /metrics` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener) {
    let router = axum::Router::new().route(
        "/metrics",
        axum::routing::get(|| async {
            (
                [(http::header::CONTENT_TYPE, m::TEXT_CONTENT_TYPE)],
                gather(),
            )
        }),
    );
    if let Err(error) = axum::serve(listener, router).await {
        tracing::warn!(%error, "DNS metrics listener stopped");
    }
}
