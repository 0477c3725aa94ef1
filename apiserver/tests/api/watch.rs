use std::time::Duration;

use serde_json::{Value, json};
use skiff_store::Store;

use crate::harness::{Client, TestServer, WatchReader, item_names, refused};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// Starts a watch of the default namespace's ConfigMaps with the query
/// `options` besides `watch=1`: the watch nearly every test here makes.
async fn watch_configmaps(s: &TestServer, options: &str) -> WatchReader {
    s.watch(&format!("{CMS}?watch=1&{options}")).await
}

fn ev(t: &str, n: &str) -> (String, String) {
    (t.to_string(), n.to_string())
}

/// Creates configmap `name` in the default namespace and asserts `w`
/// delivers it next, as ADDED: how the tests see a watch still serving.
/// Gives the created object.
async fn create_and_see_added(s: &TestServer, w: &mut WatchReader, name: &str) -> Value {
    let created = s.configmap("default", name, json!({})).await;
    assert_eq!(w.next_summary().await, ev("ADDED", name));
    created
}

/// Asserts `w` stays open and quiet for 2.5 s, well past a one-second
/// timeout, then still delivers a configmap created after: the check of
/// every timeout a watch must outlive.
async fn stays_open_past_a_second_and_delivers(s: &TestServer, w: &mut WatchReader) {
    assert_eq!(
        w.next_within(Duration::from_millis(2500)).await,
        Err(()),
        "the watch is still open past the timeout"
    );
    create_and_see_added(s, w, "late").await;
}

#[tokio::test]
async fn watch_without_version_starts_with_current_state() {
    let s = TestServer::new().await;
    s.configmap("default", "a", json!({})).await;
    let mut w = s.watch(&format!("{CMS}?watch=true")).await;
    assert_eq!(w.next_summary().await, ev("ADDED", "a"));
    let b = create_and_see_added(&s, &mut w, "b").await;
    let mut changed = b.clone();
    changed["data"] = json!({"k": "2"});
    s.put(&format!("{CMS}/b"), changed).await;
    let e = w.next().await.unwrap();
    assert_eq!(e["type"], "MODIFIED");
    assert_eq!(e["object"]["data"]["k"], "2");
    assert_eq!(e["object"]["kind"], "ConfigMap");
    s.delete(&format!("{CMS}/a")).await;
    assert_eq!(w.next_summary().await, ev("DELETED", "a"));
}

#[tokio::test]
async fn watch_from_a_version_sends_only_later_events() {
    let s = TestServer::new().await;
    let a = s.configmap("default", "a", json!({})).await;
    s.configmap("default", "b", json!({})).await;
    let rv = a["metadata"]["resourceVersion"].as_str().unwrap();
    let mut w = watch_configmaps(&s, &format!("resourceVersion={rv}")).await;
    assert_eq!(w.next_summary().await, ev("ADDED", "b"));
    assert!(
        w.next_within(Duration::from_millis(100)).await.is_err(),
        "nothing else"
    );
}

#[tokio::test]
async fn selectors_turn_transitions_into_added_and_deleted() {
    let s = TestServer::new().await;
    let mut w = watch_configmaps(&s, "labelSelector=app%3Dweb").await;
    let other = s.configmap("default", "x", json!({"app": "db"})).await;
    let mut moved = other.clone();
    moved["metadata"]["labels"] = json!({"app": "web"});
    let (_, moved) = s.put(&format!("{CMS}/x"), moved).await;
    assert_eq!(w.next_summary().await, ev("ADDED", "x"));
    let mut back = moved.clone();
    back["metadata"]["labels"] = json!({"app": "db"});
    s.put(&format!("{CMS}/x"), back).await;
    let e = w.next().await.unwrap();
    assert_eq!(e["type"], "DELETED");
    assert_eq!(
        e["object"]["metadata"]["labels"]["app"], "db",
        "the new state is reported"
    );
}

#[tokio::test]
async fn single_object_watch_by_field_selector() {
    let s = TestServer::new().await;
    let mut w = watch_configmaps(&s, "fieldSelector=metadata.name%3Dme").await;
    s.configmap("default", "other", json!({})).await;
    create_and_see_added(&s, &mut w, "me").await;
}

