//! VolumeBinding: pods using PVCs. A bound PVC pins the pod to nodes matching its PV's
//! node affinity; an unbound PVC whose StorageClass uses `WaitForFirstConsumer` waits for
//! the scheduler's choice (nodes allowed by the class's `allowedTopologies` pass, and
//! PreBind annotates the claim with `volume.kubernetes.io/selected-node` for the
//! provisioner); an unbound PVC with `Immediate` binding makes the pod unschedulable
//! until the PV controller binds it.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, TopologySelectorTerm};

use super::impl_plugin;
#[cfg(test)]
use crate::binding::NoClaimAnnotator;
use crate::binding::{ClaimAnnotator, SELECTED_NODE_ANNOTATION};
use crate::cache::{NodeInfo, Snapshot};
use crate::framework::*;
use crate::listers::VolumeLister;
use crate::pod_info::PodInfo;
use crate::selectors::{CompiledNodeSelector, Labels};

/// Plugin name.
pub(crate) const NAME: &str = "VolumeBinding";
/// Rejection reason for a PV whose node affinity excludes the node, as upstream.
pub(crate) const REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
/// Rejection reason for unbound immediate claims, as upstream.
pub(crate) const REASON_UNBOUND_IMMEDIATE: &str =
    "pod has unbound immediate PersistentVolumeClaims";
/// Rejection reason when a delayed claim cannot be provisioned on the node, as upstream.
pub(crate) const REASON_BIND_CONFLICT: &str =
    "node(s) didn't find available persistent volumes to bind";
/// Rejection reason for a claim bound to a missing PV, as upstream.
pub(crate) const REASON_MISSING_PV: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
const STATE_KEY: &str = "PreFilterVolumeBinding";

/// The VolumeBinding plugin.
pub(crate) struct VolumeBinding {
    volumes: Arc<dyn VolumeLister>,
    claims: Arc<dyn ClaimAnnotator>,
}

/// Constructor for the registry.
pub(crate) fn new(_args: &serde_json::Value, s: &Services) -> Result<Arc<dyn Plugin>, ConfigError> {
    Ok(Arc::new(VolumeBinding {
        volumes: s.volumes.clone(),
        claims: s.claims.clone(),
    }))
}

impl VolumeBinding {
    #[cfg(test)]
    /// A plugin reading volumes from `volumes`.
    pub(crate) fn with(volumes: Arc<dyn VolumeLister>) -> Self {
        VolumeBinding {
            volumes,
            claims: Arc::new(NoClaimAnnotator),
        }
    }

    #[cfg(test)]
    /// A plugin that also annotates delayed claims through `claims`.
    pub(crate) fn with_annotator(
        volumes: Arc<dyn VolumeLister>,
        claims: Arc<dyn ClaimAnnotator>,
    ) -> Self {
        VolumeBinding { volumes, claims }
    }

    /// Claim names the pod's volumes refer to (ephemeral volumes use `<pod>-<volume>`).
    fn claim_names(pod: &PodInfo) -> Vec<String> {
        skiff_common::claims::claim_names(&pod.name, pod.spec())
    }

    /// The allowed topologies of an unbound claim's class, if it delays binding.
    fn delayed(&self, pvc: &PersistentVolumeClaim) -> Option<Vec<TopologySelectorTerm>> {
        let class = pvc
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_deref())
            .unwrap_or("");
        self.volumes
            .storage_class(class)
            .filter(|sc| sc.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"))
            .map(|sc| sc.allowed_topologies.clone().unwrap_or_default())
    }
}

/// True if the node satisfies one of the topology terms (no terms: any node).
fn topology_allows(terms: &[TopologySelectorTerm], labels: &Labels) -> bool {
    terms.is_empty()
        || terms.iter().any(|t| {
            t.match_label_expressions
                .iter()
                .flatten()
                .all(|r| labels.get(&r.key).is_some_and(|v| r.values.contains(v)))
        })
}

fn is_unbound(pvc: &PersistentVolumeClaim) -> bool {
    pvc.spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .is_none_or(|v| v.is_empty())
}

#[derive(Clone)]
struct State {
    /// Node affinity of each bound PV (None: PV has no affinity, any node).
    bound: Vec<Option<CompiledNodeSelector>>,
    /// Allowed topologies of each delayed (WaitForFirstConsumer) claim.
    delayed: Vec<Vec<TopologySelectorTerm>>,
    missing_pv: bool,
}

impl_plugin! {
    VolumeBinding = NAME;
    events: [
        ClusterEvent::added_or_updated(EventResource::PersistentVolumeClaim),
        ClusterEvent::added_or_updated(EventResource::PersistentVolume),
        ClusterEvent::added_or_updated(EventResource::StorageClass),
        ClusterEvent::NODE_ADD_OR_LABEL_CHANGE,
    ];
    views!(pre_filter, filter, pre_bind);
}

