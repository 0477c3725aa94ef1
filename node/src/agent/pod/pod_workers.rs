//! One worker task per pod, as the kubelet's podWorkers: informer events and
//! runtime changes (from the relist) wake the pod's worker, which always
//! works on the latest desired state; a pod's steps never overlap.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use skiff_informer::{Cache, EventHandler};
use tokio::sync::{Notify, mpsc, watch};

use super::context::AgentContext;
use super::sync::{self, PodState, Step};
use super::termination;

/// Retry delay after a failed step.
const ERROR_RETRY: Duration = Duration::from_secs(1);
/// Grace given to containers of pods the API no longer knows.
const ORPHAN_GRACE: Duration = Duration::from_secs(2);

/// What the workers are told.
#[derive(Debug)]
pub(crate) enum WorkerEvent {
    /// The pod was added or changed.
    Update(Arc<Pod>),
    /// The pod object is gone from the API.
    Deleted(Arc<Pod>),
    /// Something changed in the runtime for this pod UID.
    RuntimeChanged(String),
    /// A worker ended.
    Done(String),
}

/// The informer handler feeding the workers.
pub(crate) struct PodEvents {
    tx: mpsc::UnboundedSender<WorkerEvent>,
}

impl PodEvents {
    /// A handler sending to `tx`.
    pub(crate) fn new(tx: mpsc::UnboundedSender<WorkerEvent>) -> Self {
        Self { tx }
    }
}

impl EventHandler<Pod> for PodEvents {
    fn on_add(&self, obj: &Arc<Pod>) {
        let _ = self.tx.send(WorkerEvent::Update(obj.clone()));
    }
    fn on_update(&self, _old: &Arc<Pod>, new: &Arc<Pod>) {
        let _ = self.tx.send(WorkerEvent::Update(new.clone()));
    }
    fn on_delete(&self, obj: &Arc<Pod>) {
        let _ = self.tx.send(WorkerEvent::Deleted(obj.clone()));
    }
}

#[derive(Clone)]
enum Desired {
    Run(Arc<Pod>),
    Gone(Arc<Pod>),
}

struct Worker {
    desired: watch::Sender<Desired>,
    wake: Arc<Notify>,
}

/// Runs the dispatcher until `stop` resolves; workers stop with it and leave
/// their containers running.
pub(crate) async fn run(
    ctx: Arc<AgentContext>,
    pods: Arc<Cache<Pod>>,
    tx: mpsc::UnboundedSender<WorkerEvent>,
    mut rx: mpsc::UnboundedReceiver<WorkerEvent>,
    stop: watch::Receiver<bool>,
) {
    let mut workers: HashMap<String, Worker> = HashMap::new();
    let mut orphans: HashSet<String> = HashSet::new();
    let mut stop_wait = stop.clone();
    loop {
        let event = tokio::select! {
            e = rx.recv() => match e { Some(e) => e, None => break },
            _ = stop_wait.wait_for(|s| *s) => break,
        };
        match event {
            WorkerEvent::Update(pod) => {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                match workers.get(&uid) {
                    Some(w) => {
                        w.desired.send_replace(Desired::Run(pod));
                    }
                    None => {
                        let w = spawn_worker(&ctx, &tx, &uid, Desired::Run(pod), stop.clone());
                        workers.insert(uid, w);
                    }
                }
            }
            WorkerEvent::Deleted(pod) => {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                if let Some(w) = workers.get(&uid) {
                    w.desired.send_replace(Desired::Gone(pod));
                }
            }
            WorkerEvent::RuntimeChanged(uid) => {
                if let Some(w) = workers.get(&uid) {
                    w.wake.notify_one();
                } else if !pods
                    .list()
                    .iter()
                    .any(|p| p.metadata.uid.as_deref() == Some(&uid))
                    && orphans.insert(uid.clone())
                {
                    // Left over from a pod deleted while the agent was down.
                    let ctx = ctx.clone();
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        tracing::info!(%uid, "removing containers of a pod that no longer exists");
                        if let Err(error) =
                            termination::kill_pod(&ctx, None, &uid, ORPHAN_GRACE).await
                        {
                            tracing::warn!(%uid, %error, "removing orphaned pod failed");
                        }
                        let _ = tx.send(WorkerEvent::Done(format!("orphan:{uid}")));
                    });
                }
            }
            WorkerEvent::Done(uid) => {
                if let Some(orphan) = uid.strip_prefix("orphan:") {
                    orphans.remove(orphan);
                } else {
                    workers.remove(&uid);
                }
            }
        }
    }
}

fn spawn_worker(
    ctx: &Arc<AgentContext>,
    tx: &mpsc::UnboundedSender<WorkerEvent>,
    uid: &str,
    initial: Desired,
    stop: watch::Receiver<bool>,
) -> Worker {
    let (desired, desired_rx) = watch::channel(initial);
    let wake = Arc::new(Notify::new());
    let ctx = ctx.clone();
    let tx = tx.clone();
    let uid = uid.to_string();
    let wake_rx = wake.clone();
    tokio::spawn(async move {
        work(&ctx, desired_rx, wake_rx, stop).await;
        let _ = tx.send(WorkerEvent::Done(uid));
    });
    Worker { desired, wake }
}

async fn work(
    ctx: &AgentContext,
    mut desired: watch::Receiver<Desired>,
    wake: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    let mut state = PodState::new(ctx);
    loop {
        if *stop.borrow() {
            return;
        }
        let current = desired.borrow_and_update().clone();
        let next = match current {
            Desired::Gone(pod) => {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                match termination::kill_pod(ctx, Some(&pod), &uid, termination::grace_period(&pod))
                    .await
                {
                    Ok(()) => return,
                    Err(error) => {
                        tracing::warn!(%uid, %error, "stopping a deleted pod failed");
                        Some(Instant::now() + ERROR_RETRY)
                    }
                }
            }
            Desired::Run(pod) => match sync::sync(ctx, &mut state, &pod).await {
                Ok(Step::Finished) => return,
                Ok(Step::Continue(at)) => at,
                Err(error) => {
                    tracing::warn!(pod = ?pod.metadata.name, %error, "pod sync failed");
                    Some(Instant::now() + ERROR_RETRY)
                }
            },
        };
        let sleep = async {
            match next {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = desired.changed() => {}
            _ = wake.notified() => {}
            _ = sleep => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}
