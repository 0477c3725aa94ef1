//! The EndpointSlice controller: for every Service with a selector, slices
//! (discovery.k8s.io/v1, IPv4) listing the selected pods with their ready,
//! serving and terminating conditions. Pods whose ports resolve differently
//! (a named targetPort) land in different slices; at most
//! [`MAX_ENDPOINTS_PER_SLICE`] endpoints per slice. Slices carry the
//! `kubernetes.io/service-name` and `endpointslice.kubernetes.io/managed-by`
//! labels and a controller ownerReference to the Service. A Service that
//! selects no pod keeps one empty placeholder slice. A sync acts only on a
//! cache that shows every write the controller itself made (the
//! [`tracker`]), so it does not create a slice twice.

mod tracker;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use skiff_informer::{Action, Controller, HandlerFns, ObjectKey, WorkQueue, label_value_index};

use crate::endpoints::{
    ResolvedPort, derived_labels, endpoint_pods, pod_hostname, pod_ready, pod_reference,
    publish_not_ready, selected_pods, selector, watch_services_and_pods,
};
use crate::manager::{Context, Stop, stopped};
use tracker::Tracker;

/// Label naming a slice's Service.
pub(crate) const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Label naming the controller managing a slice.
pub(crate) const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// This controller's value of [`MANAGED_BY_LABEL`].
pub(crate) const MANAGED_BY: &str = "endpointslice-controller.k8s.io";
/// Upstream's default `--max-endpoints-per-slice`.
pub(crate) const MAX_ENDPOINTS_PER_SLICE: usize = 100;

const BY_SERVICE: &str = "endpointslice-service";

/// How long a sync whose cache lags the controller's own writes waits
/// before it looks again, should no event of the slice come first.
const STALE_RETRY: Duration = Duration::from_secs(1);

/// Errors syncing one Service's slices.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EndpointSliceError {
    /// A write of a slice failed.
    #[error("{action} endpointslice for {service}: {source}")]
    Api {
        /// The write that failed (create, update or delete).
        action: &'static str,
        /// The Service's namespace/name.
        service: String,
        #[source]
        /// The API's error.
        source: kube::Error,
    },
}

/// Runs the EndpointSlice controller until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    let controller = Controller::new("endpointslice", WorkQueue::new()).workers(2);
    let (controller, services, pods) = watch_services_and_pods(&ctx, controller);
    let slices = ctx.factory.informer::<EndpointSlice>();
    let indexed = slices.ensure_index(BY_SERVICE, label_value_index(SERVICE_NAME_LABEL));
    let queue = controller.queue().clone();
    let (q0, q1, q2) = (queue.clone(), queue.clone(), queue);
    let tracker = Arc::new(Tracker::default());
    let (gone_on_update, gone_on_delete) = (tracker.clone(), tracker.clone());
    // A slice's event wakes its Service: a sync that found the cache behind
    // its own writes waits for exactly these.
    let slice_handler = HandlerFns::new()
        .on_add(move |s: &Arc<EndpointSlice>| {
            if let Some(key) = managed_service(s) {
                q0.add(key);
            }
        })
        .on_update(move |old: &Arc<EndpointSlice>, s: &Arc<EndpointSlice>| {
            // Relabelled away from its Service or from this controller:
            // the cache will not show it among that Service's slices again.
            if let Some(before) = managed_service(old)
                && managed_service(s).as_ref() != Some(&before)
            {
                gone_on_update.gone(&before, old);
                q1.add(before);
            }
            if let Some(key) = managed_service(s) {
                q1.add(key);
            }
        })
        .on_delete(move |s: &Arc<EndpointSlice>| {
            if let Some(key) = service_of(s) {
                gone_on_delete.gone(&key, s);
            }
            if let Some(key) = managed_service(s) {
                q2.add(key);
            }
        });
    let controller = controller
        .watch_result(indexed)
        .watch(&slices, slice_handler);
    let slices = slices.cache().clone();
    let client = ctx.client.clone();
    controller
        .run_until(
            move |key: ObjectKey| {
                let ns = key.namespace.clone().unwrap_or_default();
                let svc = services.get(&ns, &key.name);
                let selected = svc
                    .as_ref()
                    .map(|s| selected_pods(s, &pods))
                    .unwrap_or_default();
                let current: Vec<Arc<EndpointSlice>> = slices
                    .by_index(BY_SERVICE, &key.name)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|s| managed_service(s).as_ref() == Some(&key))
                    .collect();
                let (client, tracker) = (client.clone(), tracker.clone());
                async move {
                    if tracker.stale(&key, &current) {
                        tracing::debug!(service = %key, "slice cache behind this controller's writes");
                        return Ok(Action::RequeueAfter(STALE_RETRY));
                    }
                    sync(&client, &tracker, &key, svc, &selected, current).await
                }
            },
            stopped(stop),
        )
        .await;
}

