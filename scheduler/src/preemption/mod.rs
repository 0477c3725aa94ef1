//! DefaultPreemption (PostFilter): when no node fits, find nodes where evicting
//! lower-priority pods would make room, choose the victims that disrupt least (respecting
//! PodDisruptionBudgets where possible), pick the best node by upstream's criteria and
//! nominate the pod to it.

mod pdb;
mod select;

use std::sync::Arc;

use crate::algorithm::reason_counts;
use crate::cache::Snapshot;
use crate::framework::*;
use crate::listers::PdbLister;
use crate::plugins::impl_plugin;
use crate::pod_info::PodInfo;
#[cfg(test)]
pub(crate) use select::Candidate;
pub(crate) use select::pick_one_node;

/// Plugin name.
pub(crate) const NAME: &str = "DefaultPreemption";
/// Status reason for nodes where preemption cannot help, as upstream.
pub(crate) const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// Status reason for nodes where evicting every lower-priority pod is not enough.
pub(crate) const NO_VICTIMS: &str = "No preemption victims found for incoming pod";

/// Plugin args (`DefaultPreemptionArgs`); a field left out takes its value from
/// `Args::default()`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Args {
    /// Minimum share of nodes to dry-run, in percent.
    pub min_candidate_nodes_percentage: usize,
    /// Minimum number of nodes to dry-run.
    pub min_candidate_nodes_absolute: usize,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            min_candidate_nodes_percentage: 10,
            min_candidate_nodes_absolute: 100,
        }
    }
}

/// The DefaultPreemption plugin.
pub(crate) struct DefaultPreemption {
    args: Args,
    pdbs: Arc<dyn PdbLister>,
}

/// Constructor for the registry.
pub(crate) fn new(args: &serde_json::Value, s: &Services) -> Result<Arc<dyn Plugin>, ConfigError> {
    Ok(Arc::new(DefaultPreemption {
        args: parse_args(NAME, args)?,
        pdbs: s.pdbs.clone(),
    }))
}

impl_plugin! {
    DefaultPreemption = NAME;
    views!(post_filter);
}

/// Formats a "0/N nodes are available: ..." message from a reason histogram.
pub(crate) fn nodes_available_message(
    num_nodes: usize,
    reasons: impl IntoIterator<Item = String>,
) -> String {
    format!(
        "0/{num_nodes} nodes are available: {}.",
        reason_counts(reasons)
    )
}

impl DefaultPreemption {
    fn eligible(&self, pod: &PodInfo, snapshot: &Snapshot) -> Result<(), String> {
        if pod.spec().preemption_policy.as_deref() == Some("Never") {
            return Err("not eligible due to preemptionPolicy=Never.".into());
        }
        // A pod that already preempted waits for its victims to leave instead of
        // preempting again.
        if let Some(node) = pod.nominated_node_name().and_then(|n| snapshot.get(n))
            && node
                .pods
                .iter()
                .any(|p| p.is_terminating() && p.priority < pod.priority)
        {
            return Err("not eligible due to a terminating pod on the nominated node.".into());
        }
        Ok(())
    }
}

impl PostFilterPlugin for DefaultPreemption {
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &Arc<PodInfo>,
        snapshot: &Snapshot,
        statuses: &NodeToStatus,
        ctx: &PostFilterContext<'_>,
    ) -> (Option<PostFilterResult>, Status) {
        if let Err(msg) = self.eligible(pod, snapshot) {
            return (None, Status::unresolvable(msg));
        }
        let n = snapshot.len();
        let mut reasons: Vec<String> = Vec::with_capacity(n);
        let mut potential = Vec::new();
        for node in snapshot.nodes() {
            match statuses.get(node.name()) {
                Some(st) if st.code() == Code::Unschedulable => potential.push(node.clone()),
                _ => reasons.push(NOT_HELPFUL.to_string()),
            }
        }
        let budget = (n * self.args.min_candidate_nodes_percentage / 100)
            .max(self.args.min_candidate_nodes_absolute)
            .min(potential.len());
        let pdbs = self.pdbs.pdbs();
        let mut candidates = Vec::new();
        for node in &potential {
            if candidates.len() >= budget {
                break;
            }
            match select::select_victims_on_node(ctx, state, pod, node, &pdbs) {
                Some(c) => candidates.push(c),
                None => reasons.push(NO_VICTIMS.to_string()),
            }
        }
        let Some(best) = pick_one_node(candidates) else {
            let msg = format!("preemption: {}", nodes_available_message(n, reasons));
            return (None, Status::unschedulable(msg));
        };
        let nominations_to_clear = ctx
            .nominated
            .nominated_pods_for_node(&best.node)
            .into_iter()
            .filter(|p| p.priority < pod.priority && p.key != pod.key)
            .collect();
        (
            Some(PostFilterResult {
                nominated_node: Some(best.node),
                victims: best.victims,
                nominations_to_clear,
            }),
            Status::success(),
        )
    }
}

#[cfg(test)]
mod tests;
