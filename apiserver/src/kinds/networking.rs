//! `networking.k8s.io/v1` NetworkPolicies: which directions a policy
//! governs when it does not list them (always ingress, egress once it has
//! egress rules), and TCP for ports that name no protocol. IngressClasses:
//! parameters are cluster-scoped unless they say.

use serde_json::{Value, json};

use super::{KindStrategy, set_default};
use crate::object::{items_mut, path_mut};
use crate::registry::ResourceInfo;

/// The `networkpolicies` resource.
#[derive(Debug)]
pub(crate) struct NetworkPolicies;

impl KindStrategy for NetworkPolicies {
    fn apply_spec_defaults(&self, _info: &ResourceInfo, spec: &mut Value) {
        for direction in ["ingress", "egress"] {
            for port in items_mut(spec, &[direction]).flat_map(|r| items_mut(r, &["ports"])) {
                set_default(port, "protocol", json!("TCP"));
            }
        }
        let listed = spec
            .get("policyTypes")
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty());
        if !listed {
            let egress = spec
                .get("egress")
                .and_then(Value::as_array)
                .is_some_and(|e| !e.is_empty());
            let types = if egress {
                json!(["Ingress", "Egress"])
            } else {
                json!(["Ingress"])
            };
            spec["policyTypes"] = types;
        }
    }
}

/// The `ingressclasses` resource.
#[derive(Debug)]
pub(crate) struct IngressClasses;

impl KindStrategy for IngressClasses {
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        if let Some(parameters) =
            path_mut(object, &["spec", "parameters"]).filter(|p| p.is_object())
        {
            set_default(parameters, "scope", json!("Cluster"));
        }
    }
}