/// The Service a slice names in its `kubernetes.io/service-name` label.
fn service_of(slice: &EndpointSlice) -> Option<ObjectKey> {
    let name = slice.labels().get(SERVICE_NAME_LABEL)?;
    Some(ObjectKey::new(slice.namespace().as_deref(), name))
}

/// The Service of a slice this controller manages.
fn managed_service(slice: &EndpointSlice) -> Option<ObjectKey> {
    let managed = slice.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY);
    service_of(slice).filter(|_| managed)
}

/// The endpoints of `svc`, keyed by the port list they share.
pub(crate) fn desired_endpoints(
    svc: &Service,
    pods: &[Arc<Pod>],
) -> BTreeMap<Vec<ResolvedPort>, Vec<Endpoint>> {
    let publish = publish_not_ready(svc);
    let mut groups: BTreeMap<Vec<ResolvedPort>, Vec<Endpoint>> = BTreeMap::new();
    for (pod, ports) in endpoint_pods(svc, pods, true) {
        let ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default();
        if ip.contains(':') {
            // IPv6 slices are not produced (single-stack IPv4 cluster).
            continue;
        }
        let terminating = pod.metadata.deletion_timestamp.is_some();
        let serving = publish || pod_ready(pod);
        groups.entry(ports).or_default().push(Endpoint {
            addresses: vec![ip],
            conditions: Some(EndpointConditions {
                ready: Some(serving && !terminating),
                serving: Some(serving),
                terminating: Some(terminating),
            }),
            hostname: pod_hostname(svc, pod),
            node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            target_ref: Some(pod_reference(pod)),
            ..Default::default()
        });
    }
    for endpoints in groups.values_mut() {
        endpoints.sort_by(|a, b| a.addresses.cmp(&b.addresses));
    }
    groups
}

fn slice_ports(ports: &[ResolvedPort]) -> Vec<EndpointPort> {
    ports
        .iter()
        .map(|(name, port, protocol, app_protocol)| EndpointPort {
            // Always written, empty for an unnamed Service port, as upstream.
            name: Some(name.clone().unwrap_or_default()),
            port: Some(*port),
            protocol: Some(protocol.clone()),
            app_protocol: app_protocol.clone(),
        })
        .collect()
}

