//! Builders for pods and nodes, used by unit tests, integration tests and benchmarks.
//!
//! They build real `k8s-openapi` objects so tests exercise the same parsing as production.

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerImage, ContainerPort, Node, NodeAffinity, NodeSelector,
    NodeSelectorRequirement, NodeSelectorTerm, NodeSpec, NodeStatus,
    PersistentVolumeClaimVolumeSource, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity,
    PodSchedulingGate, PodSpec, PreferredSchedulingTerm, ResourceRequirements, Taint, Toleration,
    TopologySpreadConstraint, Volume, WeightedPodAffinityTerm,
};
use k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::binding::full_name;
use crate::pod_info::resource_map;

use skiff_common::labels::from_pairs as labels;

pub mod perf;

/// A label selector with `matchLabels` only.
pub fn match_labels(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels(pairs)),
        match_expressions: None,
    }
}

/// Container resources with only `requests` set.
fn resource_requests(requests: &[(&str, &str)]) -> Option<ResourceRequirements> {
    Some(ResourceRequirements {
        requests: Some(resource_map(requests)),
        ..Default::default()
    })
}

/// A PodDisruptionBudget `default/name` over the pods matching `selector`, allowing
/// `disruptions_allowed` more disruptions.
pub fn pdb(name: &str, selector: &[(&str, &str)], disruptions_allowed: i32) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(match_labels(selector)),
            ..Default::default()
        }),
        status: Some(PodDisruptionBudgetStatus {
            disruptions_allowed,
            ..Default::default()
        }),
    }
}

/// A node selector requirement.
pub fn node_req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: if values.is_empty() {
            None
        } else {
            Some(values.iter().map(|s| s.to_string()).collect())
        },
    }
}

/// Builds a `Node`.
#[derive(Clone)]
pub struct NodeBuilder {
    node: Node,
}

impl NodeBuilder {
    /// A node with the given name, 4 CPUs, 16 GiB, 110 pods and the hostname label.
    pub fn new(name: &str) -> Self {
        let node = Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels(&[("kubernetes.io/hostname", name)])),
                ..Default::default()
            },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus {
                allocatable: Some(resource_map(&[
                    ("cpu", "4"),
                    ("memory", "16Gi"),
                    ("pods", "110"),
                ])),
                ..Default::default()
            }),
        };
        NodeBuilder { node }
    }

    /// Replaces allocatable resources.
    pub fn allocatable(mut self, pairs: &[(&str, &str)]) -> Self {
        self.node.status.get_or_insert_default().allocatable = Some(resource_map(pairs));
        self
    }

    /// Adds a label.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.node
            .metadata
            .labels
            .get_or_insert_default()
            .insert(k.into(), v.into());
        self
    }

    /// Adds a taint.
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        let spec = self.node.spec.get_or_insert_default();
        spec.taints.get_or_insert_default().push(Taint {
            key: key.into(),
            value: if value.is_empty() {
                None
            } else {
                Some(value.into())
            },
            effect: effect.into(),
            time_added: None,
        });
        self
    }

    /// Marks the node unschedulable (cordoned).
    pub fn unschedulable(mut self) -> Self {
        self.node.spec.get_or_insert_default().unschedulable = Some(true);
        self
    }

    /// Adds an image present on the node.
    pub fn image(mut self, name: &str, size: i64) -> Self {
        self.node
            .status
            .get_or_insert_default()
            .images
            .get_or_insert_default()
            .push(ContainerImage {
                names: Some(vec![name.into()]),
                size_bytes: Some(size),
            });
        self
    }

    /// The node.
    pub fn build(self) -> Node {
        self.node
    }
}

/// Builds a `Pod`.
#[derive(Clone)]
pub struct PodBuilder {
    pod: Pod,
}