fn pv_affinity(pv: &PersistentVolume) -> Option<CompiledNodeSelector> {
    pv.spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(CompiledNodeSelector::compile)
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _s: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let claims = Self::claim_names(pod);
        if claims.is_empty() {
            return (None, Status::skip());
        }
        let mut st = State {
            bound: Vec::new(),
            delayed: Vec::new(),
            missing_pv: false,
        };
        let mut unbound_immediate = false;
        for name in claims {
            let Some(pvc) = self.volumes.pvc(&pod.namespace, &name) else {
                return (
                    None,
                    Status::unresolvable(format!("persistentvolumeclaim \"{name}\" not found")),
                );
            };
            if pvc.metadata.deletion_timestamp.is_some() {
                return (
                    None,
                    Status::unresolvable(format!(
                        "persistentvolumeclaim \"{name}\" is being deleted"
                    )),
                );
            }
            let spec = pvc.spec.as_ref();
            match spec
                .and_then(|s| s.volume_name.as_deref())
                .filter(|v| !v.is_empty())
            {
                Some(pv_name) => match self.volumes.pv(pv_name) {
                    Some(pv) => st.bound.push(pv_affinity(&pv)),
                    None => st.missing_pv = true,
                },
                None => match self.delayed(&pvc) {
                    Some(topologies) => st.delayed.push(topologies),
                    None => unbound_immediate = true,
                },
            }
        }
        if unbound_immediate {
            return (None, Status::unresolvable(REASON_UNBOUND_IMMEDIATE));
        }
        state.write(STATE_KEY, st);
        (None, Status::success())
    }
}

impl FilterPlugin for VolumeBinding {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(st) = state.read::<State>(STATE_KEY) else {
            return Status::success();
        };
        if st.missing_pv {
            return Status::unresolvable(REASON_MISSING_PV);
        }
        let ok = st.bound.iter().all(|a| {
            a.as_ref()
                .is_none_or(|sel| sel.matches(node.labels(), node.name()))
        });
        if !ok {
            return Status::unresolvable(REASON_NODE_CONFLICT);
        }
        if !st.delayed.iter().all(|t| topology_allows(t, node.labels())) {
            return Status::unresolvable(REASON_BIND_CONFLICT);
        }
        Status::success()
    }
}

