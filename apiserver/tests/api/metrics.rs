//! `/metrics`: upstream's request, watch, storage and flow-control metrics
//! move with the requests made, the page is valid exposition text, and
//! only callers granted `get` on the path (group `system:monitoring`,
//! cluster-admin) read it.
//!
//! The registry is the process's, shared by every test server of this
//! binary, so counters are compared before and after, and gauges read as
//! at least what this test holds open.

use http::StatusCode;
use serde_json::json;
use skiff_apiserver::authn::UserInfo;
use skiff_common::metrics::exposition::{self, Sample};

use super::harness::*;

/// `/metrics` as the admin: the samples, after checking the content type
/// (the flow-control tests read their metrics this way too).
pub async fn scrape(s: &TestServer) -> Vec<Sample> {
    let (code, headers, bytes) = fetch(s, "/metrics", &[]).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        headers[http::header::CONTENT_TYPE],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = String::from_utf8(bytes).unwrap();
    exposition::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    exposition::value(samples, name, labels).unwrap_or(0.0)
}

/// The labels of a request to the core group's configmaps.
fn configmaps<'a>(
    verb: &'a str,
    scope: &'a str,
    extra: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut labels = vec![
        ("verb", verb),
        ("group", ""),
        ("version", "v1"),
        ("resource", "configmaps"),
        ("subresource", ""),
        ("scope", scope),
        ("component", "apiserver"),
    ];
    labels.extend_from_slice(extra);
    labels
}

#[tokio::test]
async fn requests_are_counted_with_upstreams_labels() {
    let s = TestServer::new().await;
    let created = configmaps("POST", "resource", &[("code", "201"), ("dry_run", "")]);
    let dry = configmaps("POST", "resource", &[("code", "201"), ("dry_run", "All")]);
    let listed = configmaps("LIST", "namespace", &[("code", "200")]);
    let applied = configmaps("APPLY", "resource", &[("code", "201")]);
    let latency = configmaps("POST", "resource", &[("dry_run", "")]);
    let before = scrape(&s).await;

    s.configmap("default", "counted", json!({})).await;
    s.created(
        "/api/v1/namespaces/default/configmaps?dryRun=All",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}}),
    )
    .await;
    s.get_ok("/api/v1/namespaces/default/configmaps").await;
    s.apply_yaml(
        "/api/v1/namespaces/default/configmaps/applied?fieldManager=metrics-test",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n",
    )
    .await
    .expect_code(StatusCode::CREATED);
    // A made-up resource is refused and leaves no series behind.
    s.get_not_found("/api/v1/namespaces/default/madeupthings")
        .await;

    let after = scrape(&s).await;
    let moved = |labels: &[(&str, &str)]| {
        value(&after, "apiserver_request_total", labels)
            - value(&before, "apiserver_request_total", labels)
    };
    assert!(moved(&created) >= 1.0, "create not counted");
    assert!(moved(&dry) >= 1.0, "dry-run create not counted");
    assert!(moved(&listed) >= 1.0, "list not counted");
    assert!(moved(&applied) >= 1.0, "apply not counted");
    let count = "apiserver_request_duration_seconds_count";
    assert!(value(&after, count, &latency) > value(&before, count, &latency));
    assert!(
        after
            .iter()
            .all(|sample| sample.label("resource") != Some("madeupthings")),
        "a made-up resource got a series"
    );
    let at_least = [
        (
            "apiserver_storage_objects",
            &[("resource", "configmaps")][..],
            2.0,
        ),
        (
            "etcd_request_duration_seconds_count",
            &[("operation", "create"), ("type", "configmaps")][..],
            2.0,
        ),
        // The admin is system:masters: exempt from flow control, yet dispatched.
        (
            "apiserver_flowcontrol_dispatched_requests_total",
            &[("flow_schema", "exempt"), ("priority_level", "exempt")][..],
            5.0,
        ),
    ];
    for (name, labels, least) in at_least {
        assert!(value(&after, name, labels) >= least, "{name} {labels:?}");
    }
}

#[tokio::test]
async fn open_watches_are_registered_and_long_running() {
    let s = TestServer::new().await;
    let mut watch = s
        .watch("/apis/apps/v1/namespaces/default/deployments?watch=1")
        .await;
    let samples = scrape(&s).await;
    let watchers = [("group", "apps"), ("version", "v1"), ("kind", "Deployment")];
    assert!(value(&samples, "apiserver_registered_watchers", &watchers) >= 1.0);
    let long_running = [
        ("verb", "WATCH"),
        ("resource", "deployments"),
        ("scope", "namespace"),
    ];
    assert!(value(&samples, "apiserver_longrunning_requests", &long_running) >= 1.0);
    // Watches are left out of the latency histogram, as upstream's.
    assert!(
        samples
            .iter()
            .filter(|x| x.name == "apiserver_request_duration_seconds_count")
            .all(|x| x.label("verb") != Some("WATCH"))
    );
    assert!(
        watch
            .next_within(std::time::Duration::from_millis(10))
            .await
            .is_err()
    );
    // A client that goes away takes its watcher with it.
    drop(watch);
    eventually(
        std::time::Duration::from_secs(5),
        std::time::Duration::from_millis(20),
        || async {
            let samples = scrape(&s).await;
            let registered = value(&samples, "apiserver_registered_watchers", &watchers);
            if registered == 0.0 {
                return Ok(());
            }
            Err(format!(
                "{registered} watchers still registered after the client went"
            ))
        },
    )
    .await;
}

#[tokio::test]
async fn only_monitoring_reads_metrics() {
    let s = TestServer::new().await;
    let monitor = UserInfo::new("prometheus", vec!["system:monitoring".to_string()]);
    let body = s
        .get_as(&monitor, "/metrics")
        .await
        .expect_code(StatusCode::OK);
    let text = body.as_str().expect("text");
    assert!(
        text.contains("# TYPE apiserver_request_total counter"),
        "{text}"
    );

    let user = UserInfo::new("alice", vec!["system:authenticated".to_string()]);
    forbidden(
        s.get_as(&user, "/metrics").await,
        "forbidden: User \"alice\" cannot get path \"/metrics\"",
    );
    let anonymous = UserInfo::new(
        "system:anonymous",
        vec!["system:unauthenticated".to_string()],
    );
    s.get_as(&anonymous, "/metrics")
        .await
        .expect_failure(401, "Unauthorized");
}
