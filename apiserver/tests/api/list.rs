use std::time::Duration;

use serde_json::json;

use crate::harness::{Client, Expect, TestServer, item_names, pod};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn label_selectors_filter_lists() {
    let s = TestServer::new().await;
    s.configmap("default", "a", json!({"app": "web", "tier": "front"}))
        .await;
    s.configmap("default", "b", json!({"app": "db"})).await;
    s.configmap("default", "c", json!({})).await;
    let cases = [
        ("app%3Dweb", vec!["a"]),
        ("app%3D%3Dweb", vec!["a"]),
        ("app!%3Dweb", vec!["b", "c"]),
        ("app%20in%20(web,db)", vec!["a", "b"]),
        ("app%20notin%20(web)", vec!["b", "c"]),
        ("app", vec!["a", "b"]),
        ("!app", vec!["c"]),
        ("app,tier%3Dfront", vec!["a"]),
        // No spaces needed around a set, as upstream's lexer reads it.
        ("app%20in(web)", vec!["a"]),
        ("app%20notin(db,web)", vec!["c"]),
        ("tier%3D", vec![]),
        ("!tier,app%20in%20(,db)", vec!["b"]),
    ];
    assert_selects(&s, CMS, "labelSelector", cases).await;
}

/// Asserts, for each `(selector, names)`, that `collection` listed with
/// the `kind` selector (`labelSelector`, `fieldSelector`) `selector` gives
/// exactly `names` in order: the check every selector test here makes.
async fn assert_selects(
    s: &TestServer,
    collection: &str,
    kind: &str,
    cases: impl IntoIterator<Item = (&str, Vec<&str>)>,
) {
    for (selector, want) in cases {
        let path = format!("{collection}?{kind}={selector}");
        assert_eq!(s.list_names(&path).await, want, "{path}");
    }
}

#[tokio::test]
async fn lists_are_typed_and_scoped() {
    let s = TestServer::new().await;
    s.namespace("other").await;
    s.configmap("default", "a", json!({})).await;
    s.configmap("other", "b", json!({})).await;
    let (_, list) = s.get(CMS).await;
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(item_names(&list), vec!["a"]);
    assert!(
        list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .is_ok()
    );
    assert_eq!(s.list_names("/api/v1/configmaps").await, vec!["a", "b"]);
    let cases = [
        ("metadata.namespace%3Dother", vec!["b"]),
        ("metadata.name!%3Da", vec!["b"]),
    ];
    assert_selects(&s, "/api/v1/configmaps", "fieldSelector", cases).await;
}

#[tokio::test]
async fn pod_field_selectors() {
    let s = TestServer::new().await;
    for (name, node) in [("p1", Some("n1")), ("p2", None)] {
        let body = s
            .created("/api/v1/namespaces/default/pods", pod(name, node))
            .await;
        assert_eq!(body["status"]["phase"], "Pending");
    }
    let cases = [
        ("spec.nodeName%3Dn1", vec!["p1"]),
        ("spec.nodeName%3D", vec!["p2"]),
        ("status.phase%3DPending,spec.nodeName!%3Dn1", vec!["p2"]),
    ];
    assert_selects(&s, "/api/v1/pods", "fieldSelector", cases).await;
}

#[tokio::test]
async fn pagination_reads_one_consistent_snapshot() {
    let s = TestServer::new().await;
    for i in 0..5 {
        s.configmap("default", &format!("cm{i}"), json!({})).await;
    }
    let page1 = s.get_ok(&format!("{CMS}?limit=2")).await;
    assert_eq!(item_names(&page1), vec!["cm0", "cm1"]);
    assert_eq!(page1["metadata"]["remainingItemCount"], 3);
    let token = page1["metadata"]["continue"].as_str().unwrap().to_string();
    let rv = page1["metadata"]["resourceVersion"].clone();

    // Changes after the first page are not seen by its continuation.
    s.configmap("default", "cm9", json!({})).await;
    s.delete(&format!("{CMS}/cm3")).await;

    let (_, page2) = s.get(&format!("{CMS}?limit=2&continue={token}")).await;
    assert_eq!(item_names(&page2), vec!["cm2", "cm3"]);
    assert_eq!(page2["metadata"]["resourceVersion"], rv);
    let token = page2["metadata"]["continue"].as_str().unwrap().to_string();
    let (_, page3) = s.get(&format!("{CMS}?limit=2&continue={token}")).await;
    assert_eq!(item_names(&page3), vec!["cm4"]);
    assert!(page3["metadata"].get("continue").is_none());
    assert!(page3["metadata"].get("remainingItemCount").is_none());

    // Pagination with a selector counts only matches and omits the count.
    let (_, sel) = s
        .get(&format!("{CMS}?limit=1&labelSelector=missing!%3Dx"))
        .await;
    assert_eq!(item_names(&sel), vec!["cm0"]);
    assert!(sel["metadata"]["continue"].is_string());
    assert!(sel["metadata"].get("remainingItemCount").is_none());
}

#[tokio::test]
async fn a_page_counts_only_its_own_namespace() {
    let s = TestServer::new().await;
    // Namespaces whose keys sort right before and right after default's.
    for ns in ["default-a", "default0", "defaultz"] {
        s.namespace(ns).await;
        s.configmap(ns, "cm", json!({})).await;
    }
    for i in 0..4 {
        s.configmap("default", &format!("cm{i}"), json!({})).await;
    }
    let page = s.get_ok(&format!("{CMS}?limit=1")).await;
    assert_eq!(item_names(&page), vec!["cm0"]);
    assert_eq!(page["metadata"]["remainingItemCount"], 3);
    let whole = s.get_ok(CMS).await;
    assert_eq!(item_names(&whole), vec!["cm0", "cm1", "cm2", "cm3"]);
    let last = s.get_ok(&format!("{CMS}?limit=4")).await;
    assert!(last["metadata"].get("continue").is_none());
    assert!(last["metadata"].get("remainingItemCount").is_none());
}