#[async_trait]
impl PreBindPlugin for VolumeBinding {
    async fn pre_bind(&self, pod: &PodInfo, node: &str) -> Status {
        // The provisioner creates the volume on the chosen node; the kubelet waits for the
        // claim to bind before starting the pod.
        for name in Self::claim_names(pod) {
            let Some(pvc) = self.volumes.pvc(&pod.namespace, &name) else {
                continue;
            };
            let already = pvc
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(SELECTED_NODE_ANNOTATION));
            if !is_unbound(&pvc)
                || already.is_some_and(|n| n == node)
                || self.delayed(&pvc).is_none()
            {
                continue;
            }
            if let Err(e) = self.claims.select_node(&pod.namespace, &name, node).await {
                return Status::error(format!("annotating persistentvolumeclaim \"{name}\": {e}"));
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listers::MemoryListers;
    use crate::plugins::helpers::node_info_with;
    use crate::testing::{NodeBuilder, PodBuilder, node_req};
    use k8s_openapi::api::core::v1::{
        NodeSelector, NodeSelectorTerm, PersistentVolumeClaim, PersistentVolumeClaimSpec,
        PersistentVolumeSpec, VolumeNodeAffinity,
    };
    use k8s_openapi::api::storage::v1::StorageClass;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn meta(name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        }
    }

    fn listers() -> Arc<MemoryListers> {
        let l = MemoryListers::new();
        l.put_storage_class(StorageClass {
            metadata: meta("wait"),
            provisioner: "x".into(),
            volume_binding_mode: Some("WaitForFirstConsumer".into()),
            ..Default::default()
        });
        l.put_storage_class(StorageClass {
            metadata: meta("now"),
            provisioner: "x".into(),
            volume_binding_mode: Some("Immediate".into()),
            ..Default::default()
        });
        let pvc = |name: &str, class: &str, volume: Option<&str>| PersistentVolumeClaim {
            metadata: meta(name),
            spec: Some(PersistentVolumeClaimSpec {
                storage_class_name: Some(class.into()),
                volume_name: volume.map(String::from),
                ..Default::default()
            }),
            status: None,
        };
        l.put_pvc(pvc("bound", "now", Some("pv-zone-a")));
        l.put_pvc(pvc("bound-free", "now", Some("pv-any")));
        l.put_pvc(pvc("lazy", "wait", None));
        l.put_pvc(pvc("eager", "now", None));
        l.put_pvc(pvc("dangling", "now", Some("pv-gone")));
        l.put_pv(PersistentVolume {
            metadata: meta("pv-zone-a"),
            spec: Some(PersistentVolumeSpec {
                node_affinity: Some(VolumeNodeAffinity {
                    required: Some(NodeSelector {
                        node_selector_terms: vec![NodeSelectorTerm {
                            match_expressions: Some(vec![node_req("zone", "In", &["a"])]),
                            match_fields: None,
                        }],
                    }),
                }),
                ..Default::default()
            }),
            status: None,
        });
        l.put_pv(PersistentVolume {
            metadata: meta("pv-any"),
            spec: Some(PersistentVolumeSpec::default()),
            status: None,
        });
        Arc::new(l)
    }

    #[test]
    fn table() {
        let pl = VolumeBinding::with(listers());
        let zone_a = node_info_with(NodeBuilder::new("a1").label("zone", "a").build(), vec![]);
        let zone_b = node_info_with(NodeBuilder::new("b1").label("zone", "b").build(), vec![]);
        // (name, claim, prefilter outcome, zone a, zone b)
        let cases: Vec<(&str, Option<&str>, Code, Code, Code)> = vec![
            ("no volumes", None, Code::Skip, Code::Success, Code::Success),
            (
                "bound to zone a PV",
                Some("bound"),
                Code::Success,
                Code::Success,
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "bound PV without affinity",
                Some("bound-free"),
                Code::Success,
                Code::Success,
                Code::Success,
            ),
            (
                "unbound WaitForFirstConsumer",
                Some("lazy"),
                Code::Success,
                Code::Success,
                Code::Success,
            ),
            (
                "unbound Immediate",
                Some("eager"),
                Code::UnschedulableAndUnresolvable,
                Code::Success,
                Code::Success,
            ),
            (
                "missing claim",
                Some("nope"),
                Code::UnschedulableAndUnresolvable,
                Code::Success,
                Code::Success,
            ),
            (
                "bound to missing PV",
                Some("dangling"),
                Code::Success,
                Code::UnschedulableAndUnresolvable,
                Code::UnschedulableAndUnresolvable,
            ),
        ];
        for (name, claim, pre, a, b) in cases {
            let mut pb = PodBuilder::new("p");
            if let Some(c) = claim {
                pb = pb.pvc(c);
            }
            let pod = PodInfo::new(Arc::new(pb.build()));
            let mut state = CycleState::new();
            let (_, st) = pl.pre_filter(&mut state, &pod, &Snapshot::new());
            assert_eq!(st.code(), pre, "{name}: {st}");
            if !st.is_success() {
                if name == "unbound Immediate" {
                    assert_eq!(st.message(), REASON_UNBOUND_IMMEDIATE);
                }
                if name == "missing claim" {
                    assert_eq!(st.message(), "persistentvolumeclaim \"nope\" not found");
                }
                continue;
            }
            assert_eq!(pl.filter(&state, &pod, &zone_a).code(), a, "{name} zone a");
            assert_eq!(pl.filter(&state, &pod, &zone_b).code(), b, "{name} zone b");
        }
    }

    #[tokio::test]
    async fn delayed_binding_respects_allowed_topologies_and_annotates_claims() {
        use k8s_openapi::api::core::v1::{TopologySelectorLabelRequirement, TopologySelectorTerm};
        let l = listers();
        l.put_storage_class(StorageClass {
            metadata: meta("zonal"),
            provisioner: "x".into(),
            volume_binding_mode: Some("WaitForFirstConsumer".into()),
            allowed_topologies: Some(vec![TopologySelectorTerm {
                match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
                    key: "zone".into(),
                    values: vec!["a".into()],
                }]),
            }]),
            ..Default::default()
        });
        l.put_pvc(PersistentVolumeClaim {
            metadata: meta("zonal-claim"),
            spec: Some(PersistentVolumeClaimSpec {
                storage_class_name: Some("zonal".into()),
                ..Default::default()
            }),
            status: None,
        });
        let api = Arc::new(crate::testing::FakeApi::default());
        let pl = VolumeBinding::with_annotator(l, api.clone());
        let pod = PodInfo::new(Arc::new(
            PodBuilder::new("p").pvc("zonal-claim").pvc("bound").build(),
        ));
        let mut state = CycleState::new();
        assert!(
            pl.pre_filter(&mut state, &pod, &Snapshot::new())
                .1
                .is_success()
        );
        let zone_a = node_info_with(NodeBuilder::new("a1").label("zone", "a").build(), vec![]);
        let zone_b = node_info_with(NodeBuilder::new("b1").label("zone", "b").build(), vec![]);
        assert!(pl.filter(&state, &pod, &zone_a).is_success());
        let st = pl.filter(&state, &pod, &zone_b);
        assert_eq!(st.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(
            st.message(),
            REASON_NODE_CONFLICT,
            "the bound PV pins zone a first"
        );
        assert!(pl.pre_bind(&pod, "a1").await.is_success());
        assert_eq!(
            api.selected_nodes.lock().clone(),
            vec![("default/zonal-claim".to_string(), "a1".to_string())]
        );
        let only_delayed = PodInfo::new(Arc::new(PodBuilder::new("q").pvc("zonal-claim").build()));
        let mut state = CycleState::new();
        pl.pre_filter(&mut state, &only_delayed, &Snapshot::new());
        assert_eq!(
            pl.filter(&state, &only_delayed, &zone_b).message(),
            REASON_BIND_CONFLICT
        );
    }
}
