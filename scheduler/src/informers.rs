//! Runs the scheduler on the process's shared informers: node and pod events
//! drive the cache and queue; volume and namespace objects and the selectors of
//! Services, ReplicationControllers, ReplicaSets and StatefulSets feed the plugins'
//! listers; the API side (binding, conditions, events, preemption) goes through
//! [`KubeApi`].

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Resource;
use serde::de::DeserializeOwned;
use skiff_informer::{HandlerFns, InformerError, SharedInformerFactory};

use crate::framework::config::ConfigError;
use crate::framework::events::{ActionSet, ClusterEvent, EventResource};
use crate::kube_api::KubeApi;
use crate::listers::MemoryListers;
use crate::selectors::Selector;
use crate::{RealClock, Scheduler, SchedulerConfig, Services, in_tree_registry};

/// Why the scheduler could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The configuration does not describe a valid scheduler.
    #[error("invalid scheduler configuration: {0}")]
    Config(#[from] ConfigError),
    /// The shared informers refused a handler.
    #[error("registering informer handlers: {0}")]
    Informer(#[from] InformerError),
}

/// Builds the scheduler, registers its informer handlers, waits for the
/// caches to sync and schedules until `stop` completes.
pub async fn run(
    client: kube::Client,
    factory: &SharedInformerFactory,
    config: &SchedulerConfig,
    stop: impl Future<Output = ()>,
) -> Result<(), RunError> {
    let scheduler = register(client, factory, config)?;
    factory.start()?;
    factory.wait_for_sync().await;
    tracing::info!("scheduler caches synced; scheduling");
    scheduler.run(stop).await;
    Ok(())
}

/// Builds the scheduler and registers its informer handlers without starting
/// the informers, so a caller (a benchmark, an embedding) can add its own
/// handlers first and observe the scheduler while it runs.
pub fn register(
    client: kube::Client,
    factory: &SharedInformerFactory,
    config: &SchedulerConfig,
) -> Result<Arc<Scheduler>, RunError> {
    let api = Arc::new(KubeApi::new(client, "default-scheduler"));
    let listers = Arc::new(MemoryListers::new());
    let services = Services {
        volumes: listers.clone(),
        pdbs: listers.clone(),
        namespaces: listers.clone(),
        workloads: listers.clone(),
        binder: api.clone(),
        claims: api.clone(),
    };
    let scheduler = Arc::new(Scheduler::new(
        config,
        &in_tree_registry(),
        services,
        api.clone(),
        api,
        Arc::new(RealClock),
    )?);

    follow::<Node>(
        factory,
        &scheduler,
        Scheduler::on_node_add,
        Scheduler::on_node_update,
        |s, node| s.on_node_delete(node.metadata.name.as_deref().unwrap_or("")),
    )?;
    follow::<Pod>(
        factory,
        &scheduler,
        Scheduler::on_pod_add,
        Scheduler::on_pod_update,
        Scheduler::on_pod_delete,
    )?;

    feed(
        factory,
        &scheduler,
        &listers,
        EventResource::Namespace,
        |l, ns: &Namespace| {
            l.put_namespace(
                ns.metadata.name.as_deref().unwrap_or(""),
                ns.metadata.labels.clone().unwrap_or_default(),
            )
        },
    )?;
    feed(
        factory,
        &scheduler,
        &listers,
        EventResource::PersistentVolumeClaim,
        |l, pvc: &PersistentVolumeClaim| l.put_pvc(pvc.clone()),
    )?;
    feed(
        factory,
        &scheduler,
        &listers,
        EventResource::PersistentVolume,
        |l, pv: &PersistentVolume| l.put_pv(pv.clone()),
    )?;
    feed(
        factory,
        &scheduler,
        &listers,
        EventResource::StorageClass,
        |l, sc: &StorageClass| l.put_storage_class(sc.clone()),
    )?;
    workload_selectors(factory, &listers)?;
    let pdb_listers = listers.clone();
    factory
        .informer::<PodDisruptionBudget>()
        .add_event_handler(
            HandlerFns::new()
                .on_add(move |pdb: &Arc<PodDisruptionBudget>| pdb_listers.put_pdb((**pdb).clone())),
        )?;
    Ok(scheduler)
}

/// A kind the shared informers can watch: the bounds of
/// `SharedInformerFactory::informer`, named once for `feed` and `controller`.
trait Watched:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

/// Hands every added, updated and deleted `K` (the nodes and pods the scheduler
/// caches itself) to the scheduler's own method for each.
fn follow<K: Watched>(
    factory: &SharedInformerFactory,
    scheduler: &Arc<Scheduler>,
    added: fn(&Scheduler, Arc<K>),
    updated: fn(&Scheduler, &K, Arc<K>),
    deleted: fn(&Scheduler, &K),
) -> Result<(), InformerError> {
    let (s1, s2, s3) = (scheduler.clone(), scheduler.clone(), scheduler.clone());
    factory
        .informer::<K>()
        .add_event_handler(
            HandlerFns::new()
                .on_add(move |obj: &Arc<K>| added(&s1, obj.clone()))
                .on_update(move |old: &Arc<K>, new: &Arc<K>| updated(&s2, old, new.clone()))
                .on_delete(move |obj: &Arc<K>| deleted(&s3, obj)),
        )
        .map(|_| ())
}

/// Keeps a lister up to date from an informer and tells the scheduler, so
/// pods parked as unschedulable are retried when something they wait on
/// appears.
fn feed<K>(
    factory: &SharedInformerFactory,
    scheduler: &Arc<Scheduler>,
    listers: &Arc<MemoryListers>,
    resource: EventResource,
    put: fn(&MemoryListers, &K),
) -> Result<(), InformerError>
where
    K: Watched,
{
    let (l1, l2) = (listers.clone(), listers.clone());
    let (s1, s2) = (scheduler.clone(), scheduler.clone());
    factory
        .informer::<K>()
        .add_event_handler(
            HandlerFns::new()
                .on_add(move |obj: &Arc<K>| {
                    put(&l1, obj);
                    s1.on_cluster_event(ClusterEvent::new(resource, ActionSet::ADD));
                })
                .on_update(move |_old: &Arc<K>, new: &Arc<K>| {
                    put(&l2, new);
                    s2.on_cluster_event(ClusterEvent::new(resource, ActionSet::ALL));
                }),
        )
        .map(|_| ())
}

/// Keeps the Service and controller selectors that default spreading constraints use.
fn workload_selectors(
    factory: &SharedInformerFactory,
    listers: &Arc<MemoryListers>,
) -> Result<(), InformerError> {
    fn ns_name(meta: &kube::api::ObjectMeta) -> (&str, &str) {
        (
            meta.namespace.as_deref().unwrap_or("default"),
            meta.name.as_deref().unwrap_or(""),
        )
    }
    let (l1, l2, l3) = (listers.clone(), listers.clone(), listers.clone());
    let put_service = |l: &MemoryListers, svc: &Service| {
        let (ns, name) = ns_name(&svc.metadata);
        l.put_service(ns, name, svc.spec.as_ref().and_then(|s| s.selector.clone()));
    };
    factory.informer::<Service>().add_event_handler(
        HandlerFns::new()
            .on_add(move |svc: &Arc<Service>| put_service(&l1, svc))
            .on_update(move |_: &Arc<Service>, svc: &Arc<Service>| put_service(&l2, svc))
            .on_delete(move |svc: &Arc<Service>| {
                let (ns, name) = ns_name(&svc.metadata);
                l3.remove_service(ns, name);
            }),
    )?;
    controller::<ReplicationController>(factory, listers, |rc| {
        rc.spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .map_or_else(Selector::nothing, Selector::from_map)
    })?;
    controller::<ReplicaSet>(factory, listers, |rs| {
        Selector::from_optional(rs.spec.as_ref().map(|s| &s.selector))
    })?;
    controller::<StatefulSet>(factory, listers, |ss| {
        Selector::from_optional(ss.spec.as_ref().map(|s| &s.selector))
    })?;
    Ok(())
}

/// Keeps one controller kind's pod selectors in the listers.
fn controller<K>(
    factory: &SharedInformerFactory,
    listers: &Arc<MemoryListers>,
    selector: fn(&K) -> Selector,
) -> Result<(), InformerError>
where
    K: Watched,
{
    let kind = K::kind(&());
    let put = move |l: &MemoryListers, obj: &K| {
        let meta = obj.meta();
        l.put_controller(
            &kind,
            meta.namespace.as_deref().unwrap_or("default"),
            meta.name.as_deref().unwrap_or(""),
            selector(obj),
        );
    };
    let kind = K::kind(&()).to_string();
    let (l1, l2, l3) = (listers.clone(), listers.clone(), listers.clone());
    let put2 = put.clone();
    factory.informer::<K>().add_event_handler(
        HandlerFns::new()
            .on_add(move |obj: &Arc<K>| put(&l1, obj))
            .on_update(move |_: &Arc<K>, obj: &Arc<K>| put2(&l2, obj))
            .on_delete(move |obj: &Arc<K>| {
                let meta = obj.meta();
                l3.remove_controller(
                    &kind,
                    meta.namespace.as_deref().unwrap_or("default"),
                    meta.name.as_deref().unwrap_or(""),
                );
            }),
    )?;
    Ok(())
}