#[tokio::test]
async fn timeout_ends_the_stream() {
    let s = TestServer::new().await;
    let mut w = watch_configmaps(&s, "timeoutSeconds=1").await;
    assert_eq!(w.next_within(Duration::from_secs(5)).await, Ok(None));
}

#[tokio::test]
async fn a_watch_ignores_the_clients_request_timeout() {
    let s = TestServer::new().await;
    // kubectl's --request-timeout=1s arrives as `timeout=1s`.
    let mut w = watch_configmaps(&s, "timeout=1s").await;
    stays_open_past_a_second_and_delivers(&s, &mut w).await;
}

#[tokio::test]
async fn without_timeout_seconds_a_watch_ends_within_twice_the_default() {
    let s = TestServer::configured(|c| c.default_watch_timeout = Duration::from_secs(1)).await;
    // Zero is no timeout of the client's own, as upstream reads it.
    let mut w = watch_configmaps(&s, "timeoutSeconds=0").await;
    let started = std::time::Instant::now();
    assert_eq!(w.next_within(Duration::from_secs(5)).await, Ok(None));
    let lasted = started.elapsed();
    assert!(
        lasted >= Duration::from_millis(900) && lasted < Duration::from_millis(2500),
        "{lasted:?}"
    );
}

#[tokio::test]
async fn a_version_past_the_caches_history_is_served_from_the_store_until_compacted() {
    let s = TestServer::configured(|c| c.watch_history = 2).await;
    let first = s.configmap("default", "a", json!({})).await;
    for i in 0..4 {
        s.configmap("default", &format!("b{i}"), json!({})).await;
    }
    s.delete(&format!("{CMS}/b0")).await;
    let rv = first["metadata"]["resourceVersion"].as_str().unwrap();
    let path = format!("{CMS}?watch=1&resourceVersion={rv}");
    // The cache keeps two events; the store still has all five.
    let mut w = s.watch(&path).await;
    let mut seen = Vec::new();
    for _ in 0..5 {
        let e = w.next().await.unwrap();
        seen.push(format!(
            "{} {}",
            e["type"].as_str().unwrap(),
            e["object"]["metadata"]["name"].as_str().unwrap()
        ));
    }
    assert_eq!(
        seen,
        ["ADDED b0", "ADDED b1", "ADDED b2", "ADDED b3", "DELETED b0"]
    );
    // Live changes follow on the same stream.
    s.configmap("default", "later", json!({})).await;
    let e = w.next().await.unwrap();
    assert_eq!(e["object"]["metadata"]["name"], "later");
    drop(w);

    // Once the store has compacted past it, the version is gone for good.
    s.store.compact(s.store.current_revision()).await.unwrap();
    let mut w = s.watch(&path).await;
    let e = w.next().await.unwrap();
    assert_eq!(e["type"], "ERROR");
    assert_eq!(e["object"]["code"], 410);
    assert_eq!(e["object"]["reason"], "Expired");
    assert!(
        e["object"]["message"]
            .as_str()
            .unwrap()
            .starts_with("too old resource version"),
        "{e}"
    );
    assert_eq!(w.next().await, None);
}

#[tokio::test]
async fn bookmarks_carry_the_current_version() {
    let s = TestServer::configured(|c| c.bookmark_interval = Duration::from_millis(100)).await;
    let cm = s.configmap("default", "a", json!({})).await;
    let rv = cm["metadata"]["resourceVersion"].as_str().unwrap();
    let mut w = watch_configmaps(
        &s,
        &format!("allowWatchBookmarks=true&resourceVersion={rv}"),
    )
    .await;
    let e = w.next().await.unwrap();
    assert_eq!(e["type"], "BOOKMARK");
    assert_eq!(e["object"]["kind"], "ConfigMap");
    assert_eq!(e["object"]["metadata"]["resourceVersion"], rv);
    // A write elsewhere moves the bookmarks on: nothing of this resource
    // changed up to there (the store's watch says it delivered that far).
    let (_, secret) = s
        .post(
            "/api/v1/namespaces/default/secrets",
            json!({"metadata": {"name": "s"}}),
        )
        .await;
    let elsewhere = secret["metadata"]["resourceVersion"].clone();
    let moved = loop {
        let e = w.next().await.unwrap();
        assert_eq!(e["type"], "BOOKMARK", "{e}");
        if e["object"]["metadata"]["resourceVersion"] != rv {
            break e;
        }
    };
    assert_eq!(moved["object"]["metadata"]["resourceVersion"], elsewhere);
}