impl PodBuilder {
    /// A pod in namespace "default" whose UID is its name.
    pub fn new(name: &str) -> Self {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PodSpec::default()),
            status: None,
        };
        PodBuilder { pod }
    }

    fn spec(&mut self) -> &mut PodSpec {
        self.pod.spec.get_or_insert_default()
    }

    fn affinity(&mut self) -> &mut Affinity {
        self.spec().affinity.get_or_insert_default()
    }

    /// Sets the namespace.
    pub fn namespace(mut self, ns: &str) -> Self {
        self.pod.metadata.namespace = Some(ns.into());
        self
    }

    /// Adds a label.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.pod
            .metadata
            .labels
            .get_or_insert_default()
            .insert(k.into(), v.into());
        self
    }

    /// Adds `c` as the next container, named `c0`, `c1`, ….
    fn with_container(mut self, c: Container) -> Self {
        let containers = &mut self.spec().containers;
        let name = format!("c{}", containers.len());
        containers.push(Container { name, ..c });
        self
    }

    /// Adds a container with the given requests.
    pub fn container(self, requests: &[(&str, &str)]) -> Self {
        self.with_container(Container {
            resources: resource_requests(requests),
            ..Default::default()
        })
    }

    /// Adds a container with an image.
    pub fn image(self, image: &str) -> Self {
        self.with_container(Container {
            image: Some(image.into()),
            ..Default::default()
        })
    }

    /// Adds an init container; `sidecar` makes it restartable (`restartPolicy: Always`).
    pub fn init_container(mut self, requests: &[(&str, &str)], sidecar: bool) -> Self {
        let inits = self.spec().init_containers.get_or_insert_default();
        let n = inits.len();
        inits.push(Container {
            name: format!("init{n}"),
            restart_policy: if sidecar { Some("Always".into()) } else { None },
            resources: resource_requests(requests),
            ..Default::default()
        });
        self
    }

    /// Sets pod overhead.
    pub fn overhead(mut self, pairs: &[(&str, &str)]) -> Self {
        self.spec().overhead = Some(resource_map(pairs));
        self
    }

    /// Adds a container binding a host port.
    pub fn host_port(self, port: i32, protocol: &str, ip: &str) -> Self {
        self.with_container(Container {
            ports: Some(vec![ContainerPort {
                container_port: port,
                host_port: Some(port),
                protocol: Some(protocol.into()),
                host_ip: if ip.is_empty() { None } else { Some(ip.into()) },
                name: None,
            }]),
            ..Default::default()
        })
    }

    /// Sets `spec.nodeName`.
    pub fn node(mut self, node: &str) -> Self {
        self.spec().node_name = Some(node.into());
        self
    }

    /// Sets `spec.priority`.
    pub fn priority(mut self, p: i32) -> Self {
        self.spec().priority = Some(p);
        self
    }

    /// Sets `spec.schedulerName`.
    pub fn scheduler_name(mut self, name: &str) -> Self {
        self.spec().scheduler_name = Some(name.into());
        self
    }

    /// Adds a scheduling gate.
    pub fn gate(mut self, name: &str) -> Self {
        self.spec()
            .scheduling_gates
            .get_or_insert_default()
            .push(PodSchedulingGate { name: name.into() });
        self
    }

    /// Adds a node selector label.
    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.spec()
            .node_selector
            .get_or_insert_default()
            .insert(k.into(), v.into());
        self
    }

    /// Adds a toleration.
    pub fn toleration(mut self, key: &str, op: &str, value: &str, effect: &str) -> Self {
        let opt = |s: &str| {
            if s.is_empty() {
                None
            } else {
                Some(s.to_string())
            }
        };
        self.spec()
            .tolerations
            .get_or_insert_default()
            .push(Toleration {
                key: opt(key),
                operator: opt(op),
                value: opt(value),
                effect: opt(effect),
                toleration_seconds: None,
            });
        self
    }

    /// Adds a required node affinity term.
    pub fn required_node_term(
        mut self,
        exprs: Vec<NodeSelectorRequirement>,
        fields: Vec<NodeSelectorRequirement>,
    ) -> Self {
        let na = self.affinity().node_affinity.get_or_insert_default();
        let sel = na
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(|| NodeSelector {
                node_selector_terms: vec![],
            });
        sel.node_selector_terms.push(NodeSelectorTerm {
            match_expressions: if exprs.is_empty() { None } else { Some(exprs) },
            match_fields: if fields.is_empty() {
                None
            } else {
                Some(fields)
            },
        });
        self
    }

    /// Adds a preferred node affinity term.
    pub fn preferred_node_term(mut self, weight: i32, exprs: Vec<NodeSelectorRequirement>) -> Self {
        let na: &mut NodeAffinity = self.affinity().node_affinity.get_or_insert_default();
        na.preferred_during_scheduling_ignored_during_execution
            .get_or_insert_default()
            .push(PreferredSchedulingTerm {
                weight,
                preference: NodeSelectorTerm {
                    match_expressions: Some(exprs),
                    match_fields: None,
                },
            });
        self
    }

    fn term(selector: &[(&str, &str)], topology_key: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: Some(match_labels(selector)),
            topology_key: topology_key.into(),
            ..Default::default()
        }
    }

    /// Adds a term to the pod's affinity (`anti` false) or anti-affinity (`anti` true):
    /// required without a weight, preferred with one. The two lists have the same
    /// fields, so the four builders below share this one body.
    fn pod_term(
        mut self,
        anti: bool,
        weight: Option<i32>,
        selector: &[(&str, &str)],
        topology_key: &str,
    ) -> Self {
        let term = Self::term(selector, topology_key);
        let affinity = self.affinity();
        let (required, preferred) = if anti {
            let pa: &mut PodAntiAffinity = affinity.pod_anti_affinity.get_or_insert_default();
            (
                &mut pa.required_during_scheduling_ignored_during_execution,
                &mut pa.preferred_during_scheduling_ignored_during_execution,
            )
        } else {
            let pa: &mut PodAffinity = affinity.pod_affinity.get_or_insert_default();
            (
                &mut pa.required_during_scheduling_ignored_during_execution,
                &mut pa.preferred_during_scheduling_ignored_during_execution,
            )
        };
        match weight {
            None => required.get_or_insert_default().push(term),
            Some(weight) => preferred
                .get_or_insert_default()
                .push(WeightedPodAffinityTerm {
                    weight,
                    pod_affinity_term: term,
                }),
        }
        self
    }

    /// Adds a required pod affinity term.
    pub fn pod_affinity(self, selector: &[(&str, &str)], topology_key: &str) -> Self {
        self.pod_term(false, None, selector, topology_key)
    }

    /// Adds a required pod anti-affinity term.
    pub fn pod_anti_affinity(self, selector: &[(&str, &str)], topology_key: &str) -> Self {
        self.pod_term(true, None, selector, topology_key)
    }

    /// Adds a preferred pod affinity term.
    pub fn preferred_pod_affinity(
        self,
        weight: i32,
        selector: &[(&str, &str)],
        topology_key: &str,
    ) -> Self {
        self.pod_term(false, Some(weight), selector, topology_key)
    }

    /// Adds a preferred pod anti-affinity term.
    pub fn preferred_pod_anti_affinity(
        self,
        weight: i32,
        selector: &[(&str, &str)],
        topology_key: &str,
    ) -> Self {
        self.pod_term(true, Some(weight), selector, topology_key)
    }

    /// Adds a topology spread constraint.
    pub fn spread(
        self,
        max_skew: i32,
        topology_key: &str,
        when: &str,
        selector: &[(&str, &str)],
    ) -> Self {
        self.spread_constraint(TopologySpreadConstraint {
            max_skew,
            topology_key: topology_key.into(),
            when_unsatisfiable: when.into(),
            label_selector: Some(match_labels(selector)),
            ..Default::default()
        })
    }

    /// Adds a fully specified topology spread constraint.
    pub fn spread_constraint(mut self, c: TopologySpreadConstraint) -> Self {
        self.spec()
            .topology_spread_constraints
            .get_or_insert_default()
            .push(c);
        self
    }

    /// Adds a volume backed by a PVC.
    pub fn pvc(mut self, claim: &str) -> Self {
        let n = self.spec().volumes.as_ref().map_or(0, |v| v.len());
        self.spec().volumes.get_or_insert_default().push(Volume {
            name: format!("v{n}"),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.into(),
                read_only: None,
            }),
            ..Default::default()
        });
        self
    }

    /// Sets `spec.preemptionPolicy`.
    pub fn preemption_policy(mut self, policy: &str) -> Self {
        self.spec().preemption_policy = Some(policy.into());
        self
    }

    /// Sets `status.nominatedNodeName`.
    pub fn nominated(mut self, node: &str) -> Self {
        self.pod.status.get_or_insert_default().nominated_node_name = Some(node.into());
        self
    }

    /// Sets the start time (seconds since the epoch), used by preemption tie-breaks.
    pub fn start_time(mut self, secs: i64) -> Self {
        let ts = k8s_openapi::jiff::Timestamp::from_second(secs).unwrap_or_default();
        self.pod.status.get_or_insert_default().start_time =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts));
        self
    }

    /// The pod.
    pub fn build(self) -> Pod {
        self.pod
    }
}

