//! kube-rs over HTTPS with the written kubeconfig: CRUD, pagination, watches
//! with selectors.

use std::sync::mpsc::Receiver;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{
    DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};

use super::durability::client_for;
use super::support::Server;

fn configmap(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(skiff_common::labels::from_pairs(labels)),
            ..Default::default()
        },
        data: Some([("k".to_string(), "v".to_string())].into()),
        ..Default::default()
    }
}

/// kube-runtime's watcher over `api`, run on `runtime`, as notes the test
/// reads in order: each applied object's name, `<init>` where a (re)list
/// starts, and `<error …>` for each error (the watcher retries on its own).
fn watch_notes(
    runtime: &tokio::runtime::Runtime,
    api: Api<ConfigMap>,
    config: kube::runtime::watcher::Config,
) -> Receiver<String> {
    use kube::runtime::watcher::{self, Event};

    let (tx, rx) = std::sync::mpsc::channel();
    runtime.spawn(async move {
        let mut stream = watcher::watcher(api, config).boxed();
        while let Some(event) = stream.next().await {
            let note = match event {
                Ok(Event::Init) => "<init>".to_string(),
                Ok(Event::Apply(cm)) | Ok(Event::InitApply(cm)) => {
                    cm.metadata.name.unwrap_or_default()
                }
                Ok(_) => continue,
                Err(e) => format!("<error {e}>"),
            };
            if tx.send(note).is_err() {
                return;
            }
        }
    });
    rx
}

/// The notes from [`watch_notes`] before the next one that is `wanted`,
/// waiting up to a minute for it; `what` names it in the failure.
fn notes_until(rx: &Receiver<String>, wanted: &str, what: &str) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    while std::time::Instant::now() < deadline {
        if let Ok(note) = rx.recv_timeout(Duration::from_millis(200)) {
            if note == wanted {
                return seen;
            }
            seen.push(note);
        }
    }
    panic!("watcher never delivered {what}; saw {seen:?}");
}

#[test]
fn crud_pagination_and_selected_watch() {
    let server = Server::start();
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(async {
            let client = client_for(&server).await;
            let api: Api<ConfigMap> = Api::namespaced(client, "default");

            // CRUD
            let created = api
                .create(&PostParams::default(), &configmap("one", &[("tier", "a")]))
                .await
                .expect("create");
            let mut fetched = api.get("one").await.expect("get");
            assert_eq!(fetched.metadata.uid, created.metadata.uid);
            fetched.data = Some([("k".to_string(), "changed".to_string())].into());
            let replaced = api
                .replace("one", &PostParams::default(), &fetched)
                .await
                .expect("replace");
            assert_ne!(
                replaced.metadata.resource_version,
                created.metadata.resource_version
            );
            // A stale resourceVersion is a 409.
            let stale = api
                .replace("one", &PostParams::default(), &fetched)
                .await
                .expect_err("stale replace");
            assert!(
                matches!(&stale, kube::Error::Api(s) if s.code == 409),
                "{stale:?}"
            );
            api.patch(
                "one",
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"data": {"extra": "1"}})),
            )
            .await
            .expect("patch");

            // Pagination over a consistent snapshot.
            for i in 0..25 {
                api.create(
                    &PostParams::default(),
                    &configmap(&format!("page-{i:02}"), &[("tier", "p")]),
                )
                .await
                .expect("create page item");
            }
            let mut names = Vec::new();
            let mut params = ListParams::default().labels("tier=p").limit(10);
            let mut pages = 0;
            loop {
                let page = api.list(&params).await.expect("page");
                pages += 1;
                names.extend(page.items.into_iter().filter_map(|c| c.metadata.name));
                match page.metadata.continue_ {
                    Some(token) if !token.is_empty() => {
                        // Writes between pages do not show up in the snapshot.
                        if pages == 1 {
                            api.create(
                                &PostParams::default(),
                                &configmap("page-99", &[("tier", "p")]),
                            )
                            .await
                            .expect("create during paging");
                        }
                        params = params.continue_token(&token);
                    }
                    _ => break,
                }
            }
            assert_eq!(pages, 3);
            assert_eq!(names.len(), 25, "{names:?}");

            // A watch with a label selector.
            let start = api
                .list(&ListParams::default())
                .await
                .expect("list")
                .metadata
                .resource_version
                .expect("rv");
            let mut stream = api
                .watch(&WatchParams::default().labels("tier=w").timeout(30), &start)
                .await
                .expect("watch")
                .boxed();
            api.create(
                &PostParams::default(),
                &configmap("unwatched", &[("tier", "x")]),
            )
            .await
            .expect("create");
            api.create(
                &PostParams::default(),
                &configmap("watched", &[("tier", "w")]),
            )
            .await
            .expect("create");
            // Relabelling out of the selector arrives as DELETED.
            api.patch(
                "watched",
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"metadata": {"labels": {"tier": "gone"}}})),
            )
            .await
            .expect("relabel");
            let mut seen = Vec::new();
            while seen.len() < 2 {
                let event = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
                    .await
                    .expect("watch event in time")
                    .expect("watch ok")
                    .expect("stream open");
                match event {
                    WatchEvent::Added(cm) => {
                        seen.push(("ADDED", cm.metadata.name.unwrap_or_default()))
                    }
                    WatchEvent::Deleted(cm) => {
                        seen.push(("DELETED", cm.metadata.name.unwrap_or_default()))
                    }
                    WatchEvent::Modified(cm) => {
                        seen.push(("MODIFIED", cm.metadata.name.unwrap_or_default()))
                    }
                    WatchEvent::Bookmark(_) => {}
                    WatchEvent::Error(e) => panic!("watch error {e:?}"),
                }
            }
            assert_eq!(
                seen,
                vec![
                    ("ADDED", "watched".to_string()),
                    ("DELETED", "watched".to_string())
                ]
            );
            api.delete("one", &DeleteParams::default())
                .await
                .expect("delete");
            let missing = api.get("one").await.expect_err("deleted");
            assert!(
                matches!(&missing, kube::Error::Api(s) if s.code == 404),
                "{missing:?}"
            );
        });
}