#[tokio::test]
async fn shutdown_ends_every_watch() {
    let s = TestServer::new().await;
    let mut a = s.watch("/api/v1/configmaps?watch=1").await;
    let mut b = s.watch("/api/v1/pods?watch=1").await;
    s.server.shutdown();
    assert_eq!(a.next().await, None);
    assert_eq!(b.next().await, None);
    let (code, body) = s.get("/readyz").await;
    assert_eq!(code, http::StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        body.as_str()
            .unwrap()
            .contains("[-]shutdown failed: reason withheld"),
        "{body}"
    );
}

#[tokio::test]
async fn many_watchers_each_see_every_event() {
    let s = TestServer::new().await;
    let mut watchers = Vec::new();
    for _ in 0..50 {
        watchers.push(watch_configmaps(&s, "resourceVersion=1").await);
    }
    for i in 0..20 {
        s.configmap("default", &format!("cm{i:02}"), json!({}))
            .await;
    }
    for w in &mut watchers {
        for i in 0..20 {
            assert_eq!(w.next_summary().await, ev("ADDED", &format!("cm{i:02}")));
        }
    }
}

#[tokio::test]
async fn a_slow_watcher_catches_up_from_history() {
    let s = TestServer::new().await;
    // This watcher is not read while 1,500 events (more than the live
    // buffer) happen, then must still see all of them in order.
    let mut slow = watch_configmaps(&s, "resourceVersion=1").await;
    for i in 0..1500 {
        s.configmap("default", &format!("cm{i:04}"), json!({}))
            .await;
    }
    for i in 0..1500 {
        assert_eq!(slow.next_summary().await, ev("ADDED", &format!("cm{i:04}")));
    }
}

