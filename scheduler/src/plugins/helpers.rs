//! Pieces several plugins share: toleration matching, the pod's node requirements and
//! upstream's default score normalization.

#[cfg(test)]
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Taint, Toleration};

use crate::cache::NodeInfo;
use crate::pod_info::PodInfo;
use crate::selectors::{CompiledNodeSelector, Labels};

pub(crate) use skiff_common::placement::tolerates;

/// The taint effects that keep a pod off a node (PreferNoSchedule only lowers a
/// score): the TaintToleration filter, its queueing hint and PodTopologySpread's
/// `nodeTaintsPolicy: Honor` must all judge by the same ones, as upstream's do.
pub(crate) const FILTERING_EFFECTS: &[&str] = &["NoSchedule", "NoExecute"];

/// The first taint with one of `effects` that no toleration tolerates.
pub(crate) fn first_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    effects: &[&str],
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| effects.contains(&t.effect.as_str()))
        .find(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// The pod's hard node requirements: `nodeSelector` and required node affinity.
#[derive(Debug, Clone)]
pub(crate) struct RequiredNodeAffinity {
    selector: Option<Labels>,
    affinity: Option<CompiledNodeSelector>,
}

impl RequiredNodeAffinity {
    /// Compiles the pod's requirements.
    pub(crate) fn of(pod: &PodInfo) -> Self {
        let spec = pod.spec();
        let selector = spec.node_selector.clone().filter(|s| !s.is_empty());
        let affinity = skiff_common::placement::required_node_affinity(spec)
            .map(CompiledNodeSelector::compile);
        RequiredNodeAffinity { selector, affinity }
    }

    /// True when the pod has neither a node selector nor required node affinity.
    pub(crate) fn is_empty(&self) -> bool {
        self.selector.is_none() && self.affinity.is_none()
    }

    /// True if the node satisfies both.
    pub(crate) fn matches(&self, labels: &Labels, node_name: &str) -> bool {
        if let Some(sel) = &self.selector
            && !sel.iter().all(|(k, v)| labels.get(k) == Some(v))
        {
            return false;
        }
        self.affinity
            .as_ref()
            .is_none_or(|a| a.matches(labels, node_name))
    }

    /// True if the node info's node satisfies both.
    pub(crate) fn matches_node(&self, node: &NodeInfo) -> bool {
        self.matches(node.labels(), node.name())
    }

    /// Node names the required affinity restricts the pod to, if it does.
    pub(crate) fn name_restriction(&self) -> Option<Vec<String>> {
        self.affinity.as_ref().and_then(|a| a.name_restriction())
    }
}

#[cfg(test)]
/// Builds a `NodeInfo` from a node and pods (tests and simulations).
pub(crate) fn node_info_with(
    node: k8s_openapi::api::core::v1::Node,
    pods: Vec<k8s_openapi::api::core::v1::Pod>,
) -> NodeInfo {
    let name = node.metadata.name.clone().unwrap_or_default();
    let mut ni = NodeInfo::new(&name);
    ni.set_node(Arc::new(node));
    for p in pods {
        ni.add_pod(Arc::new(PodInfo::new(Arc::new(p))));
    }
    ni
}

#[cfg(test)]
/// `plugin`'s verdict on `pod` for `node` with an empty cycle state: how the table
/// tests of the filters that need no PreFilter state run each case.
pub(crate) fn filter_on(
    plugin: &impl crate::framework::FilterPlugin,
    pod: crate::testing::PodBuilder,
    node: &NodeInfo,
) -> crate::framework::Status {
    plugin.filter(
        &crate::framework::CycleState::new(),
        &PodInfo::new(Arc::new(pod.build())),
        node,
    )
}

#[cfg(test)]
/// Each node's raw score from `plugin`, once its PreScore has written `state`: what
/// the framework hands to `normalize`, for tests that check both steps.
pub(crate) fn raw_scores<'a, N: std::borrow::Borrow<NodeInfo>>(
    plugin: &impl crate::framework::ScorePlugin,
    state: &crate::framework::CycleState,
    pod: &PodInfo,
    nodes: &'a [N],
) -> Vec<crate::framework::NodeScore<'a>> {
    nodes
        .iter()
        .map(|n| crate::framework::NodeScore {
            name: n.borrow().name(),
            score: plugin.score(state, pod, n.borrow()).0,
        })
        .collect()
}
