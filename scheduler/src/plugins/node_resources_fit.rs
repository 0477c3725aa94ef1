//! NodeResourcesFit: the node must have room for the pod's effective requests (cpu,
//! memory, ephemeral-storage, extended resources) and a free pod slot; scoring prefers
//! the least allocated nodes by default (LeastAllocated) or the most (MostAllocated).

use std::borrow::Cow;
use std::sync::Arc;

use serde::Deserialize;

use crate::cache::NodeInfo;
use crate::framework::*;
use crate::pod_info::PodInfo;
use crate::resource::{CPU, MEMORY, ResourceKind};

/// Plugin name.
pub(crate) const NAME: &str = "NodeResourcesFit";

/// One resource and its weight in scoring.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub(crate) struct ResourceSpec {
    /// Resource name.
    pub name: String,
    /// Weight (default 1).
    #[serde(default = "one")]
    pub weight: i64,
}

fn one() -> i64 {
    1
}

/// Scoring strategy.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Default)]
pub(crate) enum StrategyType {
    /// Prefer nodes with the most free capacity (spreads load).
    #[default]
    LeastAllocated,
    /// Prefer nodes with the least free capacity (bin packing).
    MostAllocated,
}

/// Scoring strategy args; a field left out takes its value from
/// `ScoringStrategy::default()`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct ScoringStrategy {
    /// Strategy.
    #[serde(rename = "type")]
    pub kind: StrategyType,
    /// Resources and weights; cpu and memory with weight 1 by default.
    pub resources: Vec<ResourceSpec>,
}

impl Default for ScoringStrategy {
    fn default() -> Self {
        ScoringStrategy {
            kind: StrategyType::LeastAllocated,
            resources: default_resources(),
        }
    }
}

/// The default scored resources: cpu and memory, weight 1 each.
pub(crate) fn default_resources() -> Vec<ResourceSpec> {
    vec![
        ResourceSpec {
            name: CPU.into(),
            weight: 1,
        },
        ResourceSpec {
            name: MEMORY.into(),
            weight: 1,
        },
    ]
}

/// Plugin args (`NodeResourcesFitArgs`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Args {
    /// Extended resources the filter ignores.
    #[serde(default)]
    pub ignored_resources: Vec<String>,
    /// Scoring strategy.
    #[serde(default)]
    pub scoring_strategy: ScoringStrategy,
}

/// The NodeResourcesFit plugin.
pub(crate) struct NodeResourcesFit {
    args: Args,
    scored: Vec<(ResourceKind, i64)>,
}

fn resolve(resources: &[ResourceSpec]) -> Vec<(ResourceKind, i64)> {
    resources
        .iter()
        .map(|r| (ResourceKind::from_name(&r.name), r.weight))
        .collect()
}

/// Constructor for the registry.
pub(crate) fn new(args: &serde_json::Value, _s: &Services) -> Result<Arc<dyn Plugin>, ConfigError> {
    Ok(Arc::new(NodeResourcesFit::with_args(parse_args(
        NAME, args,
    )?)))
}

impl NodeResourcesFit {
    /// A plugin with the given args.
    pub(crate) fn with_args(args: Args) -> Self {
        let scored = resolve(&args.scoring_strategy.resources);
        NodeResourcesFit { args, scored }
    }
}