fn owner_reference(svc: &Service) -> OwnerReference {
    OwnerReference {
        api_version: <Service as k8s_openapi::Resource>::API_VERSION.into(),
        kind: <Service as k8s_openapi::Resource>::KIND.into(),
        name: svc.name_any(),
        uid: svc.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn sorted_ports(slice: &EndpointSlice) -> Vec<EndpointPort> {
    let mut ports = slice.ports.clone().unwrap_or_default();
    ports.sort_by(|a, b| (&a.name, a.port, &a.protocol).cmp(&(&b.name, b.port, &b.protocol)));
    ports
}

async fn sync(
    client: &kube::Client,
    tracker: &Tracker,
    key: &ObjectKey,
    svc: Option<Arc<Service>>,
    pods: &[Arc<Pod>],
    mut current: Vec<Arc<EndpointSlice>>,
) -> Result<Action, EndpointSliceError> {
    let namespace = key.namespace.clone().unwrap_or_default();
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), &namespace);
    let service = key.to_string();
    let err = |action, source| EndpointSliceError::Api {
        action,
        service: service.clone(),
        source,
    };
    let svc = match svc {
        Some(svc) if selector(&svc).is_some() && svc.metadata.deletion_timestamp.is_none() => svc,
        Some(_) => return Ok(Action::Done),
        // The ownerReference lets the garbage collector remove them too.
        None => {
            for slice in current {
                delete_slice(&api, tracker, key, &slice)
                    .await
                    .map_err(|e| err("deleting", e))?;
            }
            return Ok(Action::Done);
        }
    };
    let mut labels = derived_labels(&svc);
    labels.insert(SERVICE_NAME_LABEL.into(), svc.name_any());
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    let owner = owner_reference(&svc);

    // Wanted slices: (ports, endpoints) chunks; an empty placeholder if none.
    let mut wanted: Vec<(Vec<EndpointPort>, Vec<Endpoint>)> = Vec::new();
    for (ports, endpoints) in desired_endpoints(&svc, pods) {
        let ports = slice_ports(&ports);
        for chunk in endpoints.chunks(MAX_ENDPOINTS_PER_SLICE) {
            wanted.push((ports.clone(), chunk.to_vec()));
        }
    }
    if wanted.is_empty() {
        wanted.push((Vec::new(), Vec::new()));
    }

    // Each chunk first takes the slice that already has its ports. Slices
    // left over are then rewritten for the chunks that found none, as
    // upstream turns a create and a delete into one update, so a Service
    // never shows two slices for one set of ports (as it would between a
    // create and the delete of the placeholder it replaces).
    let mut homeless = Vec::new();
    for (ports, endpoints) in wanted {
        let mut sorted = ports.clone();
        sorted.sort_by(|a, b| (&a.name, a.port, &a.protocol).cmp(&(&b.name, b.port, &b.protocol)));
        match current
            .iter()
            .position(|s| s.address_type == "IPv4" && sorted_ports(s) == sorted)
        {
            Some(i) => {
                let existing = current.swap_remove(i);
                let wanted = Wanted {
                    ports,
                    endpoints,
                    labels: &labels,
                    owner: &owner,
                };
                put(&api, tracker, key, &existing, wanted)
                    .await
                    .map_err(|e| err("updating", e))?;
            }
            None => homeless.push((ports, endpoints)),
        }
    }
    for (ports, endpoints) in homeless {
        let wanted = Wanted {
            ports,
            endpoints,
            labels: &labels,
            owner: &owner,
        };
        if let Some(i) = current.iter().position(|s| s.address_type == "IPv4") {
            let existing = current.swap_remove(i);
            put(&api, tracker, key, &existing, wanted)
                .await
                .map_err(|e| err("updating", e))?;
            continue;
        }
        let slice = EndpointSlice {
            metadata: ObjectMeta {
                generate_name: Some(format!("{}-", svc.name_any())),
                labels: Some(labels.clone()),
                owner_references: Some(vec![owner.clone()]),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: wanted.endpoints,
            ports: Some(wanted.ports),
        };
        match api.create(&PostParams::default(), &slice).await {
            Ok(created) => tracker.wrote(key, &created),
            // The namespace is being deleted: nothing to publish into.
            Err(kube::Error::Api(s)) if s.code == 403 => return Ok(Action::Done),
            Err(e) => return Err(err("creating", e)),
        }
    }
    for stale in current {
        delete_slice(&api, tracker, key, &stale)
            .await
            .map_err(|e| err("deleting", e))?;
    }
    Ok(Action::Done)
}

/// What one slice of a Service should hold.
struct Wanted<'a> {
    ports: Vec<EndpointPort>,
    endpoints: Vec<Endpoint>,
    labels: &'a BTreeMap<String, String>,
    owner: &'a OwnerReference,
}

