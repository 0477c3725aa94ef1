//! `PodInfo`: a pod plus everything the scheduler derives from it, computed once.
//!
//! Filters and scores run per node, thousands of times per pod; they read these
//! precomputed fields (resource requests, host ports, compiled affinity terms) instead of
//! walking the pod spec again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Pod, PodAffinityTerm, PodSpec, PodStatus, Toleration,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use skiff_common::containers;

use crate::resource::{DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, Resource};
use crate::selectors::{Labels, Selector, labels_of};

/// The cache and queue key of a pod: its UID, or `namespace/name` when it has none.
pub(crate) type PodKey = String;

/// One host port a container asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    /// Host IP; "0.0.0.0" when unset.
    pub ip: String,
    /// Protocol; "TCP" when unset.
    pub protocol: String,
    /// The host port number.
    pub port: i32,
}

/// The key of a pod without building its `PodInfo`.
pub(crate) fn pod_key(pod: &Pod) -> PodKey {
    match pod.metadata.uid.as_deref().filter(|u| !u.is_empty()) {
        Some(uid) => uid.to_string(),
        None => format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or("")
        ),
    }
}

/// A compiled pod (anti-)affinity term.
#[derive(Debug, Clone)]
pub struct AffinityTerm {
    /// Namespaces the term selects pods from (explicit list or the pod's own namespace).
    pub namespaces: BTreeSet<String>,
    /// Namespace label selector; `Some(everything)` for `{}`.
    pub namespace_selector: Option<Selector>,
    /// Pod label selector (with match/mismatch label keys folded in).
    pub selector: Selector,
    /// Node label whose value defines the topology domain.
    pub topology_key: String,
}

impl AffinityTerm {
    fn compile(term: &PodAffinityTerm, pod_ns: &str, pod_labels: &Labels) -> Self {
        let mut selector = Selector::from_optional(term.label_selector.as_ref());
        if term.label_selector.is_some() {
            for key in term.match_label_keys.iter().flatten() {
                if let Some(v) = pod_labels.get(key) {
                    selector.require_equal(key, v);
                }
            }
            for key in term.mismatch_label_keys.iter().flatten() {
                if let Some(v) = pod_labels.get(key) {
                    selector.require_not_equal(key, v);
                }
            }
        }
        let mut namespaces: BTreeSet<String> = term.namespaces.iter().flatten().cloned().collect();
        let namespace_selector = term
            .namespace_selector
            .as_ref()
            .map(Selector::from_label_selector);
        if namespaces.is_empty() && namespace_selector.is_none() {
            namespaces.insert(pod_ns.to_string());
        }
        AffinityTerm {
            namespaces,
            namespace_selector,
            selector,
            topology_key: term.topology_key.clone(),
        }
    }

    /// True if `pod` is selected by this term. `ns_labels` looks up a namespace's labels for
    /// terms with a namespace selector.
    pub fn matches(&self, pod: &PodInfo, ns_labels: &dyn Fn(&str) -> Option<Labels>) -> bool {
        let ns_ok = self.namespaces.contains(&pod.namespace)
            || self.namespace_selector.as_ref().is_some_and(|sel| {
                if sel.is_nothing() {
                    return false;
                }
                match ns_labels(&pod.namespace) {
                    Some(l) => sel.matches(&l),
                    // Unknown namespace: only an empty selector ({}) can match it.
                    None => sel.matches(&Labels::new()),
                }
            });
        ns_ok && self.selector.matches(pod.labels())
    }
}

/// A weighted (preferred) affinity term.
#[derive(Debug, Clone)]
pub struct WeightedAffinityTerm {
    /// The term.
    pub term: AffinityTerm,
    /// Its weight (1-100).
    pub weight: i64,
}

/// The compiled terms of a pod's `podAffinity` or of its `podAntiAffinity`: both
/// have the same two lists, compiled the same way.
#[derive(Debug, Clone, Default)]
pub struct AffinityTerms {
    /// Required terms (`requiredDuringSchedulingIgnoredDuringExecution`).
    pub required: Vec<AffinityTerm>,
    /// Preferred terms (`preferredDuringSchedulingIgnoredDuringExecution`).
    pub preferred: Vec<WeightedAffinityTerm>,
}

impl AffinityTerms {
    /// Compiles the required and preferred terms of a pod in `pod_ns` with `pod_labels`.
    fn compile(
        required: Option<&Vec<PodAffinityTerm>>,
        preferred: Option<&Vec<WeightedPodAffinityTerm>>,
        pod_ns: &str,
        pod_labels: &Labels,
    ) -> Self {
        AffinityTerms {
            required: required
                .into_iter()
                .flatten()
                .map(|t| AffinityTerm::compile(t, pod_ns, pod_labels))
                .collect(),
            preferred: preferred
                .into_iter()
                .flatten()
                .map(|w| WeightedAffinityTerm {
                    term: AffinityTerm::compile(&w.pod_affinity_term, pod_ns, pod_labels),
                    weight: i64::from(w.weight),
                })
                .collect(),
        }
    }