/// kube-runtime's watcher resumes from its last resourceVersion after the
/// server restarts: the restarted server serves that history from the store,
/// so the watcher neither loses the write made just before the restart nor
/// sees anything twice.
#[test]
fn watcher_resumes_across_a_server_restart() {
    use kube::runtime::watcher;

    let mut server = Server::start();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let client = runtime.block_on(client_for(&server));
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    runtime.block_on(async {
        api.create(&PostParams::default(), &configmap("before", &[]))
            .await
            .expect("create");
    });
    let rx = watch_notes(&runtime, api.clone(), watcher::Config::default());
    let wait_for = |wanted: &str| notes_until(&rx, wanted, wanted);
    wait_for("before");
    runtime.block_on(async {
        api.create(&PostParams::default(), &configmap("live", &[]))
            .await
            .expect("create");
    });
    wait_for("live");

    // Writes after the watcher's last event, then a restart: the new server's
    // watch cache starts at the current revision.
    runtime.block_on(async {
        api.create(&PostParams::default(), &configmap("while-watching", &[]))
            .await
            .expect("create");
    });
    server.terminate();
    server.restart();
    runtime.block_on(async {
        api.create(&PostParams::default(), &configmap("after-restart", &[]))
            .await
            .expect("create after restart");
    });
    let seen = wait_for("after-restart");
    let delivered: Vec<&String> = seen.iter().filter(|n| !n.starts_with('<')).collect();
    assert_eq!(
        delivered,
        vec!["while-watching"],
        "every write arrives once across the restart: {seen:?}"
    );
}

/// kube-runtime's watcher gets 410 Gone when the history it wants to resume
/// from was compacted while it was disconnected, relists, and carries on.
#[test]
fn watcher_recovers_from_gone() {
    use kube::runtime::watcher;

    // Keep no history beyond the newest revision, compacting every second.
    let mut server = Server::start_with(&[
        "--disable-agent",
        "--store-compaction-interval",
        "1",
        "--store-history-min-age",
        "0",
        "--store-history-min-revisions",
        "1",
    ]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let client = runtime.block_on(client_for(&server));
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    // Selects nothing written below, so its resourceVersion stays at the
    // initial list's while other writes move the store on.
    let config = watcher::Config::default()
        .labels("app=later")
        .disable_bookmarks();
    let rx = watch_notes(&runtime, api.clone(), config);
    let next_init = |what: &str| notes_until(&rx, "<init>", what);
    next_init("initial list");
    server.terminate();
    server.restart();
    runtime.block_on(async {
        for i in 0..20 {
            api.create(
                &PostParams::default(),
                &configmap(&format!("noise-{i}"), &[]),
            )
            .await
            .expect("create");
        }
    });
    // Let the compactor pass the watcher's resourceVersion, then make it
    // reconnect.
    std::thread::sleep(Duration::from_secs(3));
    server.terminate();
    server.restart();
    let seen = next_init("relist after 410 Gone");
    assert!(
        seen.iter().all(|n| n.starts_with("<error")),
        "nothing but reconnection errors before the relist: {seen:?}"
    );
    runtime.block_on(async {
        api.create(
            &PostParams::default(),
            &configmap("later", &[("app", "later")]),
        )
        .await
        .expect("create");
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let note = rx
            .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
            .expect("the watcher keeps delivering after the relist");
        if note == "later" {
            break;
        }
    }
}