#[tokio::test]
async fn a_continue_token_works_until_compaction_then_offers_the_newest_state() {
    use skiff_store::Store;
    // Snapshots of first pages leave memory after 50 ms.
    let s = TestServer::configured(|c| c.continue_ttl = Duration::from_millis(50)).await;
    for i in 0..3 {
        s.configmap("default", &format!("cm{i}"), json!({})).await;
    }
    let (_, page1) = s.get(&format!("{CMS}?limit=1")).await;
    let token = page1["metadata"]["continue"].as_str().unwrap().to_string();
    let rv = page1["metadata"]["resourceVersion"].clone();
    s.configmap("default", "later", json!({})).await;
    s.delete(&format!("{CMS}/cm1")).await;
    tokio::time::sleep(Duration::from_millis(100)).await;

    // The snapshot is gone from memory: the page is read from the store's
    // history, still as the collection was at the first page.
    let page2 = s.get_ok(&format!("{CMS}?limit=1&continue={token}")).await;
    assert_eq!(item_names(&page2), vec!["cm1"]);
    assert_eq!(page2["metadata"]["resourceVersion"], rv);
    let token2 = page2["metadata"]["continue"].as_str().unwrap().to_string();

    // Compaction past that revision ends the consistent pagination, with
    // upstream's 410 and a token to carry on at the newest state.
    s.store.compact(s.store.current_revision()).await.unwrap();
    let (status, gone) = s.get(&format!("{CMS}?limit=1&continue={token2}")).await;
    assert_eq!(status, 410, "{gone}");
    assert_eq!(gone["reason"], "Expired");
    assert!(
        gone["message"]
            .as_str()
            .unwrap()
            .starts_with("The provided continue parameter is too old"),
        "{gone}"
    );
    let resume = gone["metadata"]["continue"]
        .as_str()
        .expect("an inconsistent continue token");
    // It resumes after cm1 at the newest state: cm1's deletion and the later
    // object both show.
    let rest = s.get_ok(&format!("{CMS}?continue={resume}")).await;
    assert_eq!(item_names(&rest), vec!["cm2", "later"]);
    assert_ne!(rest["metadata"]["resourceVersion"], rv);
    // The first token is as compacted as the second.
    s.get(&format!("{CMS}?limit=1&continue={token}"))
        .await
        .expect_failure(410, "Expired");

    s.get(&format!("{CMS}?limit=1&continue=garbage"))
        .await
        .expect_failure(400, "BadRequest");
}

#[tokio::test]
async fn a_list_without_a_version_is_as_new_as_the_store() {
    let s = TestServer::new().await;
    s.configmap("default", "a", json!({})).await;
    // Written straight to the store, as another server of the cluster
    // would: the list, asked for right after, must already show it (the
    // test's runtime runs one task, so the cache's feed has not seen the
    // write before the list reads).
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "b", "namespace": "default", "uid": "b-uid",
            "creationTimestamp": "2026-01-01T00:00:00Z"}});
    let written = stored(&s, "/registry/core/configmaps/default/b", &object).await;
    assert_listed_at(&s, CMS, &["a", "b"], written).await;
    // A later write elsewhere: the list is at the store's revision, not
    // at its own last change.
    let elsewhere = stored(&s, "/registry/core/secrets/default/x", &json!({})).await;
    assert_listed_at(&s, CMS, &["a", "b"], elsewhere).await;
    // "0" asks for any state the server has: no wait, no store read.
    let any = s.get_ok(&format!("{CMS}?resourceVersion=0")).await;
    assert_eq!(item_names(&any), vec!["a", "b"]);
}

/// Writes `object` at `key` straight to the store; its revision.
async fn stored(s: &TestServer, key: &str, object: &serde_json::Value) -> u64 {
    use skiff_store::Store;
    let bytes = serde_json::to_vec(object).unwrap();
    s.store
        .create(key, bytes.into())
        .await
        .unwrap()
        .mod_revision
}

/// Asserts the list at `path` holds `names` at resourceVersion `revision`.
async fn assert_listed_at(s: &TestServer, path: &str, names: &[&str], revision: u64) {
    let list = s.get_ok(path).await;
    assert_eq!(item_names(&list), names);
    assert_eq!(list["metadata"]["resourceVersion"], revision.to_string());
}

#[tokio::test]
async fn list_at_a_version_from_another_resource() {
    let s = TestServer::new().await;
    s.configmap("default", "a", json!({})).await;
    // A newer revision produced by a write to another resource.
    let (_, secret) = s
        .post(
            "/api/v1/namespaces/default/secrets",
            json!({"metadata": {"name": "s"}}),
        )
        .await;
    let rv = secret["metadata"]["resourceVersion"].as_str().unwrap();
    let list = s.get_ok(&format!("{CMS}?resourceVersion={rv}")).await;
    assert_eq!(item_names(&list), vec!["a"]);
    let listed_at: u64 = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(listed_at >= rv.parse::<u64>().unwrap());
    let (code, body) = s.get(&format!("{CMS}?resourceVersion=999999")).await;
    // Upstream: the list waits a moment for the store to get there, then
    // answers 504 with the ResourceVersionTooLarge cause.
    assert_eq!(code.as_u16(), 504, "{body}");
    assert_eq!(body["reason"], "Timeout", "{body}");
    assert_eq!(
        body["details"]["causes"][0]["reason"], "ResourceVersionTooLarge",
        "{body}"
    );
}