    /// True if there is no term at all.
    pub fn is_empty(&self) -> bool {
        self.required.is_empty() && self.preferred.is_empty()
    }
}

/// A pod with its derived scheduling data. Shared as `Arc<PodInfo>` between queue, cache
/// and snapshot; never mutated after construction.
#[derive(Debug, Clone)]
pub struct PodInfo {
    /// The API object.
    pub pod: Arc<Pod>,
    /// Cache/queue key.
    pub key: PodKey,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.priority`, 0 when unset.
    pub priority: i32,
    /// Effective requests (init-container and sidecar rules, plus overhead).
    pub requests: Resource,
    /// CPU and memory requests with scoring defaults for containers that request
    /// none; only those two are set, as upstream's non-zero requests.
    pub non_zero_requests: Resource,
    /// Host ports the pod's containers bind.
    pub host_ports: Vec<HostPort>,
    /// Pod affinity terms.
    pub affinity: AffinityTerms,
    /// Pod anti-affinity terms.
    pub anti_affinity: AffinityTerms,
    /// Node chosen by the scheduler while the binding is in flight; overrides
    /// `spec.nodeName` so assuming a pod never copies the API object.
    pub assumed_node: Option<String>,
}

static EMPTY_SPEC: std::sync::LazyLock<PodSpec> = std::sync::LazyLock::new(PodSpec::default);

impl PodInfo {
    /// Derives the scheduling data of a pod.
    pub fn new(pod: Arc<Pod>) -> Self {
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let key = pod_key(&pod);
        let spec = pod.spec.as_ref().unwrap_or(&EMPTY_SPEC);
        let (requests, non_zero) = pod_requests(spec, pod.status.as_ref());
        let host_ports = host_ports(spec);
        let labels = labels_of(&pod.metadata.labels).clone();
        let aff = spec.affinity.as_ref();
        let pa = aff.and_then(|a| a.pod_affinity.as_ref());
        let paa = aff.and_then(|a| a.pod_anti_affinity.as_ref());
        // `PodAffinity` and `PodAntiAffinity` are two types with the same two lists.
        let compile = |lists: Option<(&Option<_>, &Option<_>)>| {
            let (required, preferred) = lists.unzip();
            AffinityTerms::compile(
                required.and_then(Option::as_ref),
                preferred.and_then(Option::as_ref),
                &namespace,
                &labels,
            )
        };
        PodInfo {
            affinity: compile(pa.map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            })),
            anti_affinity: compile(paa.map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            })),
            priority: spec.priority.unwrap_or(0),
            assumed_node: None,
            non_zero_requests: non_zero,
            requests,
            host_ports,
            key,
            namespace,
            name,
            pod,
        }
    }

    /// The pod's spec (an empty spec when absent).
    pub fn spec(&self) -> &PodSpec {
        self.pod.spec.as_ref().unwrap_or(&EMPTY_SPEC)
    }

    /// The pod's labels.
    pub fn labels(&self) -> &Labels {
        labels_of(&self.pod.metadata.labels)
    }

    /// The pod's tolerations.
    pub fn tolerations(&self) -> &[Toleration] {
        self.spec().tolerations.as_deref().unwrap_or(&[])
    }

    /// The node the pod is on: the assumed node, else `spec.nodeName`.
    pub fn node_name(&self) -> Option<&str> {
        self.assumed_node
            .as_deref()
            .or_else(|| self.spec().node_name.as_deref().filter(|n| !n.is_empty()))
    }

    /// The node preemption nominated the pod to (`status.nominatedNodeName`), if set
    /// and not empty.
    pub fn nominated_node_name(&self) -> Option<&str> {
        self.pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            .filter(|n| !n.is_empty())
    }

    /// A copy of this pod assumed onto `node`.
    pub fn assumed_on(&self, node: &str) -> PodInfo {
        PodInfo {
            assumed_node: Some(node.to_string()),
            ..self.clone()
        }
    }

    /// True if the pod has any pod affinity or anti-affinity term.
    pub fn has_affinity(&self) -> bool {
        !self.affinity.is_empty() || !self.anti_affinity.is_empty()
    }

    /// True if the pod is being deleted.
    pub fn is_terminating(&self) -> bool {
        self.pod.metadata.deletion_timestamp.is_some()
    }

    /// `namespace/name`, for messages.
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The pod's start time (or creation time) in seconds, for preemption tie-breaking.
    pub fn start_time_secs(&self) -> i64 {
        let t = self
            .pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .or(self.pod.metadata.creation_timestamp.as_ref());
        t.map_or(i64::MAX, |t| t.0.as_second())
    }
}

impl PartialEq for PodInfo {
    /// Pods are identified by key; derived data follows from the object.
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for PodInfo {}

/// What a pod's status says of its containers' resources while an
/// in-place resize may have the node run them otherwise than the spec says.
#[derive(Default)]
struct ResizeView<'a> {
    /// Statuses (regular and init) that report the resources they run with.
    statuses: HashMap<&'a str, &'a ContainerStatus>,
    /// The node said the resize cannot be done (`PodResizePending` with
    /// reason `Infeasible`).
    infeasible: bool,
}

impl<'a> ResizeView<'a> {
    fn of(status: Option<&'a PodStatus>) -> Self {
        let Some(status) = status else {
            return Self::default();
        };
        let statuses = (status.container_statuses.iter().flatten())
            .chain(status.init_container_statuses.iter().flatten())
            .filter(|s| s.resources.is_some())
            .map(|s| (s.name.as_str(), s))
            .collect();
        let infeasible = (status.conditions.iter().flatten())
            .find(|c| c.type_ == "PodResizePending")
            .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"));
        Self {
            statuses,
            infeasible,
        }
    }

    /// The request lists that count for `c`, as upstream's resource helpers
    /// count them with the status's resources: the spec's, and once the
    /// node reports what the container runs with, also that and what it
    /// allocated; while the resize is infeasible, not the spec's.
    fn request_lists(&self, c: &'a Container) -> Vec<&'a BTreeMap<String, Quantity>> {
        let spec = c.resources.as_ref().and_then(|r| r.requests.as_ref());
        let Some(status) = self.statuses.get(c.name.as_str()) else {
            return spec.into_iter().collect();
        };
        let running = status.resources.as_ref().and_then(|r| r.requests.as_ref());
        let spec = spec.filter(|_| !self.infeasible);
        [spec, running, status.allocated_resources.as_ref()]
            .into_iter()
            .flatten()
            .collect()
    }
}

fn container_requests(lists: &[&BTreeMap<String, Quantity>]) -> (Resource, i64, i64) {
    let mut r = Resource::default();
    for list in lists {
        r.set_max(&Resource::from_map(list));
    }
    let has = |name: &str| lists.iter().any(|m| m.contains_key(name));
    let cpu = if has("cpu") {
        r.milli_cpu
    } else {
        DEFAULT_MILLI_CPU_REQUEST
    };
    let mem = if has("memory") {
        r.memory
    } else {
        DEFAULT_MEMORY_REQUEST
    };
    (r, cpu, mem)
}

/// Effective pod requests (each container's as [`ResizeView::request_lists`]
/// counts them): regular containers and sidecars run together; each ordinary
/// init container runs alone next to the sidecars started before it; the pod needs the
/// maximum of both, plus overhead. Returns the requests and the non-zero requests (CPU
/// and memory only, with scoring defaults for containers that request none).
fn pod_requests(spec: &PodSpec, status: Option<&PodStatus>) -> (Resource, Resource) {
    let resize = ResizeView::of(status);
    let mut reqs = Resource::default();
    let (mut nz_cpu, mut nz_mem) = (0i64, 0i64);
    for c in &spec.containers {
        let (r, cpu, mem) = container_requests(&resize.request_lists(c));
        reqs.add(&r);
        nz_cpu += cpu;
        nz_mem += mem;
    }
    let mut sidecars = Resource::default();
    let (mut sc_cpu, mut sc_mem) = (0i64, 0i64);
    let mut init_max = Resource::default();
    let (mut init_cpu, mut init_mem) = (0i64, 0i64);
    for c in spec.init_containers.iter().flatten() {
        let restartable = containers::is_sidecar(c);
        // Only sidecars are resized; an ordinary init container's spec holds.
        let lists = if restartable {
            resize.request_lists(c)
        } else {
            ResizeView::default().request_lists(c)
        };
        let (r, cpu, mem) = container_requests(&lists);
        let (during, d_cpu, d_mem) = if restartable {
            reqs.add(&r);
            nz_cpu += cpu;
            nz_mem += mem;
            sidecars.add(&r);
            sc_cpu += cpu;
            sc_mem += mem;
            (sidecars.clone(), sc_cpu, sc_mem)
        } else {
            let mut t = r;
            t.add(&sidecars);
            (t, cpu + sc_cpu, mem + sc_mem)
        };
        init_max.set_max(&during);
        init_cpu = init_cpu.max(d_cpu);
        init_mem = init_mem.max(d_mem);
    }
    reqs.set_max(&init_max);
    nz_cpu = nz_cpu.max(init_cpu);
    nz_mem = nz_mem.max(init_mem);
    if let Some(overhead) = &spec.overhead {
        let o = Resource::from_map(overhead);
        reqs.add(&o);
        nz_cpu += o.milli_cpu;
        nz_mem += o.memory;
    }
    let non_zero = Resource {
        milli_cpu: nz_cpu,
        memory: nz_mem,
        ..Resource::default()
    };
    (reqs, non_zero)
}

fn host_ports(spec: &PodSpec) -> Vec<HostPort> {
    let mut out: Vec<HostPort> = containers::running(spec)
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.unwrap_or(0) > 0)
        .map(|p| HostPort {
            ip: p
                .host_ip
                .clone()
                .filter(|ip| !ip.is_empty())
                .unwrap_or_else(|| "0.0.0.0".to_string()),
            protocol: p
                .protocol
                .clone()
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| "TCP".to_string()),
            port: p.host_port.unwrap_or(0),
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Builds a map of resource requests for tests and fixtures.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn resource_map(
    pairs: &[(&str, &str)],
) -> std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity> {
    pairs
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity(v.to_string()),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::PodBuilder;

    #[test]
    fn requests_follow_init_and_sidecar_rules() {
        struct Case {
            name: &'static str,
            pod: PodBuilder,
            cpu: i64,
            mem: i64,
        }
        let cases = vec![
            Case {
                name: "sum of containers",
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "1"), ("memory", "1Gi")])
                    .container(&[("cpu", "500m")]),
                cpu: 1500,
                mem: 1 << 30,
            },
            Case {
                name: "init larger than sum",
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "1")])
                    .init_container(&[("cpu", "3")], false),
                cpu: 3000,
                mem: 0,
            },
            Case {
                name: "init smaller than sum",
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "2")])
                    .init_container(&[("cpu", "1")], false),
                cpu: 2000,
                mem: 0,
            },
            Case {
                name: "sidecar adds to containers and to later init containers",
                pod: PodBuilder::new("p")
                    .init_container(&[("cpu", "1")], true)
                    .init_container(&[("cpu", "2")], false)
                    .container(&[("cpu", "1")]),
                // running: sidecar 1 + container 1 = 2; init phase: 2 + sidecar 1 = 3
                cpu: 3000,
                mem: 0,
            },
            Case {
                name: "overhead added",
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "1")])
                    .overhead(&[("cpu", "250m"), ("memory", "120Mi")]),
                cpu: 1250,
                mem: 120 << 20,
            },
        ];
        for c in cases {
            let info = PodInfo::new(Arc::new(c.pod.build()));
            assert_eq!(info.requests.milli_cpu, c.cpu, "{}", c.name);
            assert_eq!(info.requests.memory, c.mem, "{}", c.name);
        }
    }

    #[test]
    fn a_resizing_pod_holds_the_most_its_node_may_run_it_with() {
        let pod = |spec_cpu: &str, running: &str, allocated: &str, reason: Option<&str>| {
            let conditions: Vec<serde_json::Value> = reason
                .map(|r| serde_json::json!({"type": "PodResizePending", "status": "True", "reason": r}))
                .into_iter()
                .collect();
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "default"},
                "spec": {
                    "containers": [{"name": "a", "resources": {"requests": {"cpu": spec_cpu}}}],
                    "initContainers": [{"name": "once", "restartPolicy": "Never",
                        "resources": {"requests": {"cpu": "100m"}}}]},
                "status": {"conditions": conditions, "containerStatuses": [{
                    "name": "a", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
                    "allocatedResources": {"cpu": allocated},
                    "resources": {"requests": {"cpu": running}}}],
                    "initContainerStatuses": [{
                    "name": "once", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                    "resources": {"requests": {"cpu": "9"}}}]}
            }))
            .unwrap();
            PodInfo::new(Arc::new(pod)).requests.milli_cpu
        };
        assert_eq!(
            pod("1", "2", "2", None),
            2000,
            "shrinking: still runs with 2"
        );
        assert_eq!(pod("4", "2", "2", None), 4000, "growing: the spec's");
        assert_eq!(pod("1", "1", "3", None), 3000, "allocated, not yet applied");
        assert_eq!(
            pod("8", "2", "2", Some("Infeasible")),
            2000,
            "never the spec's"
        );
        assert_eq!(
            pod("8", "2", "2", Some("Deferred")),
            8000,
            "deferred: the spec's"
        );
    }

    #[test]
    fn non_zero_requests_default_missing_values() {
        let info = PodInfo::new(Arc::new(
            PodBuilder::new("p")
                .container(&[])
                .container(&[("cpu", "1")])
                .build(),
        ));
        assert_eq!(info.requests.milli_cpu, 1000);
        assert_eq!(info.non_zero_requests.milli_cpu, 1100);
        assert_eq!(info.non_zero_requests.memory, 2 * DEFAULT_MEMORY_REQUEST);
    }
}