/// An in-memory stand-in for the API: records binds, reports and preemption calls, and
/// can be told to fail the next binds.
#[derive(Default)]
pub struct FakeApi {
    /// (pod namespace/name, node) per successful bind.
    pub binds: parking_lot::Mutex<Vec<(String, String)>>,
    /// (pod namespace/name, outcome) per report.
    pub reports: parking_lot::Mutex<Vec<(String, crate::binding::Outcome)>>,
    /// Deleted victims (namespace/name).
    pub deleted: parking_lot::Mutex<Vec<String>>,
    /// Pods whose nomination was cleared.
    pub cleared: parking_lot::Mutex<Vec<String>>,
    /// Number of upcoming binds to fail.
    pub fail_binds: std::sync::atomic::AtomicUsize,
    /// (namespace/claim, node) per selected-node annotation.
    pub selected_nodes: parking_lot::Mutex<Vec<(String, String)>>,
}

#[async_trait::async_trait]
impl crate::binding::ClaimAnnotator for FakeApi {
    async fn select_node(
        &self,
        namespace: &str,
        claim: &str,
        node: &str,
    ) -> Result<(), crate::binding::ApiError> {
        self.selected_nodes
            .lock()
            .push((format!("{namespace}/{claim}"), node.to_string()));
        Ok(())
    }
}

