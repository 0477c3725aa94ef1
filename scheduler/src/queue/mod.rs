//! The scheduling queue: activeQ (ready to schedule, ordered by priority then enqueue
//! time), backoffQ (failed recently, waiting out a per-pod exponential backoff) and the
//! unschedulable pool (parked until a cluster event could help, or 5 minutes pass).
//! Pods with scheduling gates wait in the pool until an update removes the gates.
//! Time comes from an injectable `Clock`; the owner calls the flush methods periodically.

pub(crate) mod nominator;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use crate::clock::Clock;
use crate::framework::config::profile_name;
use crate::framework::{ClusterEvent, EventObjects, Framework, Plugin, QueueingHint};
use crate::pod_info::{PodInfo, PodKey};
pub(crate) use nominator::Nominator;

/// The pseudo-plugin that holds gated pods, as upstream's SchedulingGates.
pub(crate) const SCHEDULING_GATES: &str = "SchedulingGates";

/// A pod in the queue with its scheduling history.
#[derive(Debug, Clone)]
pub struct QueuedPodInfo {
    /// The pod.
    pub pod: Arc<PodInfo>,
    /// When it entered the queue (orders equal priorities).
    pub timestamp: Instant,
    /// Scheduling attempts so far.
    pub attempts: u32,
    /// When it was first popped.
    pub initial_attempt: Option<Instant>,
    /// Plugins that rejected it last time.
    pub unschedulable_plugins: BTreeSet<&'static str>,
    /// When it last failed.
    pub last_failure: Option<Instant>,
    /// Scheduling cycle in which it was popped.
    pub cycle: u64,
}

impl QueuedPodInfo {
    fn new(pod: Arc<PodInfo>, now: Instant) -> Self {
        QueuedPodInfo {
            pod,
            timestamp: now,
            attempts: 0,
            initial_attempt: None,
            unschedulable_plugins: BTreeSet::new(),
            last_failure: None,
            cycle: 0,
        }
    }

    fn gated(&self) -> bool {
        self.pod
            .spec()
            .scheduling_gates
            .as_ref()
            .is_some_and(|g| !g.is_empty())
    }
}

type ActiveKey = (Reverse<i32>, Instant, u64);

/// Per plugin name: the events it registered, with the plugin to ask for hints.
type PluginEvents = HashMap<&'static str, Vec<(ClusterEvent, Arc<dyn Plugin>)>>;

/// Queue tuning.
#[derive(Debug, Clone)]
pub struct QueueConfig {
    /// First backoff (upstream: 1 s).
    pub initial_backoff: Duration,
    /// Backoff cap (upstream: 10 s).
    pub max_backoff: Duration,
    /// How long a pod may stay unschedulable before it is retried anyway (5 min).
    pub max_unschedulable: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            max_unschedulable: Duration::from_secs(300),
        }
    }
}

/// Where a pod currently is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// Ready to be popped.
    Active,
    /// Waiting out its backoff.
    Backoff,
    /// Parked until an event or the timeout.
    Unschedulable,
    /// Popped and being scheduled.
    InFlight,
}

struct InFlight {
    latest: Arc<PodInfo>,
    updated: bool,
    deleted: bool,
}

/// The three-queue scheduling queue.
pub struct SchedulingQueue {
    clock: Arc<dyn Clock>,
    cfg: QueueConfig,
    seq: u64,
    active: BTreeMap<ActiveKey, PodKey>,
    active_items: HashMap<PodKey, (ActiveKey, QueuedPodInfo)>,
    backoff: BTreeMap<(Instant, u64), PodKey>,
    backoff_items: HashMap<PodKey, ((Instant, u64), QueuedPodInfo)>,
    unschedulable: HashMap<PodKey, (QueuedPodInfo, Instant)>,
    in_flight: HashMap<PodKey, InFlight>,
    scheduling_cycle: u64,
    move_request_cycle: u64,
    plugin_events: PluginEvents,
    scheduler_names: HashSet<String>,
    nominator: Arc<Nominator>,
}

