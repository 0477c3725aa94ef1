//! The endpoints controller: for every Service with a selector, an Endpoints
//! object of the same name listing the selected pods' IPs (ready pods under
//! `addresses`, the others under `notReadyAddresses`) with the Service's ports
//! resolved per pod (a named targetPort is looked up in the pod's containers).
//! Services without a selector are left alone: their Endpoints are the user's.
//!
//! The pod selection and port resolution here are shared with the
//! EndpointSlice controller.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, ObjectReference, Pod, Service,
    ServicePort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use skiff_informer::{Action, Cache, Controller, EnqueueKeys, HandlerFns, ObjectKey, WorkQueue};

use crate::manager::{Context, Stop, stopped};

/// Label upstream puts on the Endpoints and slices of headless Services.
pub(crate) const HEADLESS_LABEL: &str = "service.kubernetes.io/headless";
/// Most addresses an Endpoints object lists (upstream's limit); beyond it the
/// object is truncated and says so in [`OVER_CAPACITY_ANNOTATION`].
pub(crate) const MAX_ENDPOINTS_ADDRESSES: usize = 1000;
/// Annotation marking a truncated Endpoints object (value `truncated`).
pub(crate) const OVER_CAPACITY_ANNOTATION: &str = "endpoints.kubernetes.io/over-capacity";

/// Errors writing one Service's Endpoints.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EndpointsError {
    /// A write of the Endpoints object failed.
    #[error("{action} endpoints {namespace}/{name}: {source}")]
    Api {
        /// The write that failed (create, update or delete).
        action: &'static str,
        /// The Service's namespace.
        namespace: String,
        /// The Service's (and its Endpoints') name.
        name: String,
        #[source]
        /// The API's error.
        source: kube::Error,
    },
}

/// The Service's selector if it selects pods (None or empty: it does not).
pub(crate) fn selector(svc: &Service) -> Option<&BTreeMap<String, String>> {
    svc.spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .filter(|s| !s.is_empty())
}

fn selects(selector: &BTreeMap<String, String>, pod: &Pod) -> bool {
    let labels = pod.metadata.labels.as_ref();
    selector
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// Pods of `svc`'s namespace its selector picks.
pub(crate) fn selected_pods(svc: &Service, pods: &Cache<Pod>) -> Vec<Arc<Pod>> {
    let Some(selector) = selector(svc) else {
        return Vec::new();
    };
    let namespace = svc.namespace().unwrap_or_default();
    pods.list_namespace(&namespace)
        .into_iter()
        .filter(|p| selects(selector, p))
        .collect()
}

/// Whether a pod belongs in endpoints at all: it has an IP and has not
/// finished; terminating pods only if `include_terminating`.
fn eligible(pod: &Pod, include_terminating: bool) -> bool {
    let status = pod.status.as_ref();
    let has_ip = status
        .and_then(|s| s.pod_ip.as_deref())
        .is_some_and(|ip| !ip.is_empty());
    let finished = status
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed");
    has_ip && !finished && (include_terminating || pod.metadata.deletion_timestamp.is_none())
}

/// The pod's Ready condition is True.
pub(crate) fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether `svc` is headless (clusterIP None).
pub(crate) fn headless(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .is_some_and(|ip| ip == "None")
}

/// Whether not-ready pods are published as ready.
pub(crate) fn publish_not_ready(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false)
}

/// Whether the Service lists any port (a pod then needs one of them to be
/// an endpoint).
fn has_ports(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .is_some_and(|p| !p.is_empty())
}

/// The container port `target` names on `pod` (for `protocol`), or the
/// number itself.
pub(crate) fn resolve_target_port(pod: &Pod, port: &ServicePort) -> Option<i32> {
    let protocol = port.protocol.as_deref().unwrap_or("TCP");
    match port
        .target_port
        .clone()
        .unwrap_or(IntOrString::Int(port.port))
    {
        IntOrString::Int(n) => Some(n),
        IntOrString::String(name) => {
            if let Ok(n) = name.parse::<i32>() {
                return Some(n);
            }
            pod.spec.as_ref()?.containers.iter().find_map(|c| {
                c.ports.iter().flatten().find_map(|p| {
                    let same_protocol = p.protocol.as_deref().unwrap_or("TCP") == protocol;
                    (p.name.as_deref() == Some(name.as_str()) && same_protocol)
                        .then_some(p.container_port)
                })
            })
        }
    }
}

/// One resolved port of one pod: (service port name, port number, protocol,
/// appProtocol).
pub(crate) type ResolvedPort = (Option<String>, i32, String, Option<String>);