#[async_trait::async_trait]
impl crate::binding::Binder for FakeApi {
    async fn bind(&self, pod: &Pod, node: &str) -> Result<(), crate::binding::ApiError> {
        use std::sync::atomic::Ordering;
        if self.fail_binds.load(Ordering::SeqCst) > 0 {
            self.fail_binds.fetch_sub(1, Ordering::SeqCst);
            return Err(crate::binding::ApiError::Other(
                "injected bind failure".into(),
            ));
        }
        self.binds.lock().push((full_name(pod), node.to_string()));
        Ok(())
    }
}

#[async_trait::async_trait]
impl crate::binding::StatusReporter for FakeApi {
    async fn report(
        &self,
        pod: &Pod,
        outcome: &crate::binding::Outcome,
    ) -> Result<(), crate::binding::ApiError> {
        self.reports.lock().push((full_name(pod), outcome.clone()));
        Ok(())
    }
}

#[async_trait::async_trait]
impl crate::binding::Preemptor for FakeApi {
    async fn delete_victim(
        &self,
        victim: &Pod,
        _preemptor: &Pod,
    ) -> Result<(), crate::binding::ApiError> {
        self.deleted.lock().push(full_name(victim));
        Ok(())
    }
    async fn clear_nomination(&self, pod: &Pod) -> Result<(), crate::binding::ApiError> {
        self.cleared.lock().push(full_name(pod));
        Ok(())
    }
}

/// A scheduler wired to a `FakeApi`, in-memory listers and a fake clock.
pub struct TestCluster {
    /// The scheduler.
    pub scheduler: std::sync::Arc<crate::scheduler::Scheduler>,
    /// The fake API.
    pub api: std::sync::Arc<FakeApi>,
    /// Volume/PDB/namespace listers.
    pub listers: std::sync::Arc<crate::listers::MemoryListers>,
    /// The clock.
    pub clock: crate::clock::FakeClock,
}

