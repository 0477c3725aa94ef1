//! NodeResourcesBalancedAllocation: prefer nodes where, after placing the pod, the
//! fractions of cpu and memory in use are close to each other.

use std::sync::Arc;

use super::node_resources_fit::{ResourceSpec, default_resources, requested_and_allocatable};
use crate::cache::NodeInfo;
use crate::framework::*;
use crate::pod_info::PodInfo;

/// Plugin name.
pub const NAME: &str = "NodeResourcesBalancedAllocation";

/// The BalancedAllocation plugin.
pub struct BalancedAllocation {
    resources: Vec<ResourceSpec>,
}

#[derive(serde::Deserialize, Default)]
struct Args {
    #[serde(default)]
    resources: Vec<ResourceSpec>,
}

/// Constructor for the registry.
pub fn new(args: &serde_json::Value, _s: &Services) -> Result<Arc<dyn Plugin>, ConfigError> {
    let a: Args = parse_args(NAME, args)?;
    let resources = if a.resources.is_empty() {
        default_resources()
    } else {
        a.resources
    };
    Ok(Arc::new(BalancedAllocation { resources }))
}

impl Default for BalancedAllocation {
    fn default() -> Self {
        BalancedAllocation {
            resources: default_resources(),
        }
    }
}

impl Plugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_score(self: Arc<Self>) -> Option<Arc<dyn ScorePlugin>> {
        Some(self)
    }
}

impl ScorePlugin for BalancedAllocation {
    fn score(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let fractions: Vec<f64> = self
            .resources
            .iter()
            .filter_map(|r| {
                let (req, alloc) = requested_and_allocatable(pod, node, &r.name, false);
                (alloc > 0).then(|| (req as f64 / alloc as f64).min(1.0))
            })
            .collect();
        let std = match fractions.len() {
            0 | 1 => 0.0,
            2 => (fractions[0] - fractions[1]).abs() / 2.0,
            n => {
                let mean = fractions.iter().sum::<f64>() / n as f64;
                (fractions
                    .iter()
                    .map(|f| (f - mean) * (f - mean))
                    .sum::<f64>()
                    / n as f64)
                    .sqrt()
            }
        };
        (
            ((1.0 - std) * MAX_NODE_SCORE as f64) as i64,
            Status::success(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::helpers::node_info_with;
    use crate::testing::{NodeBuilder, PodBuilder};

    #[test]
    fn score_table() {
        let node = |pods: Vec<PodBuilder>| {
            node_info_with(
                NodeBuilder::new("n")
                    .allocatable(&[("cpu", "4"), ("memory", "4Gi"), ("pods", "10")])
                    .build(),
                pods.into_iter().map(|p| p.build()).collect(),
            )
        };
        let cases = [
            // cpu 2/4 = .5, mem 2/4 = .5 → perfectly balanced
            (
                "balanced",
                vec![],
                PodBuilder::new("p").container(&[("cpu", "2"), ("memory", "2Gi")]),
                100,
            ),
            // cpu 3/4 = .75, mem 1/4 = .25 → std .25 → 75
            (
                "skewed",
                vec![PodBuilder::new("e").node("n").container(&[("cpu", "2")])],
                PodBuilder::new("p").container(&[("cpu", "1"), ("memory", "1Gi")]),
                75,
            ),
            // fractions are capped at 1: cpu 1, mem 0 → 50
            (
                "over capacity capped",
                vec![],
                PodBuilder::new("p").container(&[("cpu", "8")]),
                50,
            ),
        ];
        for (name, existing, pod, want) in cases {
            let got = BalancedAllocation::default()
                .score(
                    &CycleState::new(),
                    &PodInfo::new(Arc::new(pod.build())),
                    &node(existing),
                )
                .0;
            assert_eq!(got, want, "{name}");
        }
    }
}