/// The Service's ports as they land on `pod`; ports whose named target the
/// pod lacks are left out.
fn pod_ports(svc: &Service, pod: &Pod) -> Vec<ResolvedPort> {
    let ports = svc.spec.as_ref().and_then(|s| s.ports.as_ref());
    ports
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let number = resolve_target_port(pod, p)?;
            Some((
                p.name.clone().filter(|n| !n.is_empty()),
                number,
                p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                p.app_protocol.clone(),
            ))
        })
        .collect()
}

/// The pods of `svc` that become endpoints, each with its ports sorted (so
/// that pods with the same ports group together): the eligible ones, less
/// those with none of the Service's ports when it lists some.
pub(crate) fn endpoint_pods<'a>(
    svc: &'a Service,
    pods: &'a [Arc<Pod>],
    include_terminating: bool,
) -> impl Iterator<Item = (&'a Arc<Pod>, Vec<ResolvedPort>)> + 'a {
    let svc_has_ports = has_ports(svc);
    pods.iter()
        .filter(move |p| eligible(p, include_terminating))
        .filter_map(move |pod| {
            let mut ports = pod_ports(svc, pod);
            if svc_has_ports && ports.is_empty() {
                return None;
            }
            ports.sort();
            Some((pod, ports))
        })
}

/// The Pod reference endpoints carry.
pub(crate) fn pod_reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        namespace: pod.namespace(),
        name: Some(pod.name_any()),
        uid: pod.uid(),
        ..Default::default()
    }
}

/// The hostname a pod publishes under a headless Service (its
/// spec.hostname when spec.subdomain names the Service).
pub(crate) fn pod_hostname(svc: &Service, pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let hostname = spec.hostname.clone().filter(|h| !h.is_empty())?;
    (spec.subdomain.as_deref() == Some(svc.name_any().as_str())).then_some(hostname)
}

/// Labels of the Service's Endpoints and slices: the Service's own, plus the
/// headless marker.
pub(crate) fn derived_labels(svc: &Service) -> BTreeMap<String, String> {
    let mut labels = svc.labels().clone();
    if headless(svc) {
        labels.insert(HEADLESS_LABEL.into(), String::new());
    } else {
        labels.remove(HEADLESS_LABEL);
    }
    labels
}

/// The subsets of `svc` over `pods`: addresses grouped by identical port
/// lists, sorted for stable output.
pub(crate) fn desired_subsets(svc: &Service, pods: &[Arc<Pod>]) -> Vec<EndpointSubset> {
    let publish = publish_not_ready(svc);
    // port list → (ready, not ready)
    type Addrs = (Vec<EndpointAddress>, Vec<EndpointAddress>);
    let mut groups: BTreeMap<Vec<ResolvedPort>, Addrs> = BTreeMap::new();
    for (pod, ports) in endpoint_pods(svc, pods, false) {
        let address = EndpointAddress {
            ip: pod
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.clone())
                .unwrap_or_default(),
            node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            hostname: pod_hostname(svc, pod),
            target_ref: Some(pod_reference(pod)),
        };
        let group = groups.entry(ports).or_default();
        if publish || pod_ready(pod) {
            group.0.push(address);
        } else {
            group.1.push(address);
        }
    }
    groups
        .into_iter()
        .map(|(ports, (mut ready, mut not_ready))| {
            ready.sort_by(|a, b| a.ip.cmp(&b.ip));
            not_ready.sort_by(|a, b| a.ip.cmp(&b.ip));
            EndpointSubset {
                addresses: (!ready.is_empty()).then_some(ready),
                not_ready_addresses: (!not_ready.is_empty()).then_some(not_ready),
                ports: (!ports.is_empty()).then(|| {
                    ports
                        .into_iter()
                        .map(|(name, port, protocol, app_protocol)| EndpointPort {
                            name,
                            port,
                            protocol: Some(protocol),
                            app_protocol,
                        })
                        .collect()
                }),
            }
        })
        .collect()
}

/// Cuts `subsets` down to `max` addresses, ready ones kept first; true if
/// anything was cut.
pub(crate) fn truncate_subsets(subsets: &mut Vec<EndpointSubset>, max: usize) -> bool {
    let count = |a: &Option<Vec<EndpointAddress>>| a.as_ref().map_or(0, Vec::len);
    let total: usize = subsets
        .iter()
        .map(|s| count(&s.addresses) + count(&s.not_ready_addresses))
        .sum();
    if total <= max {
        return false;
    }
    let mut budget = max;
    for pick_ready in [true, false] {
        for subset in subsets.iter_mut() {
            let list = if pick_ready {
                &mut subset.addresses
            } else {
                &mut subset.not_ready_addresses
            };
            if let Some(addresses) = list {
                let keep = addresses.len().min(budget);
                addresses.truncate(keep);
                budget -= keep;
                if addresses.is_empty() {
                    *list = None;
                }
            }
        }
    }
    subsets.retain(|s| s.addresses.is_some() || s.not_ready_addresses.is_some());
    true
}