impl TestCluster {
    /// A cluster with the given configuration.
    pub fn with_config(
        cfg: &crate::framework::SchedulerConfig,
    ) -> Result<Self, crate::framework::ConfigError> {
        let api = std::sync::Arc::new(FakeApi::default());
        let listers = std::sync::Arc::new(crate::listers::MemoryListers::new());
        let clock = crate::clock::FakeClock::new();
        let mut services = crate::framework::Services::in_memory(listers.clone(), api.clone());
        services.claims = api.clone();
        let scheduler = crate::scheduler::Scheduler::new(
            cfg,
            &crate::plugins::in_tree_registry(),
            services,
            api.clone(),
            api.clone(),
            std::sync::Arc::new(clock.clone()),
        )?;
        Ok(TestCluster {
            scheduler: std::sync::Arc::new(scheduler),
            api,
            listers,
            clock,
        })
    }

    /// A cluster with the default configuration.
    pub fn new() -> Self {
        Self::with_config(&crate::framework::SchedulerConfig::default())
            .expect("default config is valid")
    }

    /// Adds nodes.
    pub fn add_nodes(&self, nodes: Vec<Node>) {
        for n in nodes {
            self.scheduler.on_node_add(std::sync::Arc::new(n));
        }
    }

    /// Adds a pod (bound pods go to the cache, pending ones to the queue).
    pub fn add_pod(&self, pod: Pod) {
        self.scheduler.on_pod_add(std::sync::Arc::new(pod));
    }

    /// Runs scheduling cycles until the active queue is empty, binding each assumed pod
    /// and confirming it through the informer path as the API would. Returns the node per
    /// scheduled pod name, and the failures.
    pub async fn schedule_all(&self) -> (Vec<(String, String)>, Vec<crate::scheduler::Failure>) {
        let mut placed = Vec::new();
        let mut failed = Vec::new();
        while let Some(outcome) = self.scheduler.schedule_one() {
            match outcome {
                crate::scheduler::CycleOutcome::Bind(job) => {
                    let pod = job.pod.clone();
                    let node = job.node.clone();
                    match self.scheduler.bind(*job).await {
                        Ok(()) => {
                            let mut bound = (*pod.pod).clone();
                            bound.spec.get_or_insert_default().node_name = Some(node.clone());
                            self.scheduler
                                .on_pod_update(&pod.pod, std::sync::Arc::new(bound));
                            placed.push((pod.name.clone(), node));
                        }
                        Err(f) => failed.push(f),
                    }
                }
                crate::scheduler::CycleOutcome::Failed(f) => {
                    self.scheduler.report_failure(&f).await;
                    failed.push(f);
                }
                crate::scheduler::CycleOutcome::Skipped => {}
            }
        }
        (placed, failed)
    }

    /// The benchmarks' loop: schedules until `expect` pods are bound (or 50
    /// cycles in a row find nothing to do), confirming binds through the
    /// informer path, deleting preemption victims as the API would, and
    /// advancing the fake clock past backoffs when the queue runs dry.
    /// Returns how many pods were bound.
    pub fn drive_until(&self, rt: &tokio::runtime::Runtime, expect: usize) -> usize {
        let mut scheduled = 0;
        let mut idle = 0;
        while scheduled < expect && idle < 50 {
            let Some(outcome) = self.scheduler.schedule_one() else {
                idle += 1;
                self.clock.advance(std::time::Duration::from_secs(1));
                self.scheduler.flush();
                continue;
            };
            idle = 0;
            match outcome {
                crate::scheduler::CycleOutcome::Bind(job) => {
                    let pod = job.pod.clone();
                    let node = job.node.clone();
                    if rt.block_on(self.scheduler.bind(*job)).is_ok() {
                        let mut bound = (*pod.pod).clone();
                        bound.spec.get_or_insert_default().node_name = Some(node);
                        self.scheduler
                            .on_pod_update(&pod.pod, std::sync::Arc::new(bound));
                        scheduled += 1;
                    }
                }
                crate::scheduler::CycleOutcome::Failed(f) => {
                    for v in &f.preemption.victims {
                        self.scheduler.on_pod_delete(&v.pod);
                    }
                }
                crate::scheduler::CycleOutcome::Skipped => {}
            }
        }
        scheduled
    }
}

impl Default for TestCluster {
    fn default() -> Self {
        Self::new()
    }
}
