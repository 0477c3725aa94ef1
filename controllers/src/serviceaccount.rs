//! Two per-namespace guarantees: the `default` ServiceAccount (the
//! serviceaccount controller) and the `kube-root-ca.crt` ConfigMap carrying
//! the cluster CA (the root-ca-cert-publisher). Both are recreated when
//! deleted or (for the ConfigMap) changed, except in namespaces being deleted.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use skiff_informer::{Action, Controller, HandlerFns, WatchConfig, WorkQueue};

use crate::manager::{Context, Stop, stopped};

/// The ServiceAccount every namespace gets.
pub(crate) const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// The ConfigMap carrying the cluster CA in every namespace.
pub(crate) const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
/// Its key holding the PEM bundle.
pub(crate) const ROOT_CA_KEY: &str = "ca.crt";
const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// Errors of the two per-namespace controllers.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServiceAccountError {
    /// Writing the object into `namespace` failed.
    #[error("{what} in namespace {namespace}: {source}")]
    Api {
        /// The write that failed, e.g. "creating the default service account".
        what: &'static str,
        /// The namespace written into.
        namespace: String,
        #[source]
        /// The API's error.
        source: kube::Error,
    },
}

/// Runs the per-namespace controller `controller_name` until `stop`, the
/// skeleton both controllers share: one work item per namespace, enqueued by
/// every namespace event and by every change to or deletion of an object
/// named `name` (so deleting it recreates it). `sync` gets a client, the
/// namespace, whether it is active (exists and is not being deleted) and its
/// object `name`.
async fn run_per_namespace<K, F, Fut>(
    ctx: &Context,
    controller_name: &'static str,
    objects: &skiff_informer::Informer<K>,
    name: &'static str,
    sync: F,
    stop: Stop,
) where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    F: Fn(kube::Client, String, bool, Option<Arc<K>>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), ServiceAccountError>> + Send + 'static,
{
    let controller = Controller::new(controller_name, WorkQueue::new()).workers(2);
    let namespaces = ctx.factory.informer::<Namespace>();
    let queue = controller.queue();
    let (q1, q2) = (queue.clone(), queue.clone());
    let namespace_handler = HandlerFns::new()
        .on_add(move |ns: &Arc<Namespace>| q1.add(ns.name_any()))
        .on_update(move |_, ns: &Arc<Namespace>| q2.add(ns.name_any()));
    let (q3, q4) = (queue.clone(), queue.clone());
    let object_handler = HandlerFns::new()
        .on_update(move |_, obj: &Arc<K>| {
            if obj.meta().name.as_deref() == Some(name) {
                q3.add(obj.namespace().unwrap_or_default());
            }
        })
        .on_delete(move |obj: &Arc<K>| {
            if obj.meta().name.as_deref() == Some(name) {
                q4.add(obj.namespace().unwrap_or_default());
            }
        });
    let controller = controller
        .watch(&namespaces, namespace_handler)
        .watch(objects, object_handler);
    let ns_cache = namespaces.cache().clone();
    let cache = objects.cache().clone();
    let client = ctx.client.clone();
    controller
        .run_until(
            move |ns: String| {
                let active = is_active(ns_cache.get("", &ns));
                let current = cache.get(&ns, name);
                let synced = sync(client.clone(), ns, active, current);
                async move { synced.await.map(|()| Action::Done) }
            },
            stopped(stop),
        )
        .await;
}

fn is_active(ns: Option<Arc<Namespace>>) -> bool {
    ns.is_some_and(|ns| ns.metadata.deletion_timestamp.is_none())
}

/// Runs the serviceaccount controller until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    let accounts = ctx.factory.informer::<ServiceAccount>();
    run_per_namespace(
        &ctx,
        "serviceaccount",
        &accounts,
        DEFAULT_SERVICE_ACCOUNT,
        ensure_default_account,
        stop,
    )
    .await;
}

/// Creates the `default` ServiceAccount in `namespace` if it is active and
/// has none.
async fn ensure_default_account(
    client: kube::Client,
    namespace: String,
    active: bool,
    existing: Option<Arc<ServiceAccount>>,
) -> Result<(), ServiceAccountError> {
    if !active || existing.is_some() {
        return Ok(());
    }
    let api: Api<ServiceAccount> = Api::namespaced(client, &namespace);
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(DEFAULT_SERVICE_ACCOUNT.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &account).await {
        Ok(_) => Ok(()),
        // Already there (the cache lagged), or the namespace is going away.
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 403 || s.code == 404 => Ok(()),
        Err(source) => Err(ServiceAccountError::Api {
            what: "creating the default service account",
            namespace,
            source,
        }),
    }
}

/// Runs the root-ca-cert-publisher until `stop`; idles if the context has no
/// CA to publish.
pub(crate) async fn run_root_ca_publisher(ctx: Context, stop: Stop) {
    let Some(pem) = ctx.root_ca_pem.clone() else {
        tracing::info!("root-ca-cert-publisher: no cluster CA configured, nothing to publish");
        stopped(stop).await;
        return;
    };
    let configmaps = ctx.factory.informer_with::<ConfigMap>(
        WatchConfig::default().fields(&format!("metadata.name={ROOT_CA_CONFIGMAP}")),
    );
    run_per_namespace(
        &ctx,
        "root-ca-cert-publisher",
        &configmaps,
        ROOT_CA_CONFIGMAP,
        move |client, ns, active, current| {
            let pem = Arc::clone(&pem);
            async move {
                if active {
                    publish(&client, &ns, current.as_deref(), &pem).await?;
                }
                Ok(())
            }
        },
        stop,
    )
    .await;
}

fn root_ca_data(pem: &str) -> BTreeMap<String, String> {
    [(ROOT_CA_KEY.to_owned(), pem.to_owned())].into()
}

/// Creates the CA ConfigMap in `namespace`, or puts its data back.
async fn publish(
    client: &kube::Client,
    namespace: &str,
    current: Option<&ConfigMap>,
    pem: &str,
) -> Result<(), ServiceAccountError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let wanted = root_ca_data(pem);
    let result = match current {
        Some(cm) if cm.data.as_ref() == Some(&wanted) => return Ok(()),
        Some(cm) => {
            let mut fixed = cm.clone();
            fixed.data = Some(wanted);
            fixed.binary_data = None;
            api.replace(ROOT_CA_CONFIGMAP, &PostParams::default(), &fixed)
                .await
        }
        None => {
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(ROOT_CA_CONFIGMAP.to_owned()),
                    annotations: Some(
                        [(
                            "kubernetes.io/description".to_owned(),
                            ROOT_CA_DESCRIPTION.to_owned(),
                        )]
                        .into(),
                    ),
                    ..Default::default()
                },
                data: Some(wanted),
                ..Default::default()
            };
            api.create(&PostParams::default(), &cm).await
        }
    };
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 403 || s.code == 404 => Ok(()),
        Err(source) => Err(ServiceAccountError::Api {
            what: "publishing the root CA configmap",
            namespace: namespace.to_owned(),
            source,
        }),
    }
}
