//! One scheduling decision: filter the nodes (stopping early on large clusters per
//! `percentageOfNodesToScore`), score the feasible ones, pick the best; on failure build
//! the upstream-worded "0/N nodes are available: ..." diagnosis.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use crate::cache::{NodeInfo, Snapshot};
use crate::framework::{CycleState, Framework, NodeToStatus, NominatedPods, Status};
use crate::pod_info::PodInfo;

/// The chosen node and how much work it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleResult {
    /// The node to bind to.
    pub suggested_host: String,
    /// Nodes filtered (feasible plus rejected).
    pub evaluated_nodes: usize,
    /// Nodes that passed the filters.
    pub feasible_nodes: usize,
}

/// Why no node fit.
#[derive(Debug, Clone, Default)]
pub struct Diagnosis {
    /// Per-node rejection.
    pub node_to_status: NodeToStatus,
    /// Plugins that rejected the pod somewhere (drives event-based requeueing).
    pub unschedulable_plugins: BTreeSet<&'static str>,
    /// Message of a PreFilter rejection (then all nodes share it).
    pub pre_filter_msg: Option<String>,
    /// Message from PostFilter (preemption).
    pub post_filter_msg: Option<String>,
    /// Nodes filtered plus nodes excluded by PreFilter.
    pub evaluated: usize,
}

/// No node fits the pod.
#[derive(Debug, Clone)]
pub struct FitError {
    /// Number of nodes in the snapshot.
    pub num_all_nodes: usize,
    /// Details.
    pub diagnosis: Diagnosis,
}

/// Each distinct reason after the number of nodes that gave it, sorted and
/// comma-separated ("1 Insufficient cpu, 2 node(s) had untolerated taint ..."):
/// the body of upstream's "0/N nodes are available: ..." message, which both a
/// failed scheduling attempt and a failed preemption word this way.
pub(crate) fn reason_counts<R: Hash + Eq + fmt::Display>(
    reasons: impl IntoIterator<Item = R>,
) -> String {
    let mut counts: HashMap<R, usize> = HashMap::new();
    for r in reasons {
        *counts.entry(r).or_default() += 1;
    }
    let mut parts: Vec<String> = counts
        .into_iter()
        .map(|(r, c)| format!("{c} {r}"))
        .collect();
    parts.sort();
    parts.join(", ")
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0/{} nodes are available:", self.num_all_nodes)?;
        match &self.diagnosis.pre_filter_msg {
            Some(m) => write!(f, " {m}.")?,
            None => {
                let reasons = self
                    .diagnosis
                    .node_to_status
                    .values()
                    .flat_map(|st| st.reasons());
                write!(f, " {}.", reason_counts(reasons))?;
            }
        }
        if let Some(m) = self
            .diagnosis
            .post_filter_msg
            .as_deref()
            .filter(|m| !m.is_empty())
        {
            if m.ends_with('.') {
                write!(f, " {m}")?
            } else {
                write!(f, " {m}.")?
            }
        }
        Ok(())
    }
}

/// Failures of a scheduling attempt.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ScheduleError {
    /// The cluster has no nodes.
    #[error("no nodes available to schedule pods")]
    NoNodes,
    /// No node fits.
    #[error("{0}")]
    Fit(Box<FitError>),
    /// A plugin failed internally.
    #[error("running plugins: {0}")]
    Internal(Status),
}

/// How many feasible nodes to find before scoring: all nodes on small clusters; on large
/// ones an adaptive share (50% minus 1% per 125 nodes, at least 5%) but at least 100.
pub(crate) fn num_feasible_nodes_to_find(percentage: u32, num_all: usize) -> usize {
    const MIN_NODES: usize = 100;
    if num_all < MIN_NODES || percentage >= 100 {
        return num_all;
    }
    let pct = if percentage == 0 {
        (50 - (num_all / 125) as i64).max(5) as usize
    } else {
        percentage as usize
    };
    (num_all * pct / 100).max(MIN_NODES)
}

/// State carried across scheduling cycles: the round-robin start index and the RNG used
/// to break score ties.
#[derive(Debug, Clone)]
pub struct Algorithm {
    next_start: usize,
    rng: u64,
    /// Global percentage of nodes to score (0 = adaptive).
    pub percentage_of_nodes_to_score: u32,
}