/// Enqueues the Services selecting `pod` (used by both endpoint controllers).
pub(crate) fn enqueue_services_of(
    services: &Cache<Service>,
    queue: &WorkQueue<ObjectKey>,
    pod: &Pod,
) {
    let namespace = pod.namespace().unwrap_or_default();
    for svc in services.list_namespace(&namespace) {
        if selector(&svc).is_some_and(|s| selects(s, pod)) {
            queue.add(ObjectKey::from_object(svc.as_ref()));
        }
    }
}

/// Adds to `controller` the Service and Pod handlers both endpoint
/// controllers use; returns it with the two caches.
pub(crate) fn watch_services_and_pods(
    ctx: &Context,
    controller: Controller<ObjectKey>,
) -> (Controller<ObjectKey>, Arc<Cache<Service>>, Arc<Cache<Pod>>) {
    let queue = controller.queue().clone();
    let services = ctx.factory.informer::<Service>();
    let pods = ctx.factory.informer::<Pod>();
    let svc_cache = services.cache().clone();
    let (c1, c2, c3) = (svc_cache.clone(), svc_cache.clone(), svc_cache.clone());
    let (q1, q2, q3) = (queue.clone(), queue.clone(), queue.clone());
    let pod_handler = HandlerFns::new()
        .on_add(move |p: &Arc<Pod>| enqueue_services_of(&c1, &q1, p))
        .on_update(move |old: &Arc<Pod>, new: &Arc<Pod>| {
            if old.metadata.labels != new.metadata.labels {
                enqueue_services_of(&c2, &q2, old);
            }
            enqueue_services_of(&c2, &q2, new);
        })
        .on_delete(move |p: &Arc<Pod>| enqueue_services_of(&c3, &q3, p));
    let controller = controller
        .watch(&services, EnqueueKeys::new(queue))
        .watch(&pods, pod_handler);
    (controller, svc_cache, pods.cache().clone())
}

/// Runs the endpoints controller until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    let controller = Controller::new("endpoint", WorkQueue::new()).workers(2);
    let (controller, services, pods) = watch_services_and_pods(&ctx, controller);
    let endpoints = ctx.factory.informer::<Endpoints>();
    let q = controller.queue().clone();
    let endpoints_handler = HandlerFns::new()
        .on_update(move |_, e: &Arc<Endpoints>| q.add(ObjectKey::from_object(e.as_ref())));
    let ep_cache = endpoints.cache().clone();
    let client = ctx.client.clone();
    controller
        .watch(&endpoints, endpoints_handler)
        .run_until(
            move |key: ObjectKey| {
                let ns = key.namespace.clone().unwrap_or_default();
                let svc = services.get(&ns, &key.name);
                let current = ep_cache.get(&ns, &key.name);
                let selected = svc
                    .as_ref()
                    .map(|s| selected_pods(s, &pods))
                    .unwrap_or_default();
                let client = client.clone();
                async move { sync(&client, &key, svc, current, &selected).await }
            },
            stopped(stop),
        )
        .await;
}

