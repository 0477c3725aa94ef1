//! Services: defaults, a DNS-1035 name, cluster IPs and node ports allocated
//! from the server's pools (kept across updates that omit them, dropped by
//! one that changes the type to one without them).

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{InitialStatus, KindStrategy, default_object, set_default};
use crate::kinds::Written;
use crate::registry::ResourceInfo;
use crate::server::Inner;
use crate::service_alloc::AllocationGuard;
use crate::status::{ApiError, FieldError};
use crate::validation::NameRule;

/// The `services` resource.
#[derive(Debug)]
pub(crate) struct Services;

#[async_trait]
impl KindStrategy for Services {
    fn name_rule(&self) -> NameRule {
        NameRule::Dns1035
    }

    /// Upstream's ServiceStatus always serializes its load balancer, empty
    /// until the service LB controller fills it.
    fn initial_status(&self) -> InitialStatus {
        InitialStatus::Empty(|| json!({ "loadBalancer": {} }))
    }

    /// Upstream's warnings about fields a Service's type makes it ignore,
    /// on every write of the main resource.
    fn warnings(&self, written: &Written<'_>) -> Vec<String> {
        if written.status_only() {
            return Vec::new();
        }
        service_warnings(written.object)
    }

    fn apply_spec_defaults(&self, _info: &ResourceInfo, spec: &mut Value) {
        set_default(spec, "type", json!("ClusterIP"));
        set_default(spec, "sessionAffinity", json!("None"));
        let kind = spec["type"].as_str().unwrap_or_default().to_owned();
        if kind != "ExternalName" {
            set_default(spec, "internalTrafficPolicy", json!("Cluster"));
        }
        if kind == "NodePort" || kind == "LoadBalancer" {
            set_default(spec, "externalTrafficPolicy", json!("Cluster"));
        }
        if kind == "LoadBalancer" {
            set_default(spec, "allocateLoadBalancerNodePorts", json!(true));
        }
        if spec["sessionAffinity"] == "ClientIP"
            && let Some(config) = default_object(spec, "sessionAffinityConfig")
            && let Some(client) = default_object(config, "clientIP")
        {
            // Three hours, upstream's sticky-session default.
            set_default(client, "timeoutSeconds", json!(10800));
        }
        if let Some(ports) = spec["ports"].as_array_mut() {
            for p in ports {
                set_default(p, "protocol", json!("TCP"));
                // Upstream's zero values (0, "") mean "the port" too.
                if (p["targetPort"] == 0 || p["targetPort"] == "")
                    && let Some(map) = p.as_object_mut()
                {
                    map.remove("targetPort");
                }
                let port = p["port"].clone();
                set_default(p, "targetPort", port);
            }
        }
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written { object, old, .. } = *written;
        crate::validation::workloads::service(object, old, errors);
    }

    fn carry_on_update(&self, old: &Value, new: &mut Value) {
        crate::service_alloc::keep_allocations(old, new);
        drop_type_dependent_fields(old, new);
    }

    /// A new Service, or one that became NodePort (or lost its address),
    /// gets what it lacks, given every other stored Service, and claims it
    /// in the store so no other API server hands out the same.
    async fn allocate<'i>(
        &self,
        inner: &'i Inner,
        info: &ResourceInfo,
        key: &str,
        object: &mut Value,
    ) -> Result<Option<AllocationGuard<'i>>, ApiError> {
        crate::service_alloc::claim_for(inner, info, key, object)
            .await
            .map(Some)
    }

    /// Its addresses and ports are free again at once (the services watch
    /// would free them too, a moment later).
    async fn deleted(&self, inner: &Inner, last: &Value) {
        crate::service_alloc::repair::release_held(inner.store.as_ref(), last).await;
    }
}

/// Whether a Service of this type has node ports.
fn needs_node_ports(kind: &str) -> bool {
    kind == "NodePort" || kind == "LoadBalancer"
}

/// What a change of type takes away, as upstream's update strategy: node
/// ports, when the new type has none and the update left them as they were
/// (a client that sets its own is refused by validation instead); the
/// cluster addresses of a Service that became ExternalName, likewise; and
/// the fields only the old type had. What is dropped is released from the
/// pools once the Service is stored without it.
fn drop_type_dependent_fields(old: &Value, new: &mut Value) {
    let type_of = |object: &Value| {
        object["spec"]["type"]
            .as_str()
            .unwrap_or("ClusterIP")
            .to_owned()
    };
    let (was, now) = (type_of(old), type_of(new));
    let old_spec = &old["spec"];
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if needs_node_ports(&was) && !needs_node_ports(&now) {
        let node_port = |ports: Option<&Vec<Value>>, i: usize| {
            ports.and_then(|p| p.get(i)).map(|p| p["nodePort"].clone())
        };
        let old_ports = old_spec["ports"].as_array();
        let new_ports = spec.get("ports").and_then(Value::as_array);
        let same = old_ports
            .into_iter()
            .flatten()
            .enumerate()
            .all(|(i, _)| node_port(new_ports, i) == node_port(old_ports, i));
        if same {
            for port in spec
                .get_mut("ports")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(port) = port.as_object_mut() {
                    port.remove("nodePort");
                }
            }
        }
    }
    if was != "ExternalName" && now == "ExternalName" {
        for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if spec.get(field) == old_spec.get(field) {
                spec.remove(field);
            }
        }
        spec.remove("internalTrafficPolicy");
    }
    let external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .is_some_and(|ips| !ips.is_empty());
    // Only a Service reachable from outside has an external traffic policy.
    let external = needs_node_ports(&now) || (now == "ClusterIP" && external_ips);
    if !external {
        spec.remove("externalTrafficPolicy");
    }
    if !needs_node_ports(&now) {
        spec.remove("healthCheckNodePort");
    }
    if now != "LoadBalancer" {
        spec.remove("allocateLoadBalancerNodePorts");
        if was == "LoadBalancer"
            && spec.get("loadBalancerClass") == old_spec.get("loadBalancerClass")
        {
            spec.remove("loadBalancerClass");
        }
    }
}