impl Algorithm {
    /// A new algorithm state; `seed` makes tie-breaking reproducible.
    pub fn new(percentage_of_nodes_to_score: u32, seed: u64) -> Self {
        Algorithm {
            next_start: 0,
            rng: seed | 1,
            percentage_of_nodes_to_score,
        }
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*: fast and good enough for tie-breaking.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Filters nodes; returns the feasible ones and the rejections.
    pub fn find_nodes_that_fit(
        &mut self,
        fwk: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nominated: &dyn NominatedPods,
    ) -> Result<(Vec<Arc<NodeInfo>>, Diagnosis), ScheduleError> {
        let mut diag = Diagnosis::default();
        let (pre, st) = fwk.run_pre_filter(state, pod, snapshot);
        if !st.is_success() {
            if !st.is_rejected() {
                return Err(ScheduleError::Internal(st));
            }
            if let Some(p) = st.plugin() {
                diag.unschedulable_plugins.insert(p);
            }
            diag.pre_filter_msg = Some(st.message());
            for n in snapshot.nodes() {
                diag.node_to_status.insert(n.name().to_string(), st.clone());
            }
            return Ok((Vec::new(), diag));
        }
        let restricted: Option<Vec<Arc<NodeInfo>>> = pre
            .as_ref()
            .and_then(|r| r.node_names.as_ref())
            .map(|names| {
                let reason = Status::unresolvable(format!(
                    "node(s) didn't satisfy plugin(s) [{}]",
                    pre.as_ref()
                        .map(|r| r.restricted_by.join(" "))
                        .unwrap_or_default()
                ));
                for n in snapshot.nodes() {
                    if !names.iter().any(|x| x == n.name()) {
                        diag.node_to_status
                            .insert(n.name().to_string(), reason.clone());
                    }
                }
                names
                    .iter()
                    .filter_map(|n| snapshot.get(n).cloned())
                    .collect()
            });
        let all: &[Arc<NodeInfo>] = restricted.as_deref().unwrap_or(snapshot.nodes());
        let pct = fwk
            .percentage_of_nodes_to_score()
            .unwrap_or(self.percentage_of_nodes_to_score);
        let want = num_feasible_nodes_to_find(pct, all.len());
        let mut feasible = Vec::with_capacity(want.min(all.len()));
        let start = if restricted.is_some() || all.is_empty() {
            0
        } else {
            self.next_start % all.len()
        };
        let mut processed = 0;
        // Rejections are only reported when nothing fits: collect them cheaply and build
        // the per-node map only then.
        let mut rejected: Vec<(&Arc<NodeInfo>, Status)> = Vec::new();
        for i in 0..all.len() {
            if feasible.len() >= want {
                break;
            }
            let node = &all[(start + i) % all.len()];
            processed += 1;
            let st = fwk.run_filter_with_nominated(state, pod, node, nominated);
            if st.is_success() {
                feasible.push(node.clone());
            } else if st.is_rejected() {
                if let Some(p) = st.plugin() {
                    diag.unschedulable_plugins.insert(p);
                }
                rejected.push((node, st));
            } else {
                return Err(ScheduleError::Internal(st));
            }
        }
        diag.evaluated = processed + diag.node_to_status.len();
        if feasible.is_empty() {
            diag.node_to_status.extend(
                rejected
                    .into_iter()
                    .map(|(n, st)| (n.name().to_string(), st)),
            );
        }
        if restricted.is_none() && !all.is_empty() {
            self.next_start = (start + processed) % all.len();
        }
        Ok((feasible, diag))
    }

    /// Schedules one pod on the snapshot.
    pub fn schedule_pod(
        &mut self,
        fwk: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nominated: &dyn NominatedPods,
    ) -> Result<ScheduleResult, ScheduleError> {
        if snapshot.is_empty() {
            return Err(ScheduleError::NoNodes);
        }
        let (feasible, diag) = self.find_nodes_that_fit(fwk, state, pod, snapshot, nominated)?;
        let evaluated = diag.evaluated;
        if feasible.is_empty() {
            return Err(ScheduleError::Fit(Box::new(FitError {
                num_all_nodes: snapshot.len(),
                diagnosis: diag,
            })));
        }
        if feasible.len() == 1 {
            return Ok(ScheduleResult {
                suggested_host: feasible[0].name().to_string(),
                evaluated_nodes: evaluated,
                feasible_nodes: 1,
            });
        }
        let st = fwk.run_pre_score(state, pod, &feasible, snapshot);
        if !st.is_success() {
            return Err(ScheduleError::Internal(st));
        }
        let scores = fwk
            .run_score(state, pod, &feasible)
            .map_err(ScheduleError::Internal)?;
        // Reservoir sampling over the top-scoring nodes: each tie wins with equal chance.
        let mut best = 0usize;
        let mut ties = 0u64;
        for (i, s) in scores.iter().enumerate() {
            if i == 0 || *s > scores[best] {
                best = i;
                ties = 1;
            } else if *s == scores[best] {
                ties += 1;
                if self.next_random().is_multiple_of(ties) {
                    best = i;
                }
            }
        }
        Ok(ScheduleResult {
            suggested_host: feasible[best].name().to_string(),
            evaluated_nodes: evaluated,
            feasible_nodes: feasible.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;

    #[test]
    fn adaptive_percentage() {
        assert_eq!(num_feasible_nodes_to_find(0, 50), 50);
        assert_eq!(num_feasible_nodes_to_find(0, 1000), 420); // 50 - 8 = 42%
        assert_eq!(num_feasible_nodes_to_find(0, 5000), 500); // 50 - 40 = 10%
        assert_eq!(num_feasible_nodes_to_find(0, 100_000), 5000); // floor at 5%
        assert_eq!(num_feasible_nodes_to_find(0, 150), 100); // at least 100
        assert_eq!(num_feasible_nodes_to_find(100, 5000), 5000);
        assert_eq!(num_feasible_nodes_to_find(30, 1000), 300);
    }

    #[test]
    fn fit_error_message_matches_upstream_shape() {
        let mut diag = Diagnosis::default();
        diag.node_to_status
            .insert("n1".into(), Status::unschedulable("Insufficient cpu"));
        diag.node_to_status.insert(
            "n2".into(),
            Status::unresolvable("node(s) had untolerated taint {key: value}"),
        );
        diag.node_to_status.insert(
            "n3".into(),
            Status::unresolvable("node(s) had untolerated taint {key: value}"),
        );
        diag.post_filter_msg = Some(
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
                .into(),
        );
        let e = FitError {
            num_all_nodes: 3,
            diagnosis: diag,
        };
        assert_eq!(
            e.to_string(),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {key: value}. \
             preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        );
        let mut pre = Diagnosis {
            pre_filter_msg: Some("pod has unbound immediate PersistentVolumeClaims".into()),
            ..Default::default()
        };
        pre.node_to_status.insert(
            "n1".into(),
            Status::new(Code::UnschedulableAndUnresolvable, "x"),
        );
        let e = FitError {
            num_all_nodes: 1,
            diagnosis: pre,
        };
        assert_eq!(
            e.to_string(),
            "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."
        );
    }
}
