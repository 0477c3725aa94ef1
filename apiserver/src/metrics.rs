//! kube-apiserver's Prometheus metrics on upstream's names and labels, and
//! `/metrics`, which serves every component of the process (k3s's one
//! registry): the API server's here, the scheduler's, the controllers'
//! work queues, the kubelet's and the DNS's from `skiff_common::metrics`.
//!
//! The request layer sits outside audit, authorization and flow control,
//! so every answer is counted, refusals included. Labels come from the
//! request's RequestInfo; an answer of 400 or more to a resource the
//! registry does not serve is not counted, so a client cannot grow the
//! number of series by asking for made-up resources. Recording is a label
//! lookup and atomic adds; the request itself is never changed.

use std::sync::{Arc, LazyLock, Weak};
use std::time::Instant;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::Method;
use skiff_common::metrics::prometheus::{HistogramVec, IntCounterVec, IntGaugeVec};
use skiff_common::metrics::{self as m, Component, GaugeGuard};

use crate::authz::RequestKind;
use crate::authz::request::RequestInfo;
use crate::server::Inner;

const C: Component = Component::ApiServer;

/// Upstream's `apiserver_request_duration_seconds` buckets.
const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// Non-resource paths counted (upstream instruments these handlers); any
/// other path is not, so made-up paths add no series.
const COUNTED_PATHS: &[&str] = &[
    "/healthz",
    "/livez",
    "/readyz",
    "/version",
    "/metrics",
    "/openapi/v2",
    "/openapi/v3",
    "/api",
    "/apis",
];

/// The labels of a request's latency; its count adds `code`.
const REQUEST_LABELS: [&str; 8] = [
    "verb",
    "dry_run",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "component",
];

static REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    m::counter_vec(
        C,
        "apiserver_request_total",
        "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
        &[&REQUEST_LABELS[..], &["code"]].concat(),
    )
});

static DURATION: LazyLock<HistogramVec> = LazyLock::new(|| {
    m::histogram_vec(
        C,
        "apiserver_request_duration_seconds",
        "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
        &REQUEST_LABELS,
        DURATION_BUCKETS.to_vec(),
    )
});

static LONG_RUNNING: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    m::gauge_vec(
        C,
        "apiserver_longrunning_requests",
        "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
        &[
            "component",
            "group",
            "resource",
            "scope",
            "subresource",
            "verb",
            "version",
        ],
    )
});

static INFLIGHT: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    m::gauge_vec(
        C,
        "apiserver_current_inflight_requests",
        "Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
        &["request_kind"],
    )
});

static WATCHERS: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    m::gauge_vec(
        C,
        "apiserver_registered_watchers",
        "Number of currently registered watchers for a given resources",
        &["group", "version", "kind"],
    )
});

static STORAGE_OBJECTS: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    m::gauge_vec(
        C,
        "apiserver_storage_objects",
        "Number of stored objects at the time of last check split by kind.",
        &["resource"],
    )
});

static STORE_DURATION: LazyLock<HistogramVec> = LazyLock::new(|| {
    m::histogram_vec(
        C,
        "etcd_request_duration_seconds",
        "Etcd request latency in seconds for each operation and object type.",
        &["operation", "type"],
        // Upstream's etcd latency buckets are the request latency's.
        DURATION_BUCKETS.to_vec(),
    )
});

/// API Priority and Fairness metrics (upstream's `apiserver_flowcontrol_*`).
pub(crate) mod flowcontrol {
    use super::*;

    static REJECTED: LazyLock<IntCounterVec> = LazyLock::new(|| {
        m::counter_vec(
            C,
            "apiserver_flowcontrol_rejected_requests_total",
            "Number of requests rejected by API Priority and Fairness subsystem",
            &["flow_schema", "priority_level", "reason"],
        )
    });
    static DISPATCHED: LazyLock<IntCounterVec> = LazyLock::new(|| {
        m::counter_vec(
            C,
            "apiserver_flowcontrol_dispatched_requests_total",
            "Number of requests executed by API Priority and Fairness subsystem",
            &["flow_schema", "priority_level"],
        )
    });
    static INQUEUE: LazyLock<IntGaugeVec> = LazyLock::new(|| {
        m::gauge_vec(
            C,
            "apiserver_flowcontrol_current_inqueue_requests",
            "Number of requests currently pending in queues of the API Priority and Fairness subsystem",
            &["flow_schema", "priority_level"],
        )
    });
    static EXECUTING: LazyLock<IntGaugeVec> = LazyLock::new(|| {
        m::gauge_vec(
            C,
            "apiserver_flowcontrol_current_executing_requests",
            "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem",
            &["flow_schema", "priority_level"],
        )
    });

    /// Counts a request waiting for a seat while it lives.
    pub(crate) fn waiting(schema: &str, level: &str) -> GaugeGuard {
        GaugeGuard::new(INQUEUE.with_label_values(&[schema, level]))
    }