impl SchedulingQueue {
    /// A queue for pods whose `schedulerName` is one of `profiles`' names.
    pub fn new(
        clock: Arc<dyn Clock>,
        cfg: QueueConfig,
        profiles: &[Arc<Framework>],
        nominator: Arc<Nominator>,
    ) -> Self {
        let mut plugin_events = PluginEvents::new();
        let mut scheduler_names = HashSet::new();
        for p in profiles {
            scheduler_names.insert(p.scheduler_name().to_string());
            for (name, ev, plugin) in p.events() {
                plugin_events
                    .entry(name)
                    .or_default()
                    .push((*ev, plugin.clone()));
            }
        }
        SchedulingQueue {
            clock,
            cfg,
            seq: 0,
            active: BTreeMap::new(),
            active_items: HashMap::new(),
            backoff: BTreeMap::new(),
            backoff_items: HashMap::new(),
            unschedulable: HashMap::new(),
            in_flight: HashMap::new(),
            scheduling_cycle: 0,
            move_request_cycle: 0,
            plugin_events,
            scheduler_names,
            nominator,
        }
    }

    /// True if one of this scheduler's profiles handles the pod.
    pub fn responsible_for(&self, pod: &Pod) -> bool {
        self.scheduler_names.contains(profile_name(pod))
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn push_active(&mut self, mut q: QueuedPodInfo) {
        let key: ActiveKey = (Reverse(q.pod.priority), q.timestamp, self.next_seq());
        q.cycle = 0;
        self.active.insert(key, q.pod.key.clone());
        self.active_items.insert(q.pod.key.clone(), (key, q));
    }

    fn backoff_expiry(&self, q: &QueuedPodInfo) -> Instant {
        let mut d = self.cfg.initial_backoff;
        for _ in 1..q.attempts {
            d = d.saturating_mul(2);
            if d >= self.cfg.max_backoff {
                d = self.cfg.max_backoff;
                break;
            }
        }
        q.last_failure.unwrap_or(q.timestamp) + d.min(self.cfg.max_backoff)
    }

    fn push_backoff(&mut self, q: QueuedPodInfo) {
        let k = (self.backoff_expiry(&q), self.next_seq());
        self.backoff.insert(k, q.pod.key.clone());
        self.backoff_items.insert(q.pod.key.clone(), (k, q));
    }

    /// Active if its backoff is over, backoff otherwise.
    fn push_active_or_backoff(&mut self, q: QueuedPodInfo) {
        if q.attempts > 0 && self.backoff_expiry(&q) > self.clock.now() {
            self.push_backoff(q);
        } else {
            self.push_active(q);
        }
    }

    fn take(&mut self, key: &str) -> Option<QueuedPodInfo> {
        if let Some((k, q)) = self.active_items.remove(key) {
            self.active.remove(&k);
            return Some(q);
        }
        if let Some((k, q)) = self.backoff_items.remove(key) {
            self.backoff.remove(&k);
            return Some(q);
        }
        self.unschedulable.remove(key).map(|(q, _)| q)
    }

    /// Where the pod is, if queued.
    pub fn location(&self, key: &str) -> Option<Location> {
        if self.active_items.contains_key(key) {
            Some(Location::Active)
        } else if self.backoff_items.contains_key(key) {
            Some(Location::Backoff)
        } else if self.unschedulable.contains_key(key) {
            Some(Location::Unschedulable)
        } else if self.in_flight.contains_key(key) {
            Some(Location::InFlight)
        } else {
            None
        }
    }

    /// Adds a new unscheduled pod. Returns false if another scheduler owns it.
    pub fn add(&mut self, pod: Arc<Pod>) -> bool {
        if !self.responsible_for(&pod) {
            return false;
        }
        let info = Arc::new(PodInfo::new(pod));
        self.nominator.sync(&info);
        if self.location(&info.key).is_some() {
            self.update(info.pod.clone());
            return true;
        }
        let q = QueuedPodInfo::new(info, self.clock.now());
        if q.gated() {
            self.park_gated(q);
        } else {
            self.push_active(q);
        }
        true
    }

    fn park_gated(&mut self, mut q: QueuedPodInfo) {
        q.unschedulable_plugins = BTreeSet::from([SCHEDULING_GATES]);
        let now = self.clock.now();
        self.unschedulable.insert(q.pod.key.clone(), (q, now));
    }

    /// An unscheduled pod changed.
    pub fn update(&mut self, pod: Arc<Pod>) {
        if !self.responsible_for(&pod) {
            return;
        }
        let info = Arc::new(PodInfo::new(pod));
        self.nominator.sync(&info);
        let key = info.key.clone();
        if let Some(f) = self.in_flight.get_mut(&key) {
            f.latest = info;
            f.updated = true;
            return;
        }
        let location = self.location(&key);
        if matches!(location, Some(Location::InFlight) | None) {
            self.add(info.pod.clone());
            return;
        }
        // Status-only updates must not restart the 5-minute unschedulable clock.
        let parked_since = self.unschedulable.get(&key).map(|(_, since)| *since);
        let Some(mut q) = self.take(&key) else { return };
        match location {
            Some(Location::Active) => {
                q.pod = info;
                self.push_active(q);
            }
            Some(Location::Backoff) => {
                q.pod = info;
                self.push_backoff(q);
            }
            _ => {
                let was_gated = q.gated();
                let changed = q.pod.pod.spec != info.pod.spec
                    || q.pod.pod.metadata.labels != info.pod.metadata.labels;
                q.pod = info;
                if q.gated() {
                    self.park_gated(q);
                } else if was_gated {
                    q.unschedulable_plugins.clear();
                    self.push_active(q);
                } else if changed {
                    self.push_active_or_backoff(q);
                } else {
                    let since = parked_since.unwrap_or_else(|| self.clock.now());
                    self.unschedulable.insert(key, (q, since));
                }
            }
        }
    }

    /// A pod was deleted (or got bound by someone else).
    pub fn delete(&mut self, key: &str) {
        self.take(key);
        if let Some(f) = self.in_flight.get_mut(key) {
            f.deleted = true;
        }
        self.nominator.remove(key);
    }

    /// Pops the most important ready pod.
    pub fn pop(&mut self) -> Option<QueuedPodInfo> {
        let (_, key) = self.active.pop_first()?;
        let (_, mut q) = self.active_items.remove(&key)?;
        q.attempts += 1;
        q.initial_attempt.get_or_insert(self.clock.now());
        self.scheduling_cycle += 1;
        q.cycle = self.scheduling_cycle;
        self.in_flight.insert(
            key,
            InFlight {
                latest: q.pod.clone(),
                updated: false,
                deleted: false,
            },
        );
        Some(q)
    }

    /// The scheduling cycle succeeded (pod assumed); stop tracking it.
    pub fn done(&mut self, key: &str) {
        self.in_flight.remove(key);
    }

    /// Returns a pod that could not be scheduled. It goes to backoffQ when the failure
    /// was an error (`error`), when the pod changed or a move request happened while it was being
    /// scheduled; otherwise it is parked until an event could help.
    pub fn add_unschedulable(
        &mut self,
        mut q: QueuedPodInfo,
        plugins: BTreeSet<&'static str>,
        error: bool,
    ) {
        let flight = self.in_flight.remove(&q.pod.key);
        if self.location(&q.pod.key).is_some() {
            return;
        }
        let updated = flight.as_ref().is_some_and(|f| f.updated);
        if let Some(f) = flight {
            if f.deleted {
                // Deleted (or bound elsewhere) while being scheduled: nothing to retry.
                return;
            }
            if f.updated {
                q.pod = f.latest;
            }
        }
        let now = self.clock.now();
        q.last_failure = Some(now);
        q.unschedulable_plugins = plugins;
        if error || updated || self.move_request_cycle >= q.cycle {
            self.push_backoff(q);
        } else {
            self.unschedulable.insert(q.pod.key.clone(), (q, now));
        }
    }

    /// Moves pods whose backoff has expired to activeQ. Returns how many moved.
    pub fn flush_backoff_completed(&mut self) -> usize {
        let now = self.clock.now();
        let mut moved = 0;
        while let Some((&(expiry, seq), _)) = self.backoff.first_key_value() {
            if expiry > now {
                break;
            }
            let Some(key) = self.backoff.remove(&(expiry, seq)) else {
                break;
            };
            if let Some((_, q)) = self.backoff_items.remove(&key) {
                self.push_active(q);
                moved += 1;
            }
        }
        moved
    }

    /// Retries pods parked longer than the unschedulable timeout (gated pods stay).
    pub fn flush_unschedulable_leftover(&mut self) -> usize {
        let now = self.clock.now();
        let stale: Vec<PodKey> = self
            .unschedulable
            .iter()
            .filter(|(_, (q, since))| {
                !q.gated() && now.duration_since(*since) >= self.cfg.max_unschedulable
            })
            .map(|(k, _)| k.clone())
            .collect();
        self.retry_parked(&stale)
    }

    /// Moves the parked pods `keys` to the active or backoff queue (as their backoff
    /// says); returns how many keys there were.
    fn retry_parked(&mut self, keys: &[PodKey]) -> usize {
        for k in keys {
            if let Some((q, _)) = self.unschedulable.remove(k) {
                self.push_active_or_backoff(q);
            }
        }
        keys.len()
    }

    /// A cluster event happened: moves parked pods that a plugin interested in this event
    /// rejected. Returns how many moved.
    pub fn on_event(&mut self, event: ClusterEvent) -> usize {
        self.on_event_with(event, &EventObjects::Unknown)
    }

    /// A cluster event about known objects happened: moves parked pods for which one of
    /// the plugins that rejected them registered the event and, looking at the objects,
    /// hints that it could help. Returns how many moved.
    pub fn on_event_with(&mut self, event: ClusterEvent, objects: &EventObjects<'_>) -> usize {
        self.move_request_cycle = self.scheduling_cycle;
        let movable: Vec<PodKey> = self
            .unschedulable
            .iter()
            .filter(|(_, (q, _))| !q.gated() && self.worth_retrying(q, &event, objects))
            .map(|(k, _)| k.clone())
            .collect();
        self.retry_parked(&movable)
    }

    fn worth_retrying(
        &self,
        q: &QueuedPodInfo,
        event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> bool {
        if q.unschedulable_plugins.is_empty() {
            return true;
        }
        q.unschedulable_plugins.iter().any(|p| {
            self.plugin_events.get(p).is_some_and(|evs| {
                evs.iter().any(|(interest, plugin)| {
                    event.matches(interest)
                        && plugin.queueing_hint(&q.pod, objects) == QueueingHint::Queue
                })
            })
        })
    }

    /// Numbers of pods in (active, backoff, unschedulable).
    pub fn lens(&self) -> (usize, usize, usize) {
        (
            self.active_items.len(),
            self.backoff_items.len(),
            self.unschedulable.len(),
        )
    }

    /// Pending pods as upstream's `scheduler_pending_pods` splits them:
    /// (active, backoff, unschedulable, gated), gated pods being the
    /// unschedulable ones never attempted because of their gates.
    pub fn pending(&self) -> [usize; 4] {
        let gated = self
            .unschedulable
            .values()
            .filter(|(q, _)| q.gated())
            .count();
        [
            self.active_items.len(),
            self.backoff_items.len(),
            self.unschedulable.len() - gated,
            gated,
        ]
    }

    /// The nominator shared with the scheduler.
    pub fn nominator(&self) -> &Arc<Nominator> {
        &self.nominator
    }
}

#[cfg(test)]
mod tests;