#[tokio::test]
async fn streaming_list_ends_initial_events_with_a_bookmark() {
    let s = TestServer::new().await;
    s.configmap("default", "a", json!({})).await;
    // Writes of another kind after it: a consistent list of ConfigMaps is
    // at their revision, and so is the end of the initial events.
    for i in 0..3 {
        s.created(
            "/api/v1/namespaces/default/secrets",
            json!({"metadata": {"name": format!("s{i}")}}),
        )
        .await;
    }
    let listed = s.get_ok(CMS).await;
    let listed_at: u64 = listed["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let query =
        "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";
    let mut w = s.watch(&format!("{CMS}?{query}")).await;
    assert_eq!(w.next_summary().await, ev("ADDED", "a"));
    let bookmark = w.next().await.unwrap();
    assert_eq!(bookmark["type"], "BOOKMARK");
    assert_eq!(
        bookmark["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    let bookmark_at: u64 = bookmark["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(bookmark_at >= listed_at, "{bookmark_at} < {listed_at}");
    create_and_see_added(&s, &mut w, "b").await;
}

/// A resourceVersion `by` past the store's, and upstream's message for a
/// read of it (the 504 the watch and list cases expect).
fn version_past_the_store(s: &TestServer, by: u64) -> (u64, String) {
    let current = s.store.current_revision();
    let ahead = current + by;
    let message = format!("Timeout: Too large resource version: {ahead}, current: {current}");
    (ahead, message)
}

#[tokio::test]
async fn a_watch_from_a_version_the_store_has_not_reached_fails_after_a_wait() {
    let s = TestServer::new().await;
    let (ahead, too_large) = version_past_the_store(&s, 1000);
    let started = std::time::Instant::now();
    let mut w = watch_configmaps(&s, &format!("resourceVersion={ahead}")).await;
    let event = w
        .next_within(Duration::from_secs(8))
        .await
        .unwrap()
        .unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(2900) && waited < Duration::from_secs(6),
        "{waited:?}"
    );
    assert_eq!(event["type"], "ERROR", "{event}");
    let status = &event["object"];
    assert_eq!(status["code"], 504, "{status}");
    assert_eq!(status["reason"], "Timeout");
    assert_eq!(status["message"], too_large);
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    assert_eq!(w.next_within(Duration::from_secs(2)).await, Ok(None));
}

#[tokio::test]
async fn a_watch_slightly_ahead_is_served_once_the_store_gets_there() {
    let s = TestServer::new().await;
    let next = s.store.current_revision() + 1;
    let mut w = watch_configmaps(&s, &format!("resourceVersion={next}")).await;
    s.configmap("default", "first", json!({})).await; // at `next`: not sent
    create_and_see_added(&s, &mut w, "second").await;
}

#[tokio::test]
async fn a_list_from_a_version_the_store_has_not_reached_is_a_504() {
    let s = TestServer::new().await;
    let (ahead, too_large) = version_past_the_store(&s, 50);
    let ahead_of_the_store =
        format!("{CMS}?resourceVersion={ahead}&resourceVersionMatch=NotOlderThan");
    let body = refused(s.get(&ahead_of_the_store).await, 504, "Timeout", &too_large);
    assert_eq!(body["details"]["retryAfterSeconds"], 1);
    // An exact list of a version still to come is the same 504, not "too old".
    let exact_ahead = format!("{CMS}?resourceVersion={ahead}&resourceVersionMatch=Exact");
    refused(s.get(&exact_ahead).await, 504, "Timeout", &too_large);
}

/// An exact list of a past state is read from the store's history, as
/// upstream reads it from etcd's; once compaction dropped that state, it is
/// 410 in upstream's words.
#[tokio::test]
async fn an_exact_list_of_a_past_state_reads_history_until_it_is_compacted() {
    let s = TestServer::new().await;
    s.configmap("default", "first", json!({"v": "1"})).await;
    s.configmap("default", "second", json!({})).await;
    let then = s.store.current_revision();
    s.merge_patch_ok(
        &format!("{CMS}/first"),
        json!({"metadata": {"labels": {"v": "2"}}}),
    )
    .await;
    let patched = s.store.current_revision();
    s.configmap("default", "third", json!({})).await;
    let now = s.store.current_revision();
    let exact = |rv| format!("{CMS}?resourceVersion={rv}&resourceVersionMatch=Exact");
    let current = s.get_ok(&exact(now)).await;
    assert_eq!(current["items"].as_array().unwrap().len(), 3, "{current}");
    let past = s.get_ok(&exact(then)).await;
    assert_eq!(item_names(&past), vec!["first", "second"], "{past}");
    assert_eq!(past["items"][0]["metadata"]["labels"]["v"], "1");
    assert_eq!(past["metadata"]["resourceVersion"], then.to_string());
    // Paged, the past state goes on from its continue token.
    let page = s.get_ok(&format!("{}&limit=1", exact(then))).await;
    assert_eq!(item_names(&page), vec!["first"]);
    let token = page["metadata"]["continue"]
        .as_str()
        .expect("a continue token");
    let rest = s.get_ok(&format!("{CMS}?limit=1&continue={token}")).await;
    assert_eq!(item_names(&rest), vec!["second"]);
    // A state no list kept a snapshot of is gone with compaction.
    s.store.compact(now).await.expect("compaction");
    refused(
        s.get(&exact(patched)).await,
        410,
        "Expired",
        "The resourceVersion for the provided list is too old.",
    );
}

#[tokio::test]
async fn a_watch_outlives_the_request_timeout() {
    let s = TestServer::configured(|c| c.request_timeout = Duration::from_secs(1)).await;
    let mut w = s.watch(&format!("{CMS}?watch=1")).await;
    stays_open_past_a_second_and_delivers(&s, &mut w).await;
    // Requests that are not long-running still answer within it.
    s.get_ok(CMS).await;
}
