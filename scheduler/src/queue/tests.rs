use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::clock::FakeClock;
use crate::framework::{ActionSet, EventResource, SchedulerConfig, Services};
use crate::listers::MemoryListers;
use crate::testing::{FakeApi, PodBuilder};

fn queue() -> (SchedulingQueue, FakeClock) {
    let clock = FakeClock::new();
    let services =
        Services::in_memory(Arc::new(MemoryListers::new()), Arc::new(FakeApi::default()));
    let cfg = SchedulerConfig::default();
    let fwk = Arc::new(
        Framework::new(
            &cfg.profiles[0],
            &crate::plugins::in_tree_registry(),
            &services,
        )
        .unwrap(),
    );
    let q = SchedulingQueue::new(
        Arc::new(clock.clone()),
        QueueConfig::default(),
        &[fwk],
        Arc::new(Nominator::new()),
    );
    (q, clock)
}

fn pod(name: &str) -> Arc<Pod> {
    Arc::new(PodBuilder::new(name).build())
}

/// A queue holding `pod`, popped once and parked as rejected by `plugins`, and
/// the pod's key.
fn parked(pod: PodBuilder, plugins: &[&'static str]) -> (SchedulingQueue, String) {
    let (q, _, key) = parked_on_clock(pod, plugins);
    (q, key)
}

/// [`parked`], with the queue's clock for the cases that let time pass.
fn parked_on_clock(
    pod: PodBuilder,
    plugins: &[&'static str],
) -> (SchedulingQueue, FakeClock, String) {
    let (mut q, clock) = queue();
    q.add(Arc::new(pod.build()));
    let key = fail(&mut q, plugins);
    (q, clock, key)
}

/// Asserts the pod `key` left the unschedulable pods (for the active or backoff queue).
#[track_caller]
fn assert_requeued(q: &SchedulingQueue, key: &str) {
    assert!(
        q.location(key)
            .is_some_and(|l| l != Location::Unschedulable),
        "{key} is still parked as unschedulable"
    );
}

/// Delivers an event of `actions` on `resource`, as an informer would, and
/// returns how many parked pods it moved.
fn on(q: &mut SchedulingQueue, resource: EventResource, actions: ActionSet) -> usize {
    q.on_event(ClusterEvent::new(resource, actions))
}

fn fail(q: &mut SchedulingQueue, plugins: &[&'static str]) -> String {
    let qp = q.pop().expect("a pod is active");
    let key = qp.pod.key.clone();
    q.add_unschedulable(qp, plugins.iter().copied().collect(), false);
    key
}

#[test]
fn orders_by_priority_then_enqueue_time() {
    let (mut q, clock) = queue();
    q.add(Arc::new(PodBuilder::new("low-early").priority(1).build()));
    clock.advance(Duration::from_millis(1));
    q.add(Arc::new(PodBuilder::new("high").priority(100).build()));
    clock.advance(Duration::from_millis(1));
    q.add(Arc::new(PodBuilder::new("low-late").priority(1).build()));
    clock.advance(Duration::from_millis(1));
    q.add(Arc::new(PodBuilder::new("default").build()));
    let order: Vec<String> = std::iter::from_fn(|| q.pop().map(|p| p.pod.name.clone())).collect();
    assert_eq!(order, vec!["high", "low-early", "low-late", "default"]);
}

#[test]
fn ignores_pods_of_other_schedulers() {
    let (mut q, _) = queue();
    assert!(
        !q.add(Arc::new(
            PodBuilder::new("mine-not")
                .scheduler_name("other-scheduler")
                .build()
        ))
    );
    assert!(
        q.add(Arc::new(
            PodBuilder::new("mine")
                .scheduler_name("default-scheduler")
                .build()
        ))
    );
    assert_eq!(q.lens(), (1, 0, 0));
}

#[test]
fn errors_back_off_exponentially_up_to_ten_seconds() {
    let (mut q, clock) = queue();
    q.add(pod("p"));
    let mut waits = Vec::new();
    for _ in 0..6 {
        let qp = q.pop().expect("active");
        q.add_unschedulable(qp, BTreeSet::new(), true);
        assert_eq!(q.location("uid-p"), Some(Location::Backoff));
        let mut waited = 0;
        while q.flush_backoff_completed() == 0 {
            clock.advance(Duration::from_millis(500));
            waited += 500;
            assert!(waited <= 20_000, "backoff never completed");
        }
        waits.push(waited);
    }
    assert_eq!(waits, vec![1000, 2000, 4000, 8000, 10_000, 10_000]);
}

#[test]
fn parked_pods_move_only_on_relevant_events() {
    let (mut q, clock, key) = parked_on_clock(PodBuilder::new("p"), &["NodeResourcesFit"]);
    assert_eq!(q.location(&key), Some(Location::Unschedulable));
    // A node label change cannot help a pod short of resources.
    assert_eq!(
        on(&mut q, EventResource::Node, ActionSet::UPDATE_NODE_LABEL),
        0
    );
    assert_eq!(
        on(&mut q, EventResource::PersistentVolumeClaim, ActionSet::ADD),
        0
    );
    assert_eq!(q.location(&key), Some(Location::Unschedulable));
    // A deleted pod frees resources; the pod is still backing off, so it goes to backoffQ.
    assert_eq!(q.on_event(ClusterEvent::ASSIGNED_POD_DELETE), 1);
    assert_eq!(q.location(&key), Some(Location::Backoff));
    clock.advance(Duration::from_secs(1));
    q.flush_backoff_completed();
    assert_eq!(q.location(&key), Some(Location::Active));
}

#[test]
fn event_after_backoff_goes_straight_to_active() {
    let (mut q, clock, key) = parked_on_clock(PodBuilder::new("p"), &["TaintToleration"]);
    clock.advance(Duration::from_secs(2));
    assert_eq!(
        on(&mut q, EventResource::Node, ActionSet::UPDATE_NODE_TAINT),
        1
    );
    assert_eq!(q.location(&key), Some(Location::Active));
}

#[test]
fn volume_events_requeue_volume_binding_failures() {
    let (mut q, key) = parked(PodBuilder::new("p"), &["VolumeBinding"]);
    assert_eq!(q.on_event(ClusterEvent::ASSIGNED_POD_DELETE), 0);
    assert_eq!(
        on(
            &mut q,
            EventResource::PersistentVolumeClaim,
            ActionSet::UPDATE_OTHER
        ),
        1
    );
    assert_ne!(q.location(&key), Some(Location::Unschedulable));
}

#[test]
fn unschedulable_pods_flushed_after_five_minutes() {
    let (mut q, clock, key) = parked_on_clock(PodBuilder::new("p"), &["NodeAffinity"]);
    clock.advance(Duration::from_secs(299));
    assert_eq!(q.flush_unschedulable_leftover(), 0);
    clock.advance(Duration::from_secs(1));
    assert_eq!(q.flush_unschedulable_leftover(), 1);
    assert_eq!(q.location(&key), Some(Location::Active));
}

#[test]
fn status_updates_do_not_postpone_the_flush() {
    let (mut q, clock, _) = parked_on_clock(PodBuilder::new("p"), &["NodeAffinity"]);
    for _ in 0..5 {
        clock.advance(Duration::from_secs(60));
        let mut same = PodBuilder::new("p").build();
        same.status = Some(Default::default());
        q.update(Arc::new(same));
    }
    assert_eq!(q.flush_unschedulable_leftover(), 1);
}

#[test]
fn gated_pods_wait_for_gate_removal() {
    let (mut q, clock) = queue();
    q.add(Arc::new(
        PodBuilder::new("g").gate("example.com/wait").build(),
    ));
    assert_eq!(q.location("uid-g"), Some(Location::Unschedulable));
    assert!(q.pop().is_none());
    assert_eq!(q.on_event(ClusterEvent::NODE_ADD), 0);
    assert_eq!(q.on_event(ClusterEvent::UNSCHEDULABLE_TIMEOUT), 0);
    clock.advance(Duration::from_secs(600));
    assert_eq!(
        q.flush_unschedulable_leftover(),
        0,
        "gated pods are not flushed"
    );
    // Another gate change keeps it gated.
    q.update(Arc::new(
        PodBuilder::new("g").gate("example.com/other").build(),
    ));
    assert_eq!(q.location("uid-g"), Some(Location::Unschedulable));
    q.update(pod("g"));
    assert_eq!(q.location("uid-g"), Some(Location::Active));
    assert_eq!(q.pop().map(|p| p.pod.name.clone()).as_deref(), Some("g"));
}

#[test]
fn move_request_during_cycle_sends_pod_to_backoff() {
    let (mut q, _) = queue();
    q.add(pod("p"));
    let qp = q.pop().unwrap();
    // A node appears while the pod is being scheduled against the old snapshot.
    q.on_event(ClusterEvent::NODE_ADD);
    q.add_unschedulable(qp, BTreeSet::from(["NodeResourcesFit"]), false);
    assert_eq!(q.location("uid-p"), Some(Location::Backoff));
}

#[test]
fn updates_and_deletes_while_in_flight() {
    let (mut q, _) = queue();
    q.add(pod("p"));
    let qp = q.pop().unwrap();
    assert_eq!(q.location("uid-p"), Some(Location::InFlight));
    q.update(Arc::new(PodBuilder::new("p").label("v", "2").build()));
    q.add_unschedulable(qp, BTreeSet::from(["NodeAffinity"]), false);
    assert_eq!(
        q.location("uid-p"),
        Some(Location::Backoff),
        "an updated pod is retried"
    );
    let (_, (_, retried)) = q
        .backoff_items
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    assert_eq!(retried.pod.labels().get("v").map(String::as_str), Some("2"));

    q.add(pod("d"));
    // Drain: "d" is active, "p" in backoff.
    let qd = q.pop().unwrap();
    assert_eq!(qd.pod.name, "d");
    q.delete(&qd.pod.key);
    q.add_unschedulable(qd, BTreeSet::new(), true);
    assert_eq!(
        q.location("uid-d"),
        None,
        "deleted while in flight: dropped"
    );
}

#[test]
fn spec_update_of_parked_pod_requeues_it() {
    let (mut q, clock, _) = parked_on_clock(PodBuilder::new("p"), &["NodeAffinity"]);
    // A status-only update changes nothing.
    let mut same = PodBuilder::new("p").build();
    same.status = Some(Default::default());
    q.update(Arc::new(same));
    assert_eq!(q.location("uid-p"), Some(Location::Unschedulable));
    clock.advance(Duration::from_secs(5));
    q.update(Arc::new(
        PodBuilder::new("p").node_selector("zone", "a").build(),
    ));
    assert_eq!(q.location("uid-p"), Some(Location::Active));
}

#[test]
fn nominations_follow_pod_status() {
    let (mut q, _) = queue();
    q.add(Arc::new(PodBuilder::new("p").nominated("n1").build()));
    assert_eq!(q.nominator().node_of("uid-p").as_deref(), Some("n1"));
    q.delete("uid-p");
    assert_eq!(q.nominator().node_of("uid-p"), None);
}

mod queueing_hints {
    use super::*;
    use crate::framework::EventObjects;
    use crate::testing::NodeBuilder;

    fn node_update(q: &mut SchedulingQueue, actions: ActionSet, old: &Node, new: &Node) -> usize {
        q.on_event_with(
            ClusterEvent::new(EventResource::Node, actions),
            &EventObjects::Node {
                old: Some(old),
                new: Some(new),
            },
        )
    }

    fn node_add(q: &mut SchedulingQueue, new: &Node) -> usize {
        q.on_event_with(
            ClusterEvent::NODE_ADD,
            &EventObjects::Node {
                old: None,
                new: Some(new),
            },
        )
    }

    /// Asserts that the node update from `old` to `new` moves the parked pod
    /// `key`, and it alone.
    #[track_caller]
    fn assert_node_update_requeues(
        q: &mut SchedulingQueue,
        key: &str,
        actions: ActionSet,
        old: &Node,
        new: &Node,
    ) {
        assert_eq!(node_update(q, actions, old, new), 1);
        assert_requeued(q, key);
    }

    /// The queue told that `deleted` was deleted; how many pods moved.
    fn pod_delete(q: &mut SchedulingQueue, deleted: &Pod) -> usize {
        q.on_event_with(
            ClusterEvent::ASSIGNED_POD_DELETE,
            &EventObjects::Pod {
                old: Some(deleted),
                new: None,
            },
        )
    }

    use k8s_openapi::api::core::v1::Node;

    #[test]
    fn resources_fit_rejection_waits_for_a_node_big_enough() {
        let (mut q, key) = parked(
            PodBuilder::new("big").container(&[("cpu", "8")]),
            &["NodeResourcesFit"],
        );
        let small = NodeBuilder::new("small")
            .allocatable(&[("cpu", "4"), ("pods", "110")])
            .build();
        // A new node too small for the pod leaves it parked.
        assert_eq!(node_add(&mut q, &small), 0);
        // Allocatable grows, but not enough.
        let bigger = NodeBuilder::new("small")
            .allocatable(&[("cpu", "6"), ("pods", "110")])
            .build();
        assert_eq!(
            node_update(&mut q, ActionSet::UPDATE_NODE_ALLOCATABLE, &small, &bigger),
            0
        );
        // A label change together with nothing that adds resources is not even offered.
        let relabelled = NodeBuilder::new("small")
            .allocatable(&[("cpu", "6"), ("pods", "110")])
            .label("tier", "gold")
            .build();
        assert_eq!(
            node_update(&mut q, ActionSet::UPDATE_NODE_LABEL, &bigger, &relabelled),
            0
        );
        assert_eq!(q.location(&key), Some(Location::Unschedulable));
        // Enough CPU now: retried.
        let enough = NodeBuilder::new("small")
            .allocatable(&[("cpu", "16"), ("pods", "110")])
            .build();
        assert_node_update_requeues(
            &mut q,
            &key,
            ActionSet::UPDATE_NODE_ALLOCATABLE,
            &bigger,
            &enough,
        );
    }

    #[test]
    fn resources_fit_rejection_requeued_by_assigned_pod_delete_only() {
        let (mut q, key) = parked(
            PodBuilder::new("p").container(&[("cpu", "1")]),
            &["NodeResourcesFit"],
        );
        let pending = PodBuilder::new("other-pending").build();
        assert_eq!(pod_delete(&mut q, &pending), 0);
        let bound = PodBuilder::new("other-bound")
            .container(&[("cpu", "2")])
            .node("n1")
            .build();
        assert_eq!(pod_delete(&mut q, &bound), 1);
        assert_requeued(&q, &key);
    }

    #[test]
    fn taint_rejection_requeued_when_the_untolerated_taint_goes() {
        let (mut q, key) = parked(
            PodBuilder::new("p").toleration("dedicated", "Equal", "gpu", "NoSchedule"),
            &["TaintToleration"],
        );
        let tainted = NodeBuilder::new("n")
            .taint("dedicated", "db", "NoSchedule")
            .build();
        // Another untolerated taint replacing the first: no help.
        let still = NodeBuilder::new("n")
            .taint("dedicated", "web", "NoSchedule")
            .build();
        assert_eq!(
            node_update(&mut q, ActionSet::UPDATE_NODE_TAINT, &tainted, &still),
            0
        );
        // A new node with a taint the pod does not tolerate: no help either.
        assert_eq!(node_add(&mut q, &still), 0);
        assert_eq!(q.location(&key), Some(Location::Unschedulable));
        // The taint is removed: retried.
        let clean = NodeBuilder::new("n").build();
        assert_node_update_requeues(&mut q, &key, ActionSet::UPDATE_NODE_TAINT, &still, &clean);
        // A tolerated taint on a new node also helps another such pod.
        q.add(Arc::new(
            PodBuilder::new("q")
                .toleration("dedicated", "Equal", "gpu", "NoSchedule")
                .build(),
        ));
        while let Some(p) = q.pop() {
            if p.pod.name == "q" {
                q.add_unschedulable(p, BTreeSet::from(["TaintToleration"]), false);
            }
        }
        let gpu = NodeBuilder::new("g")
            .taint("dedicated", "gpu", "NoSchedule")
            .build();
        assert_eq!(node_add(&mut q, &gpu), 1);
    }

    #[test]
    fn node_affinity_rejection_requeued_only_by_a_newly_matching_node() {
        let (mut q, key) = parked(
            PodBuilder::new("p").node_selector("disk", "ssd"),
            &["NodeAffinity"],
        );
        let hdd = NodeBuilder::new("n").label("disk", "hdd").build();
        let hdd2 = NodeBuilder::new("n")
            .label("disk", "hdd")
            .label("x", "y")
            .build();
        assert_eq!(node_add(&mut q, &hdd), 0);
        assert_eq!(
            node_update(&mut q, ActionSet::UPDATE_NODE_LABEL, &hdd, &hdd2),
            0
        );
        let ssd = NodeBuilder::new("n").label("disk", "ssd").build();
        assert_node_update_requeues(&mut q, &key, ActionSet::UPDATE_NODE_LABEL, &hdd2, &ssd);
    }

    #[test]
    fn any_rejecting_plugin_hinting_queue_moves_the_pod() {
        let (mut q, key) = parked(
            PodBuilder::new("p")
                .node_selector("disk", "ssd")
                .container(&[("cpu", "1")]),
            &["NodeAffinity", "NodeResourcesFit"],
        );
        // The node misses the selector but has room: NodeResourcesFit hints it could help.
        let roomy = NodeBuilder::new("n")
            .allocatable(&[("cpu", "8"), ("pods", "110")])
            .build();
        assert_eq!(node_add(&mut q, &roomy), 1);
        assert_requeued(&q, &key);
    }

    #[test]
    fn events_without_objects_still_requeue() {
        let (mut q, key) = parked(PodBuilder::new("p"), &["TaintToleration"]);
        assert_eq!(q.on_event(ClusterEvent::NODE_ADD), 1);
        assert_requeued(&q, &key);
    }

    #[test]
    fn cordoned_rejection_requeued_when_uncordoned() {
        let (mut q, key) = parked(PodBuilder::new("p"), &["NodeUnschedulable"]);
        let cordoned = NodeBuilder::new("n").unschedulable().build();
        assert_eq!(node_add(&mut q, &cordoned), 0);
        let relabelled = NodeBuilder::new("n")
            .unschedulable()
            .label("a", "b")
            .build();
        assert_eq!(
            node_update(&mut q, ActionSet::UPDATE_NODE_TAINT, &cordoned, &relabelled),
            0
        );
        let open = NodeBuilder::new("n").build();
        assert_node_update_requeues(
            &mut q,
            &key,
            ActionSet::UPDATE_NODE_TAINT,
            &relabelled,
            &open,
        );
    }

    #[test]
    fn host_port_rejection_requeued_only_when_the_port_is_freed() {
        let (mut q, key) = parked(
            PodBuilder::new("p").host_port(8080, "TCP", ""),
            &["NodePorts"],
        );
        let other_port = PodBuilder::new("a")
            .host_port(9090, "TCP", "")
            .node("n")
            .build();
        assert_eq!(pod_delete(&mut q, &other_port), 0);
        let same_port = PodBuilder::new("b")
            .host_port(8080, "TCP", "")
            .node("n")
            .build();
        assert_eq!(pod_delete(&mut q, &same_port), 1);
        assert_requeued(&q, &key);
    }
}
