//! NodeResourcesBalancedAllocation: prefer nodes where, after placing the pod, the
//! fractions of cpu and memory in use are close to each other.

use std::sync::Arc;

use super::impl_plugin;
use super::node_resources_fit::{ResourceSpec, default_resources, requested_and_allocatable};
use crate::cache::NodeInfo;
use crate::framework::*;
use crate::pod_info::PodInfo;
use crate::resource::ResourceKind;

/// Plugin name.
pub(crate) const NAME: &str = "NodeResourcesBalancedAllocation";

/// The BalancedAllocation plugin.
pub(crate) struct BalancedAllocation {
    resources: Vec<ResourceKind>,
}

#[derive(serde::Deserialize, Default)]
struct Args {
    #[serde(default)]
    resources: Vec<ResourceSpec>,
}

/// Constructor for the registry.
pub(crate) fn new(args: &serde_json::Value, _s: &Services) -> Result<Arc<dyn Plugin>, ConfigError> {
    let a: Args = parse_args(NAME, args)?;
    let resources = if a.resources.is_empty() {
        default_resources()
    } else {
        a.resources
    };
    Ok(Arc::new(BalancedAllocation {
        resources: resources
            .iter()
            .map(|r| ResourceKind::from_name(&r.name))
            .collect(),
    }))
}

impl Default for BalancedAllocation {
    fn default() -> Self {
        BalancedAllocation {
            resources: default_resources()
                .iter()
                .map(|r| ResourceKind::from_name(&r.name))
                .collect(),
        }
    }
}

impl_plugin! {
    BalancedAllocation = NAME;
    views!(score);
}

impl ScorePlugin for BalancedAllocation {
    fn score(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        // Runs per node per pod: fractions live on the stack for the usual few resources.
        let mut buf = [0f64; 8];
        let mut spill: Vec<f64> = Vec::new();
        let mut n = 0usize;
        for r in &self.resources {
            let (req, alloc) = requested_and_allocatable(pod, node, r, false);
            if alloc <= 0 {
                continue;
            }
            let f = (req as f64 / alloc as f64).min(1.0);
            if n < buf.len() {
                buf[n] = f;
            } else {
                spill.push(f);
            }
            n += 1;
        }
        let fractions: Vec<f64>;
        let fr: &[f64] = if spill.is_empty() {
            &buf[..n]
        } else {
            fractions = buf.iter().copied().chain(spill).collect();
            &fractions
        };
        let std = match fr.len() {
            0 | 1 => 0.0,
            2 => (fr[0] - fr[1]).abs() / 2.0,
            len => {
                let mean = fr.iter().sum::<f64>() / len as f64;
                (fr.iter().map(|f| (f - mean) * (f - mean)).sum::<f64>() / len as f64).sqrt()
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
