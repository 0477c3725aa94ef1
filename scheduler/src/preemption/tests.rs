use std::sync::Arc;

use super::*;
use crate::scheduler::{CycleOutcome, Failure};
use crate::testing::{NodeBuilder, PodBuilder, TestCluster, pdb};

fn node(name: &str, cpu: &str) -> k8s_openapi::api::core::v1::Node {
    NodeBuilder::new(name)
        .allocatable(&[("cpu", cpu), ("memory", "16Gi"), ("pods", "110")])
        .build()
}

fn running(name: &str, node: &str, cpu: &str, priority: i32) -> k8s_openapi::api::core::v1::Pod {
    PodBuilder::new(name)
        .node(node)
        .priority(priority)
        .container(&[("cpu", cpu)])
        .label("name", name)
        .build()
}

/// A pod waiting to be scheduled that asks for `cpu` at `priority`.
fn pending(name: &str, cpu: &str, priority: i32) -> k8s_openapi::api::core::v1::Pod {
    PodBuilder::new(name)
        .priority(priority)
        .container(&[("cpu", cpu)])
        .build()
}

/// A cluster of `nodes` (name and CPU) on which `pods` already run.
fn cluster(nodes: &[(&str, &str)], pods: Vec<k8s_openapi::api::core::v1::Pod>) -> TestCluster {
    let c = TestCluster::new();
    c.add_nodes(nodes.iter().map(|(name, cpu)| node(name, cpu)).collect());
    for pod in pods {
        c.add_pod(pod);
    }
    c
}

fn schedule_failure(c: &TestCluster, pod: k8s_openapi::api::core::v1::Pod) -> Failure {
    c.add_pod(pod);
    match c.scheduler.schedule_one() {
        Some(CycleOutcome::Failed(f)) => f,
        Some(CycleOutcome::Bind(j)) => panic!("unexpectedly scheduled on {}", j.node),
        _ => panic!("nothing scheduled"),
    }
}

fn names(v: &[Arc<PodInfo>]) -> Vec<String> {
    v.iter().map(|p| p.name.clone()).collect()
}

#[test]
fn preempts_lower_priority_pod() {
    let c = cluster(&[("n1", "2")], vec![running("low", "n1", "2", 0)]);
    let f = schedule_failure(&c, pending("high", "1", 100));
    assert_eq!(f.preemption.nominated_node.as_deref(), Some("n1"));
    assert_eq!(names(&f.preemption.victims), vec!["low"]);
    assert_eq!(f.message, "0/1 nodes are available: 1 Insufficient cpu.");
}

