//! Informer tests fed with synthetic watcher events (no API server).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use futures::stream;
use k8s_openapi::api::core::v1::ConfigMap;

use super::*;
use crate::fake_api::cm;
use crate::handler::HandlerFns;
use crate::key::object_key;

fn rv(c: &ConfigMap) -> u64 {
    c.metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn initial_list(objects: Vec<ConfigMap>) -> Vec<watcher::Event<ConfigMap>> {
    let mut events = vec![watcher::Event::Init];
    events.extend(objects.into_iter().map(watcher::Event::InitApply));
    events.push(watcher::Event::InitDone);
    events
}

type Log = Arc<parking_lot::Mutex<Vec<String>>>;

/// A handler writing "add a@1" / "update a@1->a@2" / "delete a@1" lines.
fn logging_handler(log: Log) -> HandlerFns<ConfigMap> {
    let id = |c: &ConfigMap| format!("{}@{}", c.metadata.name.as_deref().unwrap_or(""), rv(c));
    let (a, u, d) = (log.clone(), log.clone(), log);
    HandlerFns::new()
        .on_add(move |o| a.lock().push(format!("add {}", id(o))))
        .on_update(move |o, n| u.lock().push(format!("update {}->{}", id(o), id(n))))
        .on_delete(move |o| d.lock().push(format!("delete {}", id(o))))
}

/// A listener on `informer` writing into a fresh log, with the handle the
/// cases wait on (or remove) before reading the log.
fn add_logging_listener(informer: &Informer<ConfigMap>) -> (Log, ListenerHandle) {
    let log = Log::default();
    let handle = informer
        .add_event_handler(logging_handler(log.clone()))
        .unwrap();
    (log, handle)
}

#[tokio::test]
async fn every_listener_gets_every_change_in_order() {
    let informer = Informer::<ConfigMap>::without_source();
    let logs: Vec<Log> = (0..3).map(|_| Log::default()).collect();
    let handles: Vec<_> = logs
        .iter()
        .map(|log| {
            informer
                .add_event_handler(logging_handler(log.clone()))
                .unwrap()
        })
        .collect();
    assert!(!informer.has_synced());
    for event in initial_list(vec![cm("a", 1), cm("b", 2)]) {
        informer.handle_event(event);
    }
    assert!(informer.has_synced());
    informer.handle_event(watcher::Event::Apply(cm("a", 3)));
    informer.handle_event(watcher::Event::Delete(cm("b", 4)));
    informer.handle_event(watcher::Event::Apply(cm("c", 5)));
    for handle in &handles {
        handle.wait_idle().await;
    }
    let expected = [
        "add a@1",
        "add b@2",
        "update a@1->a@3",
        "delete b@4",
        "add c@5",
    ];
    for log in &logs {
        assert_eq!(*log.lock(), expected);
    }
    assert_eq!(informer.listener_count(), 3);
}

#[tokio::test]
async fn a_late_listener_first_receives_the_cached_objects() {
    let informer = Informer::<ConfigMap>::without_source();
    for event in initial_list(vec![cm("a", 1)]) {
        informer.handle_event(event);
    }
    let (log, handle) = add_logging_listener(&informer);
    informer.handle_event(watcher::Event::Apply(cm("a", 2)));
    handle.wait_idle().await;
    assert_eq!(*log.lock(), ["add a@1", "update a@1->a@2"]);
}

#[tokio::test]
async fn a_removed_listener_hears_nothing_more() {
    let informer = Informer::<ConfigMap>::without_source();
    let (log, handle) = add_logging_listener(&informer);
    informer.handle_event(watcher::Event::Apply(cm("a", 1)));
    informer.remove_event_handler(&handle);
    informer.handle_event(watcher::Event::Apply(cm("b", 2)));
    handle.wait_idle().await;
    assert_eq!(*log.lock(), ["add a@1"]);
    assert_eq!(informer.listener_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_listener_stalls_neither_the_reflector_nor_other_listeners() {
    let informer = Informer::<ConfigMap>::without_source();
    let (release, gate) = mpsc::channel::<()>();
    let gate = parking_lot::Mutex::new(gate);
    let slow_log = Log::default();
    let slow_seen = slow_log.clone();
    let slow = informer
        .add_event_handler(HandlerFns::new().on_add(move |o: &Arc<ConfigMap>| {
            // Blocks until the test opens the gate (once per notification).
            let _ = gate.lock().recv();
            slow_seen
                .lock()
                .push(o.metadata.name.clone().unwrap_or_default());
        }))
        .unwrap();
    let fast_log = Log::default();
    let fast = informer
        .add_event_handler(logging_handler(fast_log.clone()))
        .unwrap();

    for i in 0..100 {
        informer.handle_event(watcher::Event::Apply(cm(&format!("o{i:03}"), i)));
    }
    // The reflector applied everything although the slow listener handled nothing.
    assert_eq!(informer.cache().len(), 100);
    fast.wait_idle().await;
    assert_eq!(fast_log.lock().len(), 100);
    assert!(slow_log.lock().is_empty());
    assert!(slow.pending() >= 99, "slow listener buffers its backlog");

    for _ in 0..100 {
        release.send(()).unwrap();
    }
    slow.wait_idle().await;
    let expected: Vec<String> = (0..100).map(|i| format!("o{i:03}")).collect();
    assert_eq!(*slow_log.lock(), expected);
}

#[tokio::test]
async fn a_panicking_handler_loses_one_notification_not_the_listener() {
    let informer = Informer::<ConfigMap>::without_source();
    let log = Log::default();
    let seen = log.clone();
    let handle = informer
        .add_event_handler(HandlerFns::new().on_add(move |o: &Arc<ConfigMap>| {
            let name = o.metadata.name.clone().unwrap_or_default();
            if name == "boom" {
                panic!("handler bug");
            }
            seen.lock().push(name);
        }))
        .unwrap();
    informer.handle_event(watcher::Event::Apply(cm("a", 1)));
    informer.handle_event(watcher::Event::Apply(cm("boom", 2)));
    informer.handle_event(watcher::Event::Apply(cm("b", 3)));
    handle.wait_idle().await;
    assert_eq!(*log.lock(), ["a", "b"]);
}

#[tokio::test]
async fn relist_delivers_missed_deletes_with_last_known_state() {
    let informer = Informer::<ConfigMap>::without_source();
    let (log, handle) = add_logging_listener(&informer);
    let mut events = initial_list(vec![cm("a", 1), cm("b", 2)]);
    events.push(watcher::Event::Apply(cm("b", 3)));
    // 410 Gone: the watcher relists; b was deleted while the watch was down.
    events.extend(initial_list(vec![cm("a", 1)]));
    informer
        .run_stream(stream::iter(events.into_iter().map(Ok)))
        .await;
    handle.wait_idle().await;
    assert_eq!(
        *log.lock(),
        [
            "add a@1",
            "add b@2",
            "update b@2->b@3",
            "update a@1->a@1",
            "delete b@3"
        ]
    );
    assert!(informer.cache().get("ns", "b").is_none());
    let stats = informer.stats();
    assert_eq!(
        (stats.lists, stats.notifications, stats.watch_errors),
        (2, 5, 0)
    );
}

#[tokio::test]
async fn watch_errors_are_survived_and_sync_is_awaitable() {
    let informer = Informer::<ConfigMap>::without_source();
    let events: Vec<Result<watcher::Event<ConfigMap>, watcher::Error>> = vec![
        Err(watcher::Error::NoResourceVersion),
        Ok(watcher::Event::Init),
        Ok(watcher::Event::InitApply(cm("a", 1))),
        Ok(watcher::Event::InitDone),
    ];
    let waiter = tokio::spawn({
        let informer = informer.clone();
        async move {
            informer.wait_for_sync().await;
            informer.cache().len()
        }
    });
    informer.run_stream(stream::iter(events)).await;
    assert_eq!(waiter.await.unwrap(), 1);
    assert!(informer.has_synced());
    assert!(matches!(informer.start(), Err(InformerError::NoSource)));
    assert_eq!(informer.stats().watch_errors, 1);
}

#[tokio::test(start_paused = true)]
async fn resync_redelivers_cached_objects_as_unchanged_updates() {
    let informer = Informer::<ConfigMap>::without_source();
    let resyncs = Arc::new(AtomicUsize::new(0));
    let counted = resyncs.clone();
    let handle = informer
        .add_event_handler_with_resync(
            HandlerFns::new().on_update(move |old: &Arc<ConfigMap>, new| {
                if Arc::ptr_eq(old, new) {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
            }),
            Duration::from_secs(10),
        )
        .unwrap();
    let plain_updates = Arc::new(AtomicUsize::new(0));
    let plain_counted = plain_updates.clone();
    let plain = informer
        .add_event_handler(HandlerFns::new().on_update(move |_: &Arc<ConfigMap>, _| {
            plain_counted.fetch_add(1, Ordering::SeqCst);
        }))
        .unwrap();
    let events = initial_list(vec![cm("a", 1), cm("b", 2)])
        .into_iter()
        .map(Ok);
    let runner = tokio::spawn({
        let informer = informer.clone();
        async move {
            informer
                .run_stream(stream::iter(events).chain(stream::pending()))
                .await
        }
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    handle.wait_idle().await;
    assert_eq!(resyncs.load(Ordering::SeqCst), 0);
    tokio::time::sleep(Duration::from_secs(6)).await;
    handle.wait_idle().await;
    assert_eq!(resyncs.load(Ordering::SeqCst), 2);
    tokio::time::sleep(Duration::from_secs(10)).await;
    handle.wait_idle().await;
    assert_eq!(resyncs.load(Ordering::SeqCst), 4);
    // Listeners without a resync period are not resynced.
    plain.wait_idle().await;
    assert_eq!(plain_updates.load(Ordering::SeqCst), 0);
    runner.abort();
}

/// A listener that replays notifications onto its own model of the cache and
/// records every notification inconsistent with what it saw before.
struct ModelListener {
    model: parking_lot::Mutex<HashMap<String, u64>>,
    violations: Log,
}

impl EventHandler<ConfigMap> for ModelListener {
    fn on_add(&self, obj: &Arc<ConfigMap>) {
        std::thread::sleep(Duration::from_micros(50));
        let key = object_key(obj.as_ref());
        if let Some(prev) = self.model.lock().insert(key.clone(), rv(obj)) {
            self.violations
                .lock()
                .push(format!("add of known {key}@{prev}"));
        }
    }

    fn on_update(&self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        let key = object_key(new.as_ref());
        match self.model.lock().insert(key.clone(), rv(new)) {
            Some(prev) if prev == rv(old) => {}
            other => self.violations.lock().push(format!(
                "update of {key} from {} but saw {other:?}",
                rv(old)
            )),
        }
    }

    fn on_delete(&self, obj: &Arc<ConfigMap>) {
        let key = object_key(obj.as_ref());
        if self.model.lock().remove(&key).is_none() {
            self.violations
                .lock()
                .push(format!("delete of unknown {key}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn relists_while_handlers_run_keep_every_listener_consistent() {
    let informer = Informer::<ConfigMap>::without_source();
    let violations = Log::default();
    let listener = || ModelListener {
        model: Default::default(),
        violations: violations.clone(),
    };
    let first = Arc::new(listener());
    let second = Arc::new(listener());
    let late = Arc::new(listener());
    struct Shared(Arc<ModelListener>);
    impl EventHandler<ConfigMap> for Shared {
        fn on_add(&self, o: &Arc<ConfigMap>) {
            self.0.on_add(o)
        }
        fn on_update(&self, o: &Arc<ConfigMap>, n: &Arc<ConfigMap>) {
            self.0.on_update(o, n)
        }
        fn on_delete(&self, o: &Arc<ConfigMap>) {
            self.0.on_delete(o)
        }
    }
    let mut handles = vec![
        informer.add_event_handler(Shared(first.clone())).unwrap(),
        informer.add_event_handler(Shared(second.clone())).unwrap(),
    ];

    // The "server": 20 names, a deterministic pseudo-random mix of writes,
    // deletes and relists (each relist lists the server's truth).
    let feeder = tokio::spawn({
        let informer = informer.clone();
        async move {
            let mut server: HashMap<String, u64> = HashMap::new();
            let mut seed: u64 = 0x5eed;
            let mut next_rv = 1;
            for step in 0..3000 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let pick = (seed >> 33) % 100;
                let name = format!("o{}", (seed >> 40) % 20);
                let event = if step == 0 || pick < 3 {
                    let mut objects: Vec<_> = server.iter().map(|(n, r)| cm(n, *r)).collect();
                    objects.sort_by_key(|c| c.metadata.name.clone());
                    for event in initial_list(objects) {
                        informer.handle_event(event);
                        tokio::task::yield_now().await;
                    }
                    continue;
                } else if pick < 25 {
                    match server.remove(&name) {
                        Some(_) if pick < 15 => watcher::Event::Delete(cm(&name, next_rv)),
                        // Deleted while "the watch was down": only a relist tells.
                        Some(_) => continue,
                        None => continue,
                    }
                } else {
                    server.insert(name.clone(), next_rv);
                    watcher::Event::Apply(cm(&name, next_rv))
                };
                next_rv += 1;
                informer.handle_event(event);
                if step % 7 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            let mut objects: Vec<_> = server.iter().map(|(n, r)| cm(n, *r)).collect();
            objects.sort_by_key(|c| c.metadata.name.clone());
            for event in initial_list(objects) {
                informer.handle_event(event);
            }
            server
        }
    });
    tokio::time::sleep(Duration::from_millis(5)).await;
    handles.push(informer.add_event_handler(Shared(late.clone())).unwrap());
    let server = feeder.await.unwrap();
    for handle in &handles {
        handle.wait_idle().await;
    }
    assert!(violations.lock().is_empty(), "{:?}", violations.lock());
    let cached: HashMap<String, u64> = informer
        .cache()
        .list()
        .iter()
        .map(|c| (c.metadata.name.clone().unwrap_or_default(), rv(c)))
        .collect();
    assert_eq!(cached, server);
    let expected: HashMap<String, u64> = server
        .iter()
        .map(|(n, r)| (format!("ns/{n}"), *r))
        .collect();
    for model in [&first, &second, &late] {
        assert_eq!(*model.model.lock(), expected);
    }
}

#[tokio::test]
async fn ensure_index_is_idempotent_for_users_of_a_shared_informer() {
    let informer = Informer::<ConfigMap>::without_source();
    let by_rv: crate::indexes::IndexFn<ConfigMap> =
        Arc::new(|c: &ConfigMap| vec![rv(c).to_string()]);
    informer.ensure_index("rv", by_rv.clone()).unwrap();
    informer.ensure_index("rv", by_rv).unwrap();
    informer.handle_event(watcher::Event::Apply(cm("a", 7)));
    let found = informer.cache().by_index("rv", "7").unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].metadata.name.as_deref(), Some("a"));
}
