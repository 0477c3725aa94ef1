//! How values merge and are owned field by field: which lists are
//! associative (and by which keys), which are sets, which lists and maps are
//! one atomic value. Built-in kinds follow their Go types' list markers
//! (derived from the strategic-merge keys, with the multi-field keys server-side
//! apply uses); custom resources without schema knowledge get upstream's
//! "deduced" schema: every list atomic, every map field by field.

use serde_json::Value;

use crate::patch::strategic_schema::{ListStrategy, list_strategy};

/// One key field of an associative list, with the value assumed when an
/// element omits it (as `protocol: TCP` for ports).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyField {
    pub name: &'static str,
    pub default: Option<Value>,
}

/// How a list is merged and owned.
#[derive(Debug, Clone, PartialEq)]
pub enum ListType {
    /// The whole list is one value, owned and replaced as a unit.
    Atomic,
    /// Scalars, each owned on its own (`v:<value>`).
    Set,
    /// Objects named by their key fields (`k:{...}`), merged item by item.
    Map(Vec<KeyField>),
}

/// Schema knowledge the field manager needs. `fields` is the field-name path
/// from the object root, list elements left out (as in
/// `["spec", "template", "spec", "containers", "ports"]`).
pub trait Schema: Sync {
    /// How the list at `fields` behaves.
    fn list_type(&self, fields: &[&str]) -> ListType;
    /// Whether the object at `fields` is owned and replaced as a unit.
    fn atomic_map(&self, fields: &[&str]) -> bool;
}

/// The built-in Kubernetes kinds.
pub(crate) struct Builtin;

/// Upstream's schema for objects it knows nothing about: lists atomic,
/// maps granular.
pub(crate) struct Deduced;

const CONTAINER_LISTS: &[&str] = &["containers", "initContainers", "ephemeralContainers"];

fn key(name: &'static str) -> KeyField {
    KeyField {
        name,
        default: None,
    }
}

fn protocol() -> KeyField {
    KeyField {
        name: "protocol",
        default: Some(Value::String("TCP".into())),
    }
}

impl Schema for Builtin {
    fn list_type(&self, fields: &[&str]) -> ListType {
        let Some((field, parents)) = fields.split_last() else {
            return ListType::Atomic;
        };
        let parent = parents.last().copied().unwrap_or("");
        match *field {
            "ports" if CONTAINER_LISTS.contains(&parent) => {
                return ListType::Map(vec![key("containerPort"), protocol()]);
            }
            "ports" if parent == "spec" && parents.len() == 1 => {
                return ListType::Map(vec![key("port"), protocol()]);
            }
            "topologySpreadConstraints" => {
                return ListType::Map(vec![key("topologyKey"), key("whenUnsatisfiable")]);
            }
            _ => {}
        }
        match list_strategy(fields) {
            ListStrategy::Replace => ListType::Atomic,
            ListStrategy::MergePrimitives => ListType::Set,
            ListStrategy::MergeByKey(name) => ListType::Map(vec![key(name)]),
        }
    }

    fn atomic_map(&self, fields: &[&str]) -> bool {
        // Label selectors (and the Service selector) are atomic upstream.
        matches!(
            fields.last().copied(),
            Some("selector" | "labelSelector" | "namespaceSelector" | "podSelector")
        )
    }
}

impl Schema for Deduced {
    fn list_type(&self, _fields: &[&str]) -> ListType {
        ListType::Atomic
    }

    fn atomic_map(&self, _fields: &[&str]) -> bool {
        false
    }
}

/// Groups whose kinds skiff serves from typed k8s-openapi structs.
fn builtin_group(group: &str) -> bool {
    group.is_empty()
        || group.ends_with(".k8s.io")
        || matches!(group, "apps" | "batch" | "autoscaling" | "policy")
}

/// The schema for objects of `group`: built-in knowledge for the built-in
/// groups, the deduced schema for everything else (custom resources).
pub(crate) fn for_group(group: &str) -> &'static dyn Schema {
    if builtin_group(group) {
        &Builtin
    } else {
        &Deduced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_keyed_with_their_protocol() {
        let container_ports = Builtin.list_type(&["spec", "containers", "ports"]);
        assert_eq!(
            container_ports,
            ListType::Map(vec![key("containerPort"), protocol()])
        );
        assert_eq!(
            Builtin.list_type(&["spec", "ports"]),
            ListType::Map(vec![key("port"), protocol()])
        );
        assert_eq!(
            Builtin.list_type(&["spec", "template", "spec", "containers"]),
            ListType::Map(vec![key("name")])
        );
        assert_eq!(
            Builtin.list_type(&["metadata", "finalizers"]),
            ListType::Set
        );
        assert_eq!(
            Builtin.list_type(&["spec", "containers", "args"]),
            ListType::Atomic
        );
        assert_eq!(Deduced.list_type(&["spec", "containers"]), ListType::Atomic);
        assert!(for_group("apps").atomic_map(&["spec", "selector"]));
        assert!(!for_group("example.com").atomic_map(&["spec", "selector"]));
    }
}
