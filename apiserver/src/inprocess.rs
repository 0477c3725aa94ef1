//! In-process clients: a `kube::Client` whose transport is the API router
//! itself — no socket, no TLS — carrying a fixed identity that no network
//! request can claim.

use axum::Router;
use axum::body::Body;
use http::Request;
use tower::ServiceBuilder;

use crate::authn::UserInfo;

/// A client that calls `router` directly as `user`, with `default` as its
/// default namespace.
pub fn client(router: Router, user: UserInfo) -> kube::Client {
    let service = ServiceBuilder::new()
        .map_request(move |request: Request<kube::client::Body>| {
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(user.clone());
            request
        })
        .service(router);
    kube::Client::new(service, "default")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use futures::{StreamExt, TryStreamExt};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;
    use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams, WatchEvent, WatchParams};
    use skiff_store::{SledConfig, SledStore, Store};

    use super::*;
    use crate::{ApiServer, ApiServerConfig};

    fn configmap(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                labels: Some([("app".to_string(), "inproc".to_string())].into()),
                ..Default::default()
            },
            data: Some([("k".to_string(), "v".to_string())].into()),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn kube_client_on_the_router_does_crud_and_watch() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store: Arc<dyn Store> =
            Arc::new(SledStore::open(SledConfig::new(dir.path())).expect("store"));
        let api = ApiServer::new(store, ApiServerConfig::default())
            .await
            .expect("api server");
        let client = client(
            api.router(),
            UserInfo::new(
                "in-process-admin",
                [crate::authz::MASTERS_GROUP.to_string()],
            ),
        );
        let cms: Api<ConfigMap> = Api::default_namespaced(client);

        let start = cms
            .list(&ListParams::default())
            .await
            .expect("list")
            .metadata
            .resource_version
            .expect("list resourceVersion");
        let mut watch = cms
            .watch(&WatchParams::default().labels("app=inproc"), &start)
            .await
            .expect("watch")
            .boxed();

        let created = cms
            .create(&PostParams::default(), &configmap("a"))
            .await
            .expect("create");
        assert!(created.metadata.uid.is_some());
        let fetched = cms.get("a").await.expect("get");
        assert_eq!(fetched.data, created.data);
        cms.delete("a", &DeleteParams::default())
            .await
            .expect("delete");
        let missing = cms.get("a").await.expect_err("gone");
        assert!(matches!(missing, kube::Error::Api(s) if s.code == 404));

        let mut kinds = Vec::new();
        while kinds.len() < 2 {
            let event = tokio::time::timeout(Duration::from_secs(10), watch.try_next())
                .await
                .expect("event in time")
                .expect("watch ok")
                .expect("stream open");
            match event {
                WatchEvent::Added(cm) => kinds.push(("ADDED", cm.metadata.name)),
                WatchEvent::Deleted(cm) => kinds.push(("DELETED", cm.metadata.name)),
                WatchEvent::Bookmark(_) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(
            kinds,
            vec![
                ("ADDED", Some("a".to_string())),
                ("DELETED", Some("a".to_string()))
            ]
        );
    }
}
