//! Victim selection on one node and the choice between candidate nodes.

use std::sync::Arc;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::pdb::split_by_pdb;
use crate::cache::NodeInfo;
use crate::framework::{CycleState, PostFilterContext, SimulatedPod};
use crate::pod_info::PodInfo;

/// A node where preemption would work, with its victims.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    /// Node name.
    pub node: String,
    /// Pods to evict, most important first.
    pub victims: Vec<Arc<PodInfo>>,
    /// How many victims violate a PDB.
    pub pdb_violations: usize,
}

/// Orders pods most important first: higher priority, then earlier start.
fn more_important_first(a: &Arc<PodInfo>, b: &Arc<PodInfo>) -> std::cmp::Ordering {
    b.priority
        .cmp(&a.priority)
        .then(a.start_time_secs().cmp(&b.start_time_secs()))
}

/// Finds the minimal set of lower-priority pods to evict from `node` so `pod` fits:
/// remove all of them, check the pod fits, then add back ("reprieve") as many as possible,
/// PDB-protected pods first. `None` if even removing all of them is not enough.
pub(crate) fn select_victims_on_node(
    ctx: &PostFilterContext<'_>,
    state: &CycleState,
    pod: &Arc<PodInfo>,
    node: &Arc<NodeInfo>,
    pdbs: &[Arc<PodDisruptionBudget>],
) -> Option<Candidate> {
    let fwk = ctx.framework;
    let mut sim_state = state.clone();
    let mut sim = NodeInfo::clone(node);
    let mut lower: Vec<Arc<PodInfo>> = node
        .pods
        .iter()
        .filter(|p| p.priority < pod.priority)
        .cloned()
        .collect();
    if lower.is_empty() {
        return None;
    }
    for p in &lower {
        sim.remove_pod(&p.key);
        if !fwk
            .run_pre_filter_extensions(&mut sim_state, pod, SimulatedPod::removed(p, &sim))
            .is_success()
        {
            return None;
        }
    }
    if !fwk
        .run_filter_with_nominated(&sim_state, pod, &Arc::new(sim.clone()), ctx.nominated)
        .is_success()
    {
        return None;
    }
    lower.sort_by(more_important_first);
    let (violating, non_violating) = split_by_pdb(&lower, pdbs);
    let mut victims = Vec::new();
    let mut pdb_violations = 0;
    let reprieve = |p: &Arc<PodInfo>, sim: &mut NodeInfo, st: &mut CycleState| -> bool {
        sim.add_pod(p.clone());
        if !fwk
            .run_pre_filter_extensions(st, pod, SimulatedPod::added(p, sim))
            .is_success()
        {
            return false;
        }
        let fits = fwk
            .run_filter_with_nominated(st, pod, &Arc::new(sim.clone()), ctx.nominated)
            .is_success();
        if !fits {
            sim.remove_pod(&p.key);
            let _ = fwk.run_pre_filter_extensions(st, pod, SimulatedPod::removed(p, sim));
        }
        fits
    };
    for p in &violating {
        if !reprieve(p, &mut sim, &mut sim_state) {
            victims.push(p.clone());
            pdb_violations += 1;
        }
    }
    for p in &non_violating {
        if !reprieve(p, &mut sim, &mut sim_state) {
            victims.push(p.clone());
        }
    }
    victims.sort_by(more_important_first);
    Some(Candidate {
        node: node.name().to_string(),
        victims,
        pdb_violations,
    })
}

/// Picks the candidate upstream would: a node needing no victims; else fewest PDB
/// violations, then the lowest highest-priority victim, then the smallest sum of victim
/// priorities, then the fewest victims, then the latest start among the highest-priority
/// victims; remaining ties go to the first candidate.
pub(crate) fn pick_one_node(candidates: Vec<Candidate>) -> Option<Candidate> {
    if let Some(i) = candidates.iter().position(|c| c.victims.is_empty()) {
        return candidates.into_iter().nth(i);
    }
    type Key = fn(&Candidate) -> i64;
    let criteria: [Key; 5] = [
        |c| c.pdb_violations as i64,
        |c| {
            c.victims
                .first()
                .map_or(i64::MIN, |v| i64::from(v.priority))
        },
        // Offset so negative priorities still sum to a comparable positive number.
        |c| {
            c.victims
                .iter()
                .map(|v| i64::from(v.priority) + i64::from(i32::MAX) + 1)
                .sum()
        },
        |c| c.victims.len() as i64,
        // Latest earliest start among highest-priority victims wins: negate to minimize.
        |c| {
            let top = c.victims.first().map_or(0, |v| v.priority);
            -c.victims
                .iter()
                .filter(|v| v.priority == top)
                .map(|v| v.start_time_secs())
                .min()
                .unwrap_or(i64::MAX)
        },
    ];
    let mut pool = candidates;
    for key in criteria {
        if pool.len() <= 1 {
            break;
        }
        let best = pool.iter().map(key).min()?;
        pool.retain(|c| key(c) == best);
    }
    pool.into_iter().next()
}
