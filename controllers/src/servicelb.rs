//! ServiceLB (k3s's built-in load balancer, as a controller): every Service
//! of `type: LoadBalancer` without a `loadBalancerClass` gets the addresses of
//! the ready Nodes as `status.loadBalancer.ingress`, so clients see an
//! EXTERNAL-IP; the service proxy accepts traffic for those addresses.
//!
//! Node selection follows k3s: when some Node carries the label
//! `svccontroller.k3s.cattle.io/enablelb=true` only such Nodes serve load
//! balancers, otherwise every ready Node does. A Node contributes its
//! ExternalIP addresses, or its InternalIP ones when it has none. The
//! ingress is cleared when the Service stops being a LoadBalancer.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{LoadBalancerIngress, Node, Service};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use skiff_common::node_conditions::conditions;
use skiff_informer::{Action, Cache, Controller, HandlerFns, ObjectKey, WorkQueue};

use crate::controller_utils::{self, done_or_gone};
use crate::manager::{Context, Stop, stopped};

/// The Node label that limits which Nodes serve load balancers.
pub(crate) const ENABLE_LB_LABEL: &str = "svccontroller.k3s.cattle.io/enablelb";

/// Errors of the ServiceLB controller.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServiceLbError {
    /// Writing a Service's status failed.
    #[error("updating the load balancer status of service {service}: {source}")]
    Api {
        /// namespace/name.
        service: String,
        #[source]
        /// The API's error.
        source: kube::Error,
    },
}

/// The ingress addresses the ready serving Nodes give, sorted.
pub(crate) fn node_addresses(nodes: &[Arc<Node>]) -> Vec<String> {
    let labelled = |n: &Node| n.labels().get(ENABLE_LB_LABEL).map(String::as_str) == Some("true");
    let restricted = nodes.iter().any(|n| labelled(n));
    let mut ips = BTreeSet::new();
    for node in nodes {
        if !is_ready(node) || (restricted && !labelled(node)) {
            continue;
        }
        let addresses = controller_utils::node_addresses(node);
        let external: Vec<&str> = addresses
            .iter()
            .filter(|a| a.type_ == "ExternalIP")
            .map(|a| a.address.as_str())
            .collect();
        let chosen = if external.is_empty() {
            addresses
                .iter()
                .filter(|a| a.type_ == "InternalIP")
                .map(|a| a.address.as_str())
                .collect()
        } else {
            external
        };
        ips.extend(chosen.into_iter().map(str::to_owned));
    }
    ips.into_iter().collect()
}

fn is_ready(node: &Node) -> bool {
    conditions(node)
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Whether this controller owns the Service's load balancer status.
fn served_here(svc: &Service) -> bool {
    svc.spec.as_ref().is_some_and(|s| {
        s.type_.as_deref() == Some("LoadBalancer") && s.load_balancer_class.is_none()
    })
}

fn current_ingress(svc: &Service) -> Vec<String> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i: &LoadBalancerIngress| i.ip.clone())
        .collect()
}