impl Plugin for NodeResourcesFit {
    fn name(&self) -> &'static str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(
                EventResource::Pod,
                ActionSet::DELETE.or(ActionSet::UPDATE_POD_SCALE_DOWN),
            ),
            ClusterEvent::new(
                EventResource::Node,
                ActionSet::ADD.or(ActionSet::UPDATE_NODE_ALLOCATABLE),
            ),
        ]
    }
    /// A node helps only if its allocatable could hold the pod at all; a pod event only
    /// if an assigned pod went away or gave back some of a resource the pod requests.
    fn queueing_hint(&self, pod: &PodInfo, objects: &EventObjects<'_>) -> QueueingHint {
        match objects {
            EventObjects::Node { new: Some(new), .. } => {
                let mut empty = NodeInfo::new(new.metadata.name.as_deref().unwrap_or(""));
                empty.set_node(Arc::new((*new).clone()));
                QueueingHint::from_bool(
                    insufficient_resources(pod, &empty, &self.args.ignored_resources).is_empty(),
                )
            }
            EventObjects::Pod {
                old: Some(deleted),
                new: None,
            } => QueueingHint::from_bool(
                deleted
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .is_some_and(|n| !n.is_empty()),
            ),
            EventObjects::Pod {
                old: Some(old),
                new: Some(new),
            } => {
                let before = PodInfo::new(Arc::new((*old).clone())).requests;
                let after = PodInfo::new(Arc::new((*new).clone())).requests;
                let want = &pod.requests;
                let freed = |w: i64, b: i64, a: i64| w > 0 && a < b;
                QueueingHint::from_bool(
                    freed(want.milli_cpu, before.milli_cpu, after.milli_cpu)
                        || freed(want.memory, before.memory, after.memory)
                        || freed(
                            want.ephemeral_storage,
                            before.ephemeral_storage,
                            after.ephemeral_storage,
                        )
                        || want.scalar.iter().any(|(k, w)| {
                            freed(
                                *w,
                                before.scalar.get(k).copied().unwrap_or(0),
                                after.scalar.get(k).copied().unwrap_or(0),
                            )
                        }),
                )
            }
            _ => QueueingHint::Queue,
        }
    }
    views!(filter, score);
}

/// One shortfall found by `insufficient_resources`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Insufficient {
    /// Reason text ("Insufficient cpu", "Too many pods").
    pub reason: Cow<'static, str>,
    /// True when even an empty node could not fit the request (preemption cannot help).
    pub unresolvable: bool,
}

/// Everything the node lacks for the pod.
pub(crate) fn insufficient_resources(
    pod: &PodInfo,
    node: &NodeInfo,
    ignored: &[String],
) -> Vec<Insufficient> {
    let mut out = Vec::new();
    let alloc = &node.allocatable;
    if node.pods.len() as i64 + 1 > alloc.allowed_pod_number {
        out.push(Insufficient {
            reason: "Too many pods".into(),
            unresolvable: false,
        });
    }
    let req = &pod.requests;
    if req.is_zero() {
        return out;
    }
    let used = &node.requested;
    let mut check = |reason: Cow<'static, str>, want: i64, have: i64, used: i64| {
        if want > 0 && want > have - used {
            out.push(Insufficient {
                reason,
                unresolvable: want > have,
            });
        }
    };
    check(
        Cow::Borrowed("Insufficient cpu"),
        req.milli_cpu,
        alloc.milli_cpu,
        used.milli_cpu,
    );
    check(
        Cow::Borrowed("Insufficient memory"),
        req.memory,
        alloc.memory,
        used.memory,
    );
    check(
        Cow::Borrowed("Insufficient ephemeral-storage"),
        req.ephemeral_storage,
        alloc.ephemeral_storage,
        used.ephemeral_storage,
    );
    for (name, want) in &req.scalar {
        if ignored.iter().any(|i| i == name) {
            continue;
        }
        let have = alloc.get(name);
        let in_use = used.get(name);
        if *want > 0 && *want > have - in_use {
            check(
                Cow::Owned(format!("Insufficient {name}")),
                *want,
                have,
                in_use,
            );
        }
    }
    out
}

impl FilterPlugin for NodeResourcesFit {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let missing = insufficient_resources(pod, node, &self.args.ignored_resources);
        if missing.is_empty() {
            return Status::success();
        }
        let code = if missing.iter().any(|m| m.unresolvable) {
            Code::UnschedulableAndUnresolvable
        } else {
            Code::Unschedulable
        };
        Status::with_reasons(code, missing.into_iter().map(|m| m.reason).collect())
    }
}

/// Requested (node plus pod, with scoring defaults for cpu/memory) and allocatable amount
/// of one resource.
pub(crate) fn requested_and_allocatable(
    pod: &PodInfo,
    node: &NodeInfo,
    resource: &ResourceKind,
    non_zero: bool,
) -> (i64, i64) {
    let alloc = node.allocatable.get_kind(resource);
    let req = match (resource, non_zero) {
        (ResourceKind::Cpu, true) => {
            node.non_zero_requested.milli_cpu + pod.non_zero_requests.milli_cpu
        }
        (ResourceKind::Memory, true) => {
            node.non_zero_requested.memory + pod.non_zero_requests.memory
        }
        _ => node.requested.get_kind(resource) + pod.requests.get_kind(resource),
    };
    (req, alloc)
}

