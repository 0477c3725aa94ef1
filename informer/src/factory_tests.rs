//! Factory tests against a scripted API behind a real `kube::Client`.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};

use super::*;
use crate::fake_api::{FakeApi, config_map, gone};
use crate::handler::HandlerFns;

/// A fake API whose first ConfigMap list holds `ns/a`@5 and `ns/b`@6 at
/// resourceVersion 10 and whose watch from there sends `events`: the
/// starting state each watch case then changes in its own way.
fn listing_a_and_b_then(events: Vec<(&str, serde_json::Value)>) -> FakeApi {
    let fake = FakeApi::default();
    fake.push_list(
        "ConfigMap",
        "10",
        vec![config_map("ns", "a", "5"), config_map("ns", "b", "6")],
    );
    fake.push_watch(events);
    fake
}

/// Asserts that `fake` was asked for `path` (with its query's `?`) with
/// every one of `query` in the query.
#[track_caller]
fn assert_requested(fake: &FakeApi, path: &str, query: &[&str]) {
    let requests = fake.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with(path) && query.iter().all(|q| r.contains(q))),
        "no request for {path} with {query:?}: {requests:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn one_informer_per_type_and_scope() {
    let factory = SharedInformerFactory::new(FakeApi::default().client());
    let pods = factory.informer::<Pod>();
    assert!(pods.ptr_eq(&factory.informer::<Pod>()));
    assert!(pods.ptr_eq(&factory.clone().informer::<Pod>()));
    let node_pods = factory.informer_with::<Pod>(WatchConfig::default().fields("spec.nodeName=n1"));
    assert!(!pods.ptr_eq(&node_pods));
    assert!(
        node_pods.ptr_eq(
            &factory.informer_with::<Pod>(WatchConfig::default().fields("spec.nodeName=n1"))
        )
    );
    let ns_pods = factory.namespaced_informer::<Pod>("team", WatchConfig::default());
    assert!(!ns_pods.ptr_eq(&pods));
    factory.informer::<Node>();
    assert_eq!(factory.informer_count(), 4);
}