/// Runs ServiceLB until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    let services = ctx.factory.informer::<Service>();
    let nodes = ctx.factory.informer::<Node>();
    let queue = WorkQueue::<ObjectKey>::new();
    let (q1, q2) = (queue.clone(), queue.clone());
    let service_handler = HandlerFns::new()
        .on_add(move |s: &Arc<Service>| q1.add(ObjectKey::from_object(s.as_ref())))
        .on_update(move |_, s: &Arc<Service>| q2.add(ObjectKey::from_object(s.as_ref())));
    // Any Node change may change every load balancer's addresses.
    let requeue_all = {
        let (queue, cache) = (queue.clone(), services.cache().clone());
        move || {
            for svc in cache.list().iter().filter(|s| served_here(s)) {
                queue.add(ObjectKey::from_object(svc.as_ref()));
            }
        }
    };
    let (r1, r2, r3) = (requeue_all.clone(), requeue_all.clone(), requeue_all);
    let node_handler = HandlerFns::new()
        .on_add(move |_: &Arc<Node>| r1())
        .on_update(move |old: &Arc<Node>, new: &Arc<Node>| {
            if node_addresses(std::slice::from_ref(old))
                != node_addresses(std::slice::from_ref(new))
                || old.labels().get(ENABLE_LB_LABEL) != new.labels().get(ENABLE_LB_LABEL)
            {
                r2()
            }
        })
        .on_delete(move |_: &Arc<Node>| r3());
    let (service_cache, node_cache) = (services.cache().clone(), nodes.cache().clone());
    let client = ctx.client.clone();
    Controller::new("servicelb", queue)
        .workers(2)
        .watch(&services, service_handler)
        .watch(&nodes, node_handler)
        .run_until(
            move |key: ObjectKey| {
                let (client, services, nodes) =
                    (client.clone(), service_cache.clone(), node_cache.clone());
                async move { sync(&client, &services, &nodes, &key).await }
            },
            stopped(stop),
        )
        .await;
}

async fn sync(
    client: &kube::Client,
    services: &Cache<Service>,
    nodes: &Cache<Node>,
    key: &ObjectKey,
) -> Result<Action, ServiceLbError> {
    let namespace = key.namespace.clone().unwrap_or_default();
    let Some(svc) = services.get(&namespace, &key.name) else {
        return Ok(Action::Done);
    };
    let current = current_ingress(&svc);
    let wanted = if served_here(&svc) {
        node_addresses(&nodes.list())
    } else if svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer") {
        // Another load balancer implementation owns it.
        return Ok(Action::Done);
    } else {
        Vec::new()
    };
    if current == wanted {
        return Ok(Action::Done);
    }
    let ingress: Vec<serde_json::Value> = wanted
        .iter()
        .map(|ip| serde_json::json!({"ip": ip, "ipMode": "VIP"}))
        .collect();
    let patch = if ingress.is_empty() {
        serde_json::json!({"status": {"loadBalancer": {"ingress": null}}})
    } else {
        serde_json::json!({"status": {"loadBalancer": {"ingress": ingress}}})
    };
    let api: Api<Service> = Api::namespaced(client.clone(), &namespace);
    let written = api
        .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .inspect(|_| {
            tracing::info!(service = %key, ingress = ?wanted, "servicelb: load balancer status set");
        });
    done_or_gone(written, |source| ServiceLbError::Api {
        service: key.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Node `name` with `addresses` (type, address) and `labels`.
    fn node(
        name: &str,
        ready: bool,
        addresses: &[(&str, &str)],
        labels: serde_json::Value,
    ) -> Arc<Node> {
        let addresses: Vec<_> = addresses
            .iter()
            .map(|(type_, address)| json!({"type": type_, "address": address}))
            .collect();
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": labels},
                "status": {
                    "addresses": addresses,
                    "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]
                }
            }))
            .unwrap(),
        )
    }

    #[test]
    fn ready_nodes_give_external_or_internal_addresses() {
        let both = [("InternalIP", "10.0.0.3"), ("ExternalIP", "198.51.100.3")];
        let nodes = vec![
            node("a", true, &[("InternalIP", "192.0.2.2")], json!({})),
            node("b", true, &both, json!({})),
            node("c", false, &[("InternalIP", "192.0.2.9")], json!({})),
        ];
        assert_eq!(node_addresses(&nodes), ["192.0.2.2", "198.51.100.3"]);
    }

    #[test]
    fn the_enablelb_label_restricts_the_nodes() {
        let nodes = vec![
            node("a", true, &[("InternalIP", "192.0.2.2")], json!({})),
            node(
                "b",
                true,
                &[("InternalIP", "192.0.2.3")],
                json!({ENABLE_LB_LABEL: "true"}),
            ),
        ];
        assert_eq!(node_addresses(&nodes), ["192.0.2.3"]);
    }
}