impl ScorePlugin for NodeResourcesFit {
    fn score(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let (mut total, mut weights) = (0i64, 0i64);
        for (kind, weight) in &self.scored {
            let (req, alloc) = requested_and_allocatable(pod, node, kind, true);
            if alloc == 0 {
                continue;
            }
            let s = match self.args.scoring_strategy.kind {
                StrategyType::LeastAllocated => {
                    if req > alloc {
                        0
                    } else {
                        (alloc - req) * MAX_NODE_SCORE / alloc
                    }
                }
                StrategyType::MostAllocated => {
                    if req > alloc {
                        MAX_NODE_SCORE
                    } else {
                        req * MAX_NODE_SCORE / alloc
                    }
                }
            };
            total += s * weight;
            weights += weight;
        }
        (
            if weights == 0 { 0 } else { total / weights },
            Status::success(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::helpers::{filter_on, node_info_with};
    use crate::testing::{NodeBuilder, PodBuilder};

    fn node(existing: Vec<PodBuilder>) -> NodeInfo {
        node_info_with(
            NodeBuilder::new("n")
                .allocatable(&[
                    ("cpu", "2"),
                    ("memory", "4Gi"),
                    ("ephemeral-storage", "10Gi"),
                    ("pods", "3"),
                    ("example.com/gpu", "1"),
                ])
                .build(),
            existing.into_iter().map(|p| p.build()).collect(),
        )
    }

    #[test]
    fn filter_table() {
        let plugin = NodeResourcesFit::with_args(Args::default());
        let used = || {
            vec![
                PodBuilder::new("e1")
                    .node("n")
                    .container(&[("cpu", "1500m"), ("memory", "1Gi")]),
            ]
        };
        type Case = (
            &'static str,
            Vec<PodBuilder>,
            PodBuilder,
            Code,
            Vec<&'static str>,
        );
        let cases: Vec<Case> = vec![
            (
                "fits",
                used(),
                PodBuilder::new("p").container(&[("cpu", "500m")]),
                Code::Success,
                vec![],
            ),
            (
                "insufficient cpu",
                used(),
                PodBuilder::new("p").container(&[("cpu", "600m")]),
                Code::Unschedulable,
                vec!["Insufficient cpu"],
            ),
            (
                "cpu and memory both short",
                used(),
                PodBuilder::new("p").container(&[("cpu", "1"), ("memory", "3500Mi")]),
                Code::Unschedulable,
                vec!["Insufficient cpu", "Insufficient memory"],
            ),
            (
                "request larger than the node is unresolvable",
                vec![],
                PodBuilder::new("p").container(&[("cpu", "3")]),
                Code::UnschedulableAndUnresolvable,
                vec!["Insufficient cpu"],
            ),
            (
                "ephemeral storage",
                vec![],
                PodBuilder::new("p").container(&[("ephemeral-storage", "11Gi")]),
                Code::UnschedulableAndUnresolvable,
                vec!["Insufficient ephemeral-storage"],
            ),
            (
                "extended resource fits",
                vec![],
                PodBuilder::new("p").container(&[("example.com/gpu", "1")]),
                Code::Success,
                vec![],
            ),
            (
                "extended resource used up",
                vec![
                    PodBuilder::new("g")
                        .node("n")
                        .container(&[("example.com/gpu", "1")]),
                ],
                PodBuilder::new("p").container(&[("example.com/gpu", "1")]),
                Code::Unschedulable,
                vec!["Insufficient example.com/gpu"],
            ),
            (
                "unknown extended resource",
                vec![],
                PodBuilder::new("p").container(&[("example.com/fpga", "1")]),
                Code::UnschedulableAndUnresolvable,
                vec!["Insufficient example.com/fpga"],
            ),
            (
                "too many pods even with zero requests",
                vec![
                    PodBuilder::new("a").node("n"),
                    PodBuilder::new("b").node("n"),
                    PodBuilder::new("c").node("n"),
                ],
                PodBuilder::new("p"),
                Code::Unschedulable,
                vec!["Too many pods"],
            ),
            (
                "init container max rule",
                used(),
                PodBuilder::new("p")
                    .container(&[("cpu", "100m")])
                    .init_container(&[("cpu", "1")], false),
                Code::Unschedulable,
                vec!["Insufficient cpu"],
            ),
            (
                "sidecar counts toward running total",
                used(),
                PodBuilder::new("p")
                    .container(&[("cpu", "300m")])
                    .init_container(&[("cpu", "300m")], true),
                Code::Unschedulable,
                vec!["Insufficient cpu"],
            ),
            (
                "overhead counts",
                used(),
                PodBuilder::new("p")
                    .container(&[("cpu", "400m")])
                    .overhead(&[("cpu", "200m")]),
                Code::Unschedulable,
                vec!["Insufficient cpu"],
            ),
        ];
        for (name, existing, pod, code, reasons) in cases {
            let st = filter_on(&plugin, pod, &node(existing));
            assert_eq!(st.code(), code, "{name}: {st}");
            assert_eq!(
                st.reasons(),
                reasons.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                "{name}"
            );
        }
        let ignoring = NodeResourcesFit::with_args(Args {
            ignored_resources: vec!["example.com/fpga".into()],
            ..Default::default()
        });
        let pod = PodInfo::new(Arc::new(
            PodBuilder::new("p")
                .container(&[("example.com/fpga", "1")])
                .build(),
        ));
        assert!(
            ignoring
                .filter(&CycleState::new(), &pod, &node(vec![]))
                .is_success()
        );
    }

    #[test]
    fn least_allocated_score() {
        // Node: 4 cpu / 16Gi. Pod asks 1 cpu / 4Gi. Existing: 1 cpu / 4Gi.
        // cpu: (4000-2000)*100/4000 = 50; mem: (16-8)*100/16 = 50 → 50.
        let plugin = NodeResourcesFit::with_args(Args::default());
        let ni = node_info_with(
            NodeBuilder::new("n")
                .allocatable(&[("cpu", "4"), ("memory", "16Gi"), ("pods", "10")])
                .build(),
            vec![
                PodBuilder::new("e")
                    .node("n")
                    .container(&[("cpu", "1"), ("memory", "4Gi")])
                    .build(),
            ],
        );
        let pod = PodInfo::new(Arc::new(
            PodBuilder::new("p")
                .container(&[("cpu", "1"), ("memory", "4Gi")])
                .build(),
        ));
        assert_eq!(plugin.score(&CycleState::new(), &pod, &ni).0, 50);
        // Missing requests count as 100m / 200Mi for scoring: cpu (4000-100)*100/4000=97,
        // memory (16384-200)*100/16384=98 → 97.
        let empty = node_info_with(
            NodeBuilder::new("m")
                .allocatable(&[("cpu", "4"), ("memory", "16Gi"), ("pods", "10")])
                .build(),
            vec![],
        );
        let best_effort = PodInfo::new(Arc::new(PodBuilder::new("q").container(&[]).build()));
        assert_eq!(plugin.score(&CycleState::new(), &best_effort, &empty).0, 97);
        let most = NodeResourcesFit::with_args(Args {
            scoring_strategy: ScoringStrategy {
                kind: StrategyType::MostAllocated,
                resources: default_resources(),
            },
            ..Default::default()
        });
        assert_eq!(most.score(&CycleState::new(), &pod, &ni).0, 50);
        assert_eq!(most.score(&CycleState::new(), &best_effort, &empty).0, 1);
    }

    #[test]
    fn args_parse_from_config_json() {
        let args: Args = parse_args(
            NAME,
            &serde_json::json!({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 2}]}}),
        )
        .unwrap();
        assert_eq!(args.scoring_strategy.kind, StrategyType::MostAllocated);
        assert_eq!(
            args.scoring_strategy.resources,
            vec![ResourceSpec {
                name: "cpu".into(),
                weight: 2
            }]
        );
    }
}
