//! The pod lifecycle event generator: relists the runtime every interval
//! and wakes the worker of every pod whose sandboxes or containers changed
//! state (a container exited, a sandbox died). The first relist reports
//! every pod, which is how orphans left by a previous run are found.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use skiff_common::wakeups::Ticks;
use tokio::sync::{mpsc, watch};

use super::labels;
use super::pod_workers::WorkerEvent;
use crate::runtime::Runtime;

/// Relists until `stop` is raised.
pub(crate) async fn run(
    runtime: Arc<dyn Runtime>,
    interval: Duration,
    tx: mpsc::UnboundedSender<WorkerEvent>,
    stop: watch::Receiver<bool>,
) {
    let mut last: HashMap<String, Vec<(String, i32)>> = HashMap::new();
    let mut counts = crate::agent::node::metrics::RelistCounts::default();
    let mut ticks = Ticks::new(interval, stop);
    while ticks.next().await {
        let started = std::time::Instant::now();
        let (sandboxes, containers) = match tokio::try_join!(
            runtime.list_pod_sandboxes(None),
            runtime.list_containers(None)
        ) {
            Ok(lists) => lists,
            Err(error) => {
                tracing::debug!(%error, "relist failed");
                continue;
            }
        };
        crate::agent::node::metrics::relisted(started.elapsed());
        counts.update(&sandboxes, &containers);
        let mut now: BTreeMap<String, Vec<(String, i32)>> = BTreeMap::new();
        for s in sandboxes {
            if let Some(uid) = s.labels.get(labels::POD_UID) {
                now.entry(uid.clone()).or_default().push((s.id, s.state));
            }
        }
        for c in containers {
            if let Some(uid) = c.labels.get(labels::POD_UID) {
                now.entry(uid.clone()).or_default().push((c.id, c.state));
            }
        }
        for (uid, states) in now.iter_mut() {
            states.sort();
            if last.get(uid) != Some(states) {
                let _ = tx.send(WorkerEvent::RuntimeChanged(uid.clone()));
            }
        }
        last = now.into_iter().collect();
    }
}
