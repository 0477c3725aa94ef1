//! kube-rs (typed `Api`, `watcher`) against the router in-process: what
//! every skiff component will do.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::watcher;
use serde_json::json;
use skiff_apiserver::authn::UserInfo;

use crate::harness::{TestServer, pod};

fn client(s: &TestServer) -> kube::Client {
    skiff_apiserver::inprocess::client(s.router.clone(), UserInfo::new("system:test", Vec::new()))
}

fn configmap(name: &str, app: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": app}}, "data": {"k": "v"}}),
    )
    .unwrap()
}

#[tokio::test]
async fn typed_crud_and_conflicts() {
    let s = TestServer::new().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&s), "default");
    let created = api
        .create(&PostParams::default(), &configmap("a", "x"))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    let mut got = api.get("a").await.unwrap();
    got.data
        .get_or_insert_default()
        .insert("k".into(), "w".into());
    let replaced = api
        .replace("a", &PostParams::default(), &got)
        .await
        .unwrap();
    assert_eq!(replaced.data.unwrap()["k"], "w");
    let err = api
        .replace("a", &PostParams::default(), &got)
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(status) => {
            assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"))
        }
        other => panic!("{other:?}"),
    }
    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"p": "1"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["p"], "1");
    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("a").await.unwrap().is_none());
}

#[tokio::test]
async fn typed_pagination_and_selectors() {
    let s = TestServer::new().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&s), "default");
    for i in 0..5 {
        api.create(
            &PostParams::default(),
            &configmap(&format!("cm{i}"), if i % 2 == 0 { "even" } else { "odd" }),
        )
        .await
        .unwrap();
    }
    let mut names = Vec::new();
    let mut params = ListParams::default().limit(2);
    loop {
        let page = api.list(&params).await.unwrap();
        names.extend(page.items.iter().map(|c| c.metadata.name.clone().unwrap()));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    assert_eq!(names, vec!["cm0", "cm1", "cm2", "cm3", "cm4"]);
    let even = api
        .list(&ListParams::default().labels("app=even"))
        .await
        .unwrap();
    assert_eq!(even.items.len(), 3);
    let all: Api<ConfigMap> = Api::all(client(&s));
    assert_eq!(
        all.list(&ListParams::default().fields("metadata.name=cm1"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

#[tokio::test]
async fn typed_watch_and_watcher_with_selectors() {
    let s = TestServer::new().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&s), "default");
    let listed = api.list(&ListParams::default()).await.unwrap();
    let rv = listed.metadata.resource_version.unwrap();
    let mut stream = api
        .watch(&WatchParams::default().labels("app=web"), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &configmap("skip", "db"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &configmap("web", "web"))
        .await
        .unwrap();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Added(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("web")),
        other => panic!("{other:?}"),
    }

    let config = watcher::Config::default().labels("app=web");
    let mut events = watcher(api.clone(), config).boxed();
    let mut seen = Vec::new();
    while let Some(event) = events.try_next().await.unwrap() {
        match event {
            watcher::Event::InitApply(cm) => seen.push(cm.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(seen, vec!["web"]);
    api.create(&PostParams::default(), &configmap("web2", "web"))
        .await
        .unwrap();
    loop {
        if let watcher::Event::Apply(cm) = events.try_next().await.unwrap().unwrap() {
            assert_eq!(cm.metadata.name.as_deref(), Some("web2"));
            break;
        }
    }
}

#[tokio::test]
async fn typed_subresources() {
    let s = TestServer::new().await;
    let c = client(&s);
    let deployments: Api<Deployment> = Api::namespaced(c.clone(), "default");
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
    .unwrap();
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let scale = deployments
        .patch_scale(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(4));
    let status = deployments
        .patch_status(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(status.status.unwrap().replicas, Some(4));

    let pods: Api<Pod> = Api::namespaced(c, "default");
    let p: Pod = serde_json::from_value(pod("p", None)).unwrap();
    pods.create(&PostParams::default(), &p).await.unwrap();
    let evicted = pods.evict("p", &Default::default()).await.unwrap();
    assert_eq!(evicted.code, 201);
    assert!(pods.get_opt("p").await.unwrap().is_none());
}