#[test]
fn not_helpful_when_every_rejection_is_unresolvable() {
    let tainted = |name: &str| {
        NodeBuilder::new(name)
            .taint("key", "value", "NoSchedule")
            .build()
    };
    let c = TestCluster::new();
    c.add_nodes(vec![
        tainted("n1"),
        tainted("n2"),
        NodeBuilder::new("n3").label("zone", "b").build(),
    ]);
    let f = schedule_failure(
        &c,
        PodBuilder::new("p")
            .priority(10)
            .node_selector("zone", "a")
            .build(),
    );
    assert_eq!(f.preemption.nominated_node, None);
    assert_eq!(
        f.message,
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, \
         2 node(s) had untolerated taint {key: value}. \
         preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
}

#[test]
fn no_victims_among_equal_priority_pods() {
    let c = cluster(&[("n1", "2")], vec![running("peer", "n1", "2", 5)]);
    let f = schedule_failure(&c, pending("p", "1", 5));
    assert!(f.preemption.victims.is_empty());
    assert_eq!(
        f.message,
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
}

#[test]
fn preemption_policy_never() {
    let c = cluster(&[("n1", "2")], vec![running("low", "n1", "2", 0)]);
    let f = schedule_failure(
        &c,
        PodBuilder::new("p")
            .priority(100)
            .preemption_policy("Never")
            .container(&[("cpu", "1")])
            .build(),
    );
    assert!(f.preemption.victims.is_empty());
    assert_eq!(
        f.message,
        "0/1 nodes are available: 1 Insufficient cpu. not eligible due to preemptionPolicy=Never."
    );
}

#[test]
fn evicts_as_few_and_as_unimportant_pods_as_possible() {
    let c = cluster(&[("n1", "4")], vec![]);
    for prio in [4, 1, 3, 2] {
        c.add_pod(running(&format!("p{prio}"), "n1", "1", prio));
    }
    let f = schedule_failure(&c, pending("high", "2", 100));
    assert_eq!(
        names(&f.preemption.victims),
        vec!["p2", "p1"],
        "the two least important pods, most important first"
    );
}

#[test]
fn picks_node_with_lowest_priority_victims() {
    let c = cluster(
        &[("n1", "1"), ("n2", "1")],
        vec![running("v10", "n1", "1", 10), running("v5", "n2", "1", 5)],
    );
    let f = schedule_failure(&c, pending("high", "1", 100));
    assert_eq!(f.preemption.nominated_node.as_deref(), Some("n2"));
}

#[test]
fn picks_node_with_fewest_victims() {
    let c = cluster(
        &[("n1", "2"), ("n2", "2")],
        vec![
            running("a", "n1", "1", 1),
            running("b", "n1", "1", 1),
            running("c", "n2", "2", 1),
        ],
    );
    let f = schedule_failure(&c, pending("high", "2", 100));
    assert_eq!(
        f.preemption.nominated_node.as_deref(),
        Some("n2"),
        "sum of priorities is smaller with one victim"
    );
    assert_eq!(names(&f.preemption.victims), vec!["c"]);
}

#[test]
fn avoids_pdb_violations() {
    let c = cluster(
        &[("n1", "1"), ("n2", "1")],
        vec![
            running("protected", "n1", "1", 1),
            running("free", "n2", "1", 1),
        ],
    );
    c.listers.put_pdb(pdb("pdb", &[("name", "protected")], 0));
    let f = schedule_failure(&c, pending("high", "1", 100));
    assert_eq!(f.preemption.nominated_node.as_deref(), Some("n2"));
}

#[test]
fn pick_one_node_criteria() {
    let pod = |name: &str, prio: i32, start: i64| {
        Arc::new(PodInfo::new(Arc::new(
            PodBuilder::new(name)
                .priority(prio)
                .start_time(start)
                .build(),
        )))
    };
    let cand = |node: &str, victims: Vec<Arc<PodInfo>>, pdb: usize| Candidate {
        node: node.into(),
        victims,
        pdb_violations: pdb,
    };
    // Latest start time among the highest-priority victims wins when all else ties.
    let got = pick_one_node(vec![
        cand("old", vec![pod("a", 5, 100)], 0),
        cand("young", vec![pod("b", 5, 200)], 0),
    ]);
    assert_eq!(got.unwrap().node, "young");
    let got = pick_one_node(vec![
        cand("violates", vec![pod("a", 1, 0)], 1),
        cand("clean", vec![pod("b", 50, 0)], 0),
    ]);
    assert_eq!(got.unwrap().node, "clean");
    let got = pick_one_node(vec![
        cand("some", vec![pod("a", 1, 0)], 0),
        cand("none", vec![], 0),
    ]);
    assert_eq!(got.unwrap().node, "none");
    assert!(pick_one_node(vec![]).is_none());
}

#[tokio::test]
async fn nominated_pod_gets_the_room_after_victims_leave() {
    let c = cluster(&[("n1", "2")], vec![]);
    let low = running("low", "n1", "2", 0);
    c.add_pod(low.clone());
    c.add_pod(pending("high", "2", 100));
    let (placed, failed) = c.schedule_all().await;
    assert!(placed.is_empty());
    assert_eq!(failed[0].preemption.nominated_node.as_deref(), Some("n1"));
    assert_eq!(c.api.deleted.lock().clone(), vec!["default/low"]);
    // A mid-priority pod arriving before the victim is gone must not take the room.
    c.scheduler.on_pod_delete(&low);
    c.add_pod(pending("mid", "1", 50));
    let (placed, failed) = c.schedule_all().await;
    assert!(
        placed.is_empty(),
        "the preemptor (still backing off) keeps its room: {placed:?}"
    );
    assert_eq!(failed[0].pod.name, "mid");
    assert!(
        failed[0]
            .message
            .starts_with("0/1 nodes are available: 1 Insufficient cpu."),
        "{}",
        failed[0].message
    );
    c.clock.advance(std::time::Duration::from_secs(1));
    c.scheduler.flush();
    let (placed, _) = c.schedule_all().await;
    assert_eq!(placed, vec![("high".to_string(), "n1".to_string())]);
}