    /// Counts a dispatched request, and it as executing while the guard lives.
    pub(crate) fn executing(schema: &str, level: &str) -> GaugeGuard {
        DISPATCHED.with_label_values(&[schema, level]).inc();
        GaugeGuard::new(EXECUTING.with_label_values(&[schema, level]))
    }

    /// Counts a refusal; `reason` is upstream's (`queue-full`,
    /// `concurrency-limit`, `time-out`).
    pub(crate) fn rejected(schema: &str, level: &str, reason: &str) {
        REJECTED.with_label_values(&[schema, level, reason]).inc();
    }
}

/// `/metrics`: every component's metrics in the text format.
pub(crate) async fn serve() -> Response {
    (
        [(http::header::CONTENT_TYPE, m::TEXT_CONTENT_TYPE)],
        m::gather(&Component::ALL),
    )
        .into_response()
}

/// Counts a watcher of `group/version` `kind` while the guard lives.
pub(crate) fn watcher(group: &str, version: &str, kind: &str) -> GaugeGuard {
    GaugeGuard::new(WATCHERS.with_label_values(&[group, version, kind]))
}

/// Records a store operation of `kind` that began at `started`.
pub(crate) fn observe_store(operation: &str, kind: &str, started: Instant) {
    STORE_DURATION
        .with_label_values(&[operation, kind])
        .observe(started.elapsed().as_secs_f64());
}

/// The servers whose watch caches `apiserver_storage_objects` counts: one
/// in a real process, several in tests, whose counts add up.
static SERVERS: LazyLock<parking_lot::Mutex<Vec<Weak<Inner>>>> = LazyLock::new(|| {
    m::on_scrape(C, count_stored);
    Default::default()
});

/// Keeps `apiserver_storage_objects` at the watch caches' counts, read at
/// each scrape while the server lives (upstream polls etcd for the same).
pub(crate) fn follow_storage(inner: &Arc<Inner>) {
    SERVERS.lock().push(Arc::downgrade(inner));
}

fn count_stored() -> bool {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    SERVERS.lock().retain(|weak| {
        let Some(inner) = weak.upgrade() else {
            return false;
        };
        let registry = inner.registry.current();
        let mut seen = std::collections::HashSet::new();
        for info in registry.resources().iter().filter(|r| !r.is_virtual()) {
            if seen.insert(info.storage_prefix.as_str())
                && let Ok(cache) = inner.cache(info)
            {
                *counts.entry(info.qualified()).or_default() += cache.snapshot().objects.len();
            }
        }
        true
    });
    for (resource, count) in counts {
        STORAGE_OBJECTS
            .with_label_values(&[&resource])
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }
    true
}

/// What a request is, in upstream's metric labels.
struct Labels {
    verb: &'static str,
    dry_run: &'static str,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    scope: &'static str,
    /// A resource request (checked against the registry when refused).
    resource_request: bool,
    long_running: bool,
    mutating: bool,
}

impl Labels {
    fn of(request: &Request, described: &RequestInfo) -> Option<Self> {
        let method = request.method();
        let uri = request.uri();
        let (verb, kind) = (&described.verb, &described.kind);
        let long_running = described.long_running();
        let mutating = !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
        let dry_run = dry_run(uri.query());
        match kind {
            RequestKind::Resource(attrs) => {
                let connect = matches!(
                    attrs.subresource.as_str(),
                    "exec" | "attach" | "portforward" | "proxy"
                );
                let verb = match verb.as_str() {
                    _ if connect => "CONNECT",
                    "get" => "GET",
                    "list" => "LIST",
                    "watch" => "WATCH",
                    "create" => "POST",
                    "update" => "PUT",
                    "patch" if is_apply(request) => "APPLY",
                    "patch" => "PATCH",
                    "delete" => "DELETE",
                    "deletecollection" => "DELETECOLLECTION",
                    _ => return None,
                };
                // Upstream's CleanScope.
                let scope = if !attrs.name.is_empty() || verb == "POST" {
                    "resource"
                } else if !attrs.namespace.is_empty() {
                    "namespace"
                } else {
                    "cluster"
                };
                Some(Self {
                    verb,
                    dry_run,
                    group: attrs.group.clone(),
                    version: attrs.version.clone(),
                    resource: attrs.resource.clone(),
                    subresource: attrs.subresource.clone(),
                    scope,
                    resource_request: true,
                    long_running,
                    mutating,
                })
            }
            RequestKind::NonResource { path } => {
                let path = COUNTED_PATHS.iter().find(|p| **p == *path)?;
                let verb = match *method {
                    Method::GET => "GET",
                    Method::HEAD => "HEAD",
                    _ => return None,
                };
                Some(Self {
                    verb,
                    dry_run,
                    group: String::new(),
                    version: String::new(),
                    resource: String::new(),
                    subresource: (*path).to_string(),
                    scope: "",
                    resource_request: false,
                    long_running,
                    mutating,
                })
            }
        }
    }