/// Rewrites `existing` to hold `wanted`, unless it already does, noting
/// the write in `tracker`.
async fn put(
    api: &Api<EndpointSlice>,
    tracker: &Tracker,
    service: &ObjectKey,
    existing: &EndpointSlice,
    wanted: Wanted<'_>,
) -> Result<(), kube::Error> {
    let up_to_date = existing.endpoints == wanted.endpoints
        && existing.ports.as_ref() == Some(&wanted.ports)
        && existing.labels() == wanted.labels
        && existing
            .owner_references()
            .iter()
            .any(|o| o.uid == wanted.owner.uid);
    if up_to_date {
        return Ok(());
    }
    let mut next = existing.clone();
    next.endpoints = wanted.endpoints;
    next.ports = Some(wanted.ports);
    next.metadata.labels = Some(wanted.labels.clone());
    next.metadata.owner_references = Some(vec![wanted.owner.clone()]);
    let updated = api
        .replace(&next.name_any(), &PostParams::default(), &next)
        .await?;
    tracker.wrote(service, &updated);
    Ok(())
}

/// Deletes one of `service`'s slices, noting the deletion in `tracker`
/// (one already gone is no error).
async fn delete_slice(
    api: &Api<EndpointSlice>,
    tracker: &Tracker,
    service: &ObjectKey,
    slice: &EndpointSlice,
) -> Result<(), kube::Error> {
    match api
        .delete(&slice.name_any(), &DeleteParams::default())
        .await
    {
        Ok(_) => {
            tracker.deleted(service, slice);
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, ip: &str, ready: bool, terminating: bool) -> Arc<Pod> {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": "db"}},
            "spec": {"containers": [{"name": "c", "image": "x",
                     "ports": [{"name": "sql", "containerPort": 5432}]}]},
            "status": {"phase": "Running", "podIP": ip,
                       "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
        }))
        .unwrap();
        if terminating {
            pod.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::now(),
                ));
        }
        Arc::new(pod)
    }

    #[test]
    fn conditions_follow_readiness_and_termination() {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": "db", "namespace": "ns"},
            "spec": {"selector": {"app": "db"}, "ports": [{"port": 5432, "targetPort": "sql"}]}
        }))
        .unwrap();
        let pods = vec![
            pod("a", "10.0.0.1", true, false),
            pod("b", "10.0.0.2", false, false),
            pod("c", "10.0.0.3", true, true),
        ];
        let groups = desired_endpoints(&svc, &pods);
        assert_eq!(groups.len(), 1);
        let (ports, endpoints) = groups.into_iter().next().unwrap();
        assert_eq!(ports[0].1, 5432);
        let cond = |i: usize| {
            let c = endpoints[i].conditions.clone().unwrap();
            (c.ready.unwrap(), c.serving.unwrap(), c.terminating.unwrap())
        };
        assert_eq!(cond(0), (true, true, false));
        assert_eq!(cond(1), (false, false, false));
        assert_eq!(cond(2), (false, true, true));
    }

    #[test]
    fn slice_ports_always_carry_a_name() {
        let resolved: Vec<ResolvedPort> = vec![
            (None, 5432, "TCP".into(), None),
            (Some("http".into()), 80, "TCP".into(), Some("http".into())),
        ];
        let ports = slice_ports(&resolved);
        assert_eq!(ports[0].name.as_deref(), Some(""));
        assert_eq!(ports[1].name.as_deref(), Some("http"));
        assert_eq!(
            serde_json::to_value(&ports[0]).unwrap(),
            json!({"name": "", "port": 5432, "protocol": "TCP"})
        );
    }
}