/// What a Service sets that its type ignores, and a deprecated annotation.
fn service_warnings(service: &Value) -> Vec<String> {
    const HINTS: &str = "service.kubernetes.io/topology-aware-hints";
    let spec = &service["spec"];
    let kind = spec["type"].as_str().unwrap_or("ClusterIP");
    let set = |field: &str| match &spec[field] {
        Value::String(text) => !text.is_empty(),
        Value::Array(items) => !items.is_empty(),
        _ => false,
    };
    let mut out = Vec::new();
    if service["metadata"]["annotations"].get(HINTS).is_some() {
        out.push(format!(
            "annotation {HINTS} is deprecated, please use service.kubernetes.io/topology-mode instead"
        ));
    }
    if kind == "ClusterIP" && spec["clusterIP"] == "None" {
        if set("loadBalancerIP") {
            out.push("spec.loadBalancerIP is ignored for headless services".into());
        }
        if set("externalIPs") {
            out.push("spec.externalIPs is ignored for headless services".into());
        }
        if spec["sessionAffinity"]
            .as_str()
            .is_some_and(|a| a != "None")
        {
            out.push("spec.SessionAffinity is ignored for headless services".into());
        }
    }
    out.extend(address_warnings(spec));
    if kind == "ExternalName" && set("externalIPs") {
        out.push("spec.externalIPs is ignored when spec.type is \"ExternalName\"".into());
    }
    if kind != "ExternalName" && set("externalName") {
        out.push("spec.externalName is ignored when spec.type is not \"ExternalName\"".into());
    }
    out
}

/// Addresses and ranges written in forms upstream warns of (see
/// `validation::ip_warnings`), field by field in upstream's order.
fn address_warnings(spec: &Value) -> Vec<String> {
    use crate::validation::ip_warnings::{for_cidr, for_ip};
    let texts = |field: &str| -> Vec<String> {
        spec[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    let mut out = Vec::new();
    // A headless Service's "None" is no address.
    if spec["clusterIP"]
        .as_str()
        .is_some_and(|ip| !ip.is_empty() && ip != "None")
    {
        for (i, ip) in texts("clusterIPs").iter().enumerate() {
            out.extend(for_ip(&format!("spec.clusterIPs[{i}]"), ip));
        }
    }
    for (i, ip) in texts("externalIPs").iter().enumerate() {
        out.extend(for_ip(&format!("spec.externalIPs[{i}]"), ip));
    }
    if let Some(ip) = spec["loadBalancerIP"].as_str().filter(|ip| !ip.is_empty()) {
        out.extend(for_ip("spec.loadBalancerIP", ip));
    }
    for (i, range) in texts("loadBalancerSourceRanges").iter().enumerate() {
        out.extend(for_cidr(
            &format!("spec.loadBalancerSourceRanges[{i}]"),
            range,
        ));
    }
    out
}

#[cfg(test)]
mod warning_tests {
    use super::*;

    #[test]
    fn fields_a_services_type_ignores_are_warned_of() {
        let headless = json!({"spec": {"type": "ClusterIP", "clusterIP": "None",
            "sessionAffinity": "ClientIP", "externalIPs": ["10.0.0.1"], "externalName": "x.example"}});
        assert_eq!(
            service_warnings(&headless),
            [
                "spec.externalIPs is ignored for headless services",
                "spec.SessionAffinity is ignored for headless services",
                "spec.externalName is ignored when spec.type is not \"ExternalName\"",
            ]
        );
        let plain = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.43.0.5", "sessionAffinity": "None"}});
        assert!(service_warnings(&plain).is_empty());
    }

    #[test]
    fn addresses_in_forms_other_parsers_read_differently_are_warned_of() {
        let service = json!({"spec": {"type": "LoadBalancer", "clusterIP": "fd00:0:0::5",
            "clusterIPs": ["fd00:0:0::5"], "externalIPs": ["::ffff:192.0.2.1"],
            "loadBalancerIP": "2001:db8:0::1", "loadBalancerSourceRanges": ["10.0.0.8/8"]}});
        assert_eq!(
            service_warnings(&service),
            [
                "spec.clusterIPs[0]: IPv6 address \"fd00:0:0::5\" should be in RFC 5952 canonical format (\"fd00::5\")",
                "spec.externalIPs[0]: non-standard IP address \"::ffff:192.0.2.1\" will be considered invalid in a future Kubernetes release: use \"192.0.2.1\"",
                "spec.loadBalancerIP: IPv6 address \"2001:db8:0::1\" should be in RFC 5952 canonical format (\"2001:db8::1\")",
                "spec.loadBalancerSourceRanges[0]: CIDR value \"10.0.0.8/8\" is ambiguous in this context (should be \"10.0.0.0/8\" or \"10.0.0.8/32\"?)",
            ]
        );
    }
}