#[tokio::test(start_paused = true)]
async fn start_lists_watches_and_syncs_every_informer() {
    let fake = FakeApi::default();
    fake.push_list("ConfigMap", "10", vec![config_map("ns", "a", "5")]);
    fake.push_watch(vec![("ADDED", config_map("ns", "b", "11"))]);
    let factory = SharedInformerFactory::new(fake.client());
    let informer = factory.informer::<ConfigMap>();
    assert!(!factory.has_synced());
    factory.start().unwrap();
    tokio::time::timeout(Duration::from_secs(10), factory.wait_for_sync())
        .await
        .expect("informers sync");
    assert!(informer.has_synced());
    assert!(informer.cache().get("ns", "a").is_some());
    // The watch continues from the list's resourceVersion.
    tokio::time::timeout(Duration::from_secs(10), async {
        while informer.cache().get("ns", "b").is_none() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("watch event applied");
    assert_requested(
        &fake,
        "/api/v1/configmaps?",
        &["watch=true", "resourceVersion=10"],
    );
    factory.shutdown();
    assert!(!informer.is_running());
}

#[tokio::test(start_paused = true)]
async fn informers_created_after_start_are_started() {
    let fake = FakeApi::default();
    fake.push_list("ConfigMap", "1", vec![config_map("ns", "a", "1")]);
    let factory = SharedInformerFactory::new(fake.client());
    factory.start().unwrap();
    let informer = factory.informer::<ConfigMap>();
    tokio::time::timeout(Duration::from_secs(10), informer.wait_for_sync())
        .await
        .expect("late informer syncs");
    assert_eq!(informer.cache().len(), 1);
    factory.shutdown();
}

#[tokio::test(start_paused = true)]
async fn scoping_reaches_the_list_and_watch_requests() {
    let fake = FakeApi::default();
    fake.push_list("Pod", "1", vec![]);
    let factory = SharedInformerFactory::new(fake.client());
    factory.informer_with::<Pod>(WatchConfig::default().fields("spec.nodeName=node-1"));
    factory.namespaced_informer::<ConfigMap>("team", WatchConfig::default().labels("app=web"));
    factory.start().unwrap();
    tokio::time::timeout(Duration::from_secs(10), factory.wait_for_sync())
        .await
        .expect("sync");
    assert_requested(
        &fake,
        "/api/v1/pods?",
        &["fieldSelector=spec.nodeName%3Dnode-1"],
    );
    assert_requested(
        &fake,
        "/api/v1/namespaces/team/configmaps?",
        &["labelSelector=app%3Dweb"],
    );
    factory.shutdown();
}

#[tokio::test(start_paused = true)]
async fn a_410_relist_delivers_deletes_missed_while_the_watch_was_gone() {
    // The watch adds c, then the server says our resourceVersion is too old.
    let fake = listing_a_and_b_then(vec![
        ("ADDED", config_map("ns", "c", "11")),
        ("ERROR", gone()),
    ]);
    // Meanwhile b and c were deleted.
    fake.push_list("ConfigMap", "20", vec![config_map("ns", "a", "5")]);
    let factory = SharedInformerFactory::new(fake.client());
    let informer = factory.informer::<ConfigMap>();
    let log = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let (a, d) = (log.clone(), log.clone());
    let name = |c: &ConfigMap| c.metadata.name.clone().unwrap_or_default();
    let handle = informer
        .add_event_handler(
            HandlerFns::new()
                .on_add(move |c: &std::sync::Arc<ConfigMap>| {
                    a.lock().push(format!("add {}", name(c)))
                })
                .on_delete(move |c| {
                    d.lock().push(format!(
                        "delete {}@{}",
                        name(c),
                        c.metadata.resource_version.clone().unwrap_or_default()
                    ))
                }),
        )
        .unwrap();
    factory.start().unwrap();
    tokio::time::timeout(Duration::from_secs(30), async {
        while log.lock().len() < 5 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "relist not delivered: {:?} {:?}",
            log.lock(),
            fake.requests()
        )
    });
    handle.wait_idle().await;
    assert_eq!(
        *log.lock(),
        ["add a", "add b", "add c", "delete b@6", "delete c@11"]
    );
    let mut keys = informer.cache().keys();
    keys.sort();
    assert_eq!(keys, ["ns/a"]);
    factory.shutdown();
}

#[tokio::test(start_paused = true)]
async fn a_controller_reconciles_keys_from_informer_events_against_the_cache() {
    use crate::controller::{Action, Controller};
    use crate::handler::EnqueueKeys;
    use crate::key::ObjectKey;
    use crate::workqueue::WorkQueue;

    let fake = listing_a_and_b_then(vec![
        ("MODIFIED", config_map("ns", "a", "11")),
        ("DELETED", config_map("ns", "b", "12")),
    ]);
    let factory = SharedInformerFactory::new(fake.client());
    let informer = factory.informer::<ConfigMap>();
    let queue = WorkQueue::<ObjectKey>::new();
    informer
        .add_event_handler(EnqueueKeys::new(queue.clone()))
        .unwrap();
    factory.start().unwrap();
    factory.wait_for_sync().await;

    // Reconcile reads the latest state from the cache, as controllers do.
    let seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let (cache, record) = (informer.cache().clone(), seen.clone());
    let controller = Controller::new("configmaps", queue.clone()).workers(2);
    let run = tokio::spawn(controller.run(move |key: ObjectKey| {
        let state = cache
            .get(key.namespace.as_deref().unwrap_or(""), &key.name)
            .and_then(|c| c.metadata.resource_version.clone());
        record.lock().push((key.to_string(), state));
        async { Ok::<_, String>(Action::Done) }
    }));
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            {
                let seen = seen.lock();
                let a_latest = seen
                    .iter()
                    .any(|(k, s)| k == "ns/a" && s.as_deref() == Some("11"));
                let b_gone = seen.iter().any(|(k, s)| k == "ns/b" && s.is_none());
                if a_latest && b_gone {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("reconciles seen: {:?}", seen.lock()));
    queue.shutdown_with_drain().await;
    run.await.unwrap();
    factory.shutdown();
}