async fn sync(
    client: &kube::Client,
    key: &ObjectKey,
    svc: Option<Arc<Service>>,
    current: Option<Arc<Endpoints>>,
    pods: &[Arc<Pod>],
) -> Result<Action, EndpointsError> {
    let namespace = key.namespace.clone().unwrap_or_default();
    let api: Api<Endpoints> = Api::namespaced(client.clone(), &namespace);
    let error = |action, source| EndpointsError::Api {
        action,
        namespace: namespace.clone(),
        name: key.name.clone(),
        source,
    };
    let Some(svc) = svc else {
        if current.is_some() {
            match api.delete(&key.name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(error("deleting", e)),
            }
        }
        return Ok(Action::Done);
    };
    if selector(&svc).is_none() || svc.metadata.deletion_timestamp.is_some() {
        return Ok(Action::Done);
    }
    let mut subsets = desired_subsets(&svc, pods);
    let truncated = truncate_subsets(&mut subsets, MAX_ENDPOINTS_ADDRESSES);
    let labels = derived_labels(&svc);
    let wanted_subsets = (!subsets.is_empty()).then_some(subsets);
    let marked = |e: &Endpoints| e.annotations().contains_key(OVER_CAPACITY_ANNOTATION);
    match current {
        Some(cur) => {
            let same_subsets = cur.subsets.clone().filter(|s| !s.is_empty()) == wanted_subsets;
            if same_subsets && cur.labels() == &labels && marked(&cur) == truncated {
                return Ok(Action::Done);
            }
            let mut next = (*cur).clone();
            next.subsets = wanted_subsets;
            next.metadata.labels = Some(labels);
            let annotations = next.metadata.annotations.get_or_insert_with(BTreeMap::new);
            if truncated {
                annotations.insert(OVER_CAPACITY_ANNOTATION.into(), "truncated".into());
            } else {
                annotations.remove(OVER_CAPACITY_ANNOTATION);
            }
            match api.replace(&key.name, &PostParams::default(), &next).await {
                Ok(_) => Ok(Action::Done),
                Err(e) => Err(error("updating", e)),
            }
        }
        None => {
            let endpoints = Endpoints {
                metadata: ObjectMeta {
                    name: Some(key.name.clone()),
                    labels: Some(labels),
                    annotations: truncated.then(|| {
                        [(OVER_CAPACITY_ANNOTATION.to_owned(), "truncated".to_owned())].into()
                    }),
                    ..Default::default()
                },
                subsets: wanted_subsets,
            };
            match api.create(&PostParams::default(), &endpoints).await {
                Ok(_) => Ok(Action::Done),
                // The namespace is being deleted: nothing to publish into.
                Err(kube::Error::Api(s)) if s.code == 403 => Ok(Action::Done),
                Err(e) => Err(error("creating", e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeSet;

    /// Distinct port lists of the subsets (for tests and diagnostics).
    fn subset_ports(subsets: &[EndpointSubset]) -> BTreeSet<Vec<i32>> {
        subsets
            .iter()
            .map(|s| s.ports.iter().flatten().map(|p| p.port).collect())
            .collect()
    }

    fn svc(target: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web"}},
            "spec": {"selector": {"app": "web"},
                     "ports": [{"name": "http", "port": 80, "targetPort": target, "protocol": "TCP"}]}
        }))
        .unwrap()
    }

    fn pod(name: &str, ip: &str, ready: bool, port_name: &str, port: i32) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                             "labels": {"app": "web"}},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x",
                         "ports": [{"name": port_name, "containerPort": port}]}]},
                "status": {"phase": "Running", "podIP": ip,
                           "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
            }))
            .unwrap(),
        )
    }

    #[test]
    fn named_ports_resolve_per_pod_and_group_into_subsets() {
        let service = svc(json!("web-port"));
        let pods = vec![
            pod("a", "10.0.0.2", true, "web-port", 8080),
            pod("b", "10.0.0.1", false, "web-port", 8080),
            pod("c", "10.0.0.3", true, "web-port", 9090),
            pod("d", "10.0.0.4", true, "other", 7070),
        ];
        let subsets = desired_subsets(&service, &pods);
        assert_eq!(subset_ports(&subsets), [vec![8080], vec![9090]].into());
        let first = subsets
            .iter()
            .find(|s| s.ports.as_ref().unwrap()[0].port == 8080)
            .unwrap();
        let ips = |a: &Option<Vec<EndpointAddress>>| {
            a.iter().flatten().map(|x| x.ip.clone()).collect::<Vec<_>>()
        };
        assert_eq!(ips(&first.addresses), ["10.0.0.2"]);
        assert_eq!(ips(&first.not_ready_addresses), ["10.0.0.1"]);
        assert_eq!(
            first.ports.as_ref().unwrap()[0].name.as_deref(),
            Some("http")
        );
    }

    #[test]
    fn over_capacity_endpoints_keep_ready_addresses_first() {
        let service = svc(json!(8080));
        let pods: Vec<Arc<Pod>> = (0..6)
            .map(|i| pod(&format!("p{i}"), &format!("10.0.0.{i}"), i % 2 == 0, "x", 1))
            .collect();
        let mut subsets = desired_subsets(&service, &pods);
        assert!(!truncate_subsets(&mut subsets, 6));
        assert!(truncate_subsets(&mut subsets, 4));
        let ready = subsets[0].addresses.as_ref().map_or(0, Vec::len);
        let not_ready = subsets[0].not_ready_addresses.as_ref().map_or(0, Vec::len);
        assert_eq!((ready, not_ready), (3, 1));
    }

    #[test]
    fn terminating_and_ipless_pods_are_left_out() {
        let service = svc(json!(8080));
        let mut terminating = (*pod("t", "10.0.0.9", true, "x", 1)).clone();
        terminating.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        let mut no_ip = (*pod("n", "", true, "x", 1)).clone();
        no_ip.status.as_mut().unwrap().pod_ip = None;
        let pods = vec![
            Arc::new(terminating),
            Arc::new(no_ip),
            pod("ok", "10.0.0.5", true, "x", 1),
        ];
        let subsets = desired_subsets(&service, &pods);
        assert_eq!(subsets.len(), 1);
        assert_eq!(subsets[0].addresses.as_ref().unwrap().len(), 1);
        assert_eq!(subsets[0].ports.as_ref().unwrap()[0].port, 8080);
    }
}