    /// Whether the registry serves this resource and subresource.
    fn served(&self, inner: &Inner) -> bool {
        if !self.resource_request {
            return true;
        }
        let registry = inner.registry.current();
        let Some(info) = registry.get(&self.group, &self.version, &self.resource) else {
            return false;
        };
        self.subresource.is_empty()
            || info
                .subresources
                .iter()
                .any(|s| s.name() == self.subresource)
    }
}

/// Upstream's cleaned `dryRun`: empty, `All`, or `invalid`.
fn dry_run(query: Option<&str>) -> &'static str {
    let Some(query) = query.filter(|q| q.contains("dryRun")) else {
        return "";
    };
    let mut any = false;
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        if key == "dryRun" {
            if value != "All" {
                return "invalid";
            }
            any = true;
        }
    }
    if any { "All" } else { "" }
}

fn is_apply(request: &Request) -> bool {
    request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/apply-patch"))
}

/// The request layer.
pub(crate) async fn instrument(
    State(inner): State<Arc<Inner>>,
    mut request: Request,
    next: Next,
) -> Response {
    let described = RequestInfo::of(&mut request);
    let Some(labels) = Labels::of(&request, &described) else {
        return next.run(request).await;
    };
    let started = Instant::now();
    let inflight = (!labels.long_running).then(|| {
        let kind = if labels.mutating {
            "mutating"
        } else {
            "readOnly"
        };
        GaugeGuard::new(INFLIGHT.with_label_values(&[kind]))
    });
    let response = next.run(request).await;
    drop(inflight);
    let status = response.status();
    if status.as_u16() >= 400 && !labels.served(&inner) {
        return response;
    }
    let Labels {
        verb,
        dry_run,
        ref group,
        ref version,
        ref resource,
        ref subresource,
        scope,
        ..
    } = labels;
    let values = [
        verb,
        dry_run,
        group,
        version,
        resource,
        subresource,
        scope,
        "apiserver",
        status.as_str(),
    ];
    REQUESTS.with_label_values(&values).inc();
    // Upstream leaves watches out of the latency histogram: their length
    // is the client's choice.
    if verb != "WATCH" {
        DURATION
            .with_label_values(&values[..REQUEST_LABELS.len()])
            .observe(started.elapsed().as_secs_f64());
    }
    if !labels.long_running || !status.is_success() {
        return response;
    }
    let guard = GaugeGuard::new(LONG_RUNNING.with_label_values(&[
        "apiserver",
        group,
        resource,
        scope,
        subresource,
        verb,
        version,
    ]));
    // The gauge stays up until the stream ends.
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, crate::body::holding(body, guard))
}

#[cfg(test)]
mod tests {
    use axum::body::Body;

    use super::*;

    fn labels(method: Method, uri: &str, content_type: Option<&str>) -> Option<Labels> {
        let mut builder = http::Request::builder().method(method).uri(uri);
        if let Some(ct) = content_type {
            builder = builder.header(http::header::CONTENT_TYPE, ct);
        }
        let mut request = builder.body(Body::empty()).expect("request");
        let described = RequestInfo::of(&mut request);
        Labels::of(&request, &described)
    }

    #[test]
    fn verbs_and_scopes_are_upstreams() {
        let cases = [
            (
                Method::GET,
                "/api/v1/namespaces/a/pods",
                None,
                "LIST",
                "namespace",
            ),
            (
                Method::GET,
                "/api/v1/pods?watch=true",
                None,
                "WATCH",
                "cluster",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/pods/p",
                None,
                "GET",
                "resource",
            ),
            (
                Method::POST,
                "/api/v1/namespaces/a/pods",
                None,
                "POST",
                "resource",
            ),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/a/deployments/d",
                Some("application/apply-patch+yaml"),
                "APPLY",
                "resource",
            ),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/a/deployments/d",
                Some("application/merge-patch+json"),
                "PATCH",
                "resource",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/a/pods",
                None,
                "DELETECOLLECTION",
                "namespace",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/pods/p/exec?command=ls",
                None,
                "CONNECT",
                "resource",
            ),
            (Method::GET, "/readyz", None, "GET", ""),
        ];
        for (method, uri, ct, verb, scope) in cases {
            let l = labels(method, uri, ct).expect(uri);
            assert_eq!((l.verb, l.scope), (verb, scope), "{uri}");
        }
        assert!(labels(Method::GET, "/made/up/path", None).is_none());
    }

    #[test]
    fn dry_run_is_cleaned_as_upstream() {
        assert_eq!(dry_run(None), "");
        assert_eq!(dry_run(Some("dryRun=All")), "All");
        assert_eq!(dry_run(Some("dryRun=All&dryRun=All")), "All");
        assert_eq!(dry_run(Some("dryRun=Some")), "invalid");
        assert_eq!(dry_run(Some("fieldManager=dryRunner")), "");
    }
}
