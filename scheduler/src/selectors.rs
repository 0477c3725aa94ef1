//! Label selectors and node selectors, compiled once so matching never re-parses.
//!
//! Semantics follow the Kubernetes API: a `LabelSelector` with no requirements matches
//! everything, an absent selector matches nothing (callers decide); node selector terms
//! are ORed, requirements inside a term are ANDed, and an empty term matches nothing.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Labels of an object, as stored on its metadata.
pub type Labels = BTreeMap<String, String>;

/// Operator of one compiled requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

/// One compiled `key op values` requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

impl Requirement {
    fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        match &self.op {
            Op::In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            Op::NotIn => value.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            Op::Exists => value.is_some(),
            Op::DoesNotExist => value.is_none(),
            Op::Gt(n) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Op::Lt(n) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }
}

/// A compiled pod label selector (`metav1.LabelSelector`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
    /// Set when the selector was invalid: it then matches nothing, which is safe for
    /// affinity (no false matches) and spread (nothing counted).
    nothing: bool,
}

impl Selector {
    /// A selector matching every label set.
    pub fn everything() -> Self {
        Selector::default()
    }

    /// A selector matching no label set.
    pub fn nothing() -> Self {
        Selector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Compiles an API label selector; invalid operators yield a selector matching nothing.
    pub fn from_label_selector(sel: &LabelSelector) -> Self {
        let mut requirements = Vec::new();
        if let Some(ml) = &sel.match_labels {
            for (k, v) in ml {
                requirements.push(Requirement {
                    key: k.clone(),
                    op: Op::In,
                    values: vec![v.clone()],
                });
            }
        }
        for e in sel.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            let op = match e.operator.as_str() {
                "In" if !values.is_empty() => Op::In,
                "NotIn" if !values.is_empty() => Op::NotIn,
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                _ => return Selector::nothing(),
            };
            requirements.push(Requirement {
                key: e.key.clone(),
                op,
                values,
            });
        }
        Selector {
            requirements,
            nothing: false,
        }
    }

    /// Compiles an optional selector: `None` matches nothing.
    pub fn from_optional(sel: Option<&LabelSelector>) -> Self {
        sel.map_or_else(Selector::nothing, Selector::from_label_selector)
    }

    /// Adds `key In (value)` (used for `matchLabelKeys`).
    pub fn require_equal(&mut self, key: &str, value: &str) {
        self.requirements.push(Requirement {
            key: key.into(),
            op: Op::In,
            values: vec![value.into()],
        });
    }

    /// Adds `key NotIn (value)` (used for `mismatchLabelKeys`).
    pub fn require_not_equal(&mut self, key: &str, value: &str) {
        self.requirements.push(Requirement {
            key: key.into(),
            op: Op::NotIn,
            values: vec![value.into()],
        });
    }

    /// True if `labels` satisfy every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// True when the selector matches nothing at all.
    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    /// True when the selector has no requirements and so matches every label set.
    pub fn is_everything(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// A selector requiring every label of `set` (a Service's or ReplicationController's
    /// map selector).
    pub fn from_map(set: &Labels) -> Self {
        let mut s = Selector::everything();
        for (k, v) in set {
            s.require_equal(k, v);
        }
        s
    }

    /// Adds every requirement of `other` (both must then hold).
    pub fn and(&mut self, other: &Selector) {
        self.nothing |= other.nothing;
        self.requirements.extend(other.requirements.iter().cloned());
    }
}

/// One compiled node selector term: label requirements plus `metadata.name` field
/// requirements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTerm {
    labels: Vec<Requirement>,
    fields: Vec<Requirement>,
    /// Invalid terms (bad operators, unsupported fields) match nothing.
    valid: bool,
}

impl NodeTerm {
    /// Compiles an API node selector term.
    pub fn compile(term: &NodeSelectorTerm) -> Self {
        let mut valid = true;
        let labels = term
            .match_expressions
            .iter()
            .flatten()
            .filter_map(|r| {
                let c = compile_node_requirement(r);
                if c.is_none() {
                    valid = false;
                }
                c
            })
            .collect::<Vec<_>>();
        let fields = term
            .match_fields
            .iter()
            .flatten()
            .filter_map(|r| {
                // Only metadata.name with In/NotIn is a supported node field selector.
                let c = compile_node_requirement(r)
                    .filter(|c| r.key == "metadata.name" && matches!(c.op, Op::In | Op::NotIn));
                if c.is_none() {
                    valid = false;
                }
                c
            })
            .collect::<Vec<_>>();
        if labels.is_empty() && fields.is_empty() {
            valid = false;
        }
        NodeTerm {
            labels,
            fields,
            valid,
        }
    }

    /// True if the node (labels and name) satisfies the term.
    pub fn matches(&self, labels: &Labels, node_name: &str) -> bool {
        if !self.valid {
            return false;
        }
        if !self.labels.iter().all(|r| r.matches(labels)) {
            return false;
        }
        if self.fields.is_empty() {
            return true;
        }
        let mut fields = Labels::new();
        fields.insert("metadata.name".to_string(), node_name.to_string());
        self.fields.iter().all(|r| r.matches(&fields))
    }

    /// Node names this term is restricted to by `metadata.name In (...)`, if any.
    pub fn name_restriction(&self) -> Option<Vec<String>> {
        if !self.valid {
            return Some(Vec::new());
        }
        let mut out: Option<Vec<String>> = None;
        for f in &self.fields {
            if f.op == Op::In {
                out = Some(match out {
                    None => f.values.clone(),
                    Some(prev) => prev.into_iter().filter(|n| f.values.contains(n)).collect(),
                });
            }
        }
        out
    }
}

fn compile_node_requirement(r: &NodeSelectorRequirement) -> Option<Requirement> {
    let values = r.values.clone().unwrap_or_default();
    let single_int = || -> Option<i64> {
        if values.len() == 1 {
            values[0].parse::<i64>().ok()
        } else {
            None
        }
    };
    let op = match r.operator.as_str() {
        "In" if !values.is_empty() => Op::In,
        "NotIn" if !values.is_empty() => Op::NotIn,
        "Exists" if values.is_empty() => Op::Exists,
        "DoesNotExist" if values.is_empty() => Op::DoesNotExist,
        "Gt" => Op::Gt(single_int()?),
        "Lt" => Op::Lt(single_int()?),
        _ => return None,
    };
    Some(Requirement {
        key: r.key.clone(),
        op,
        values,
    })
}

/// A compiled `NodeSelector`: the node matches if any term matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledNodeSelector {
    terms: Vec<NodeTerm>,
}

impl CompiledNodeSelector {
    /// Compiles an API node selector.
    pub fn compile(sel: &NodeSelector) -> Self {
        CompiledNodeSelector {
            terms: sel
                .node_selector_terms
                .iter()
                .map(NodeTerm::compile)
                .collect(),
        }
    }

    /// True if any term matches the node.
    pub fn matches(&self, labels: &Labels, node_name: &str) -> bool {
        self.terms.iter().any(|t| t.matches(labels, node_name))
    }

    /// True if any term matches the node object.
    pub fn matches_node(&self, node: &Node) -> bool {
        self.matches(
            node_labels(node),
            node.metadata.name.as_deref().unwrap_or(""),
        )
    }

    /// The union of node names the terms restrict to, or `None` if some term allows any
    /// node name.
    pub fn name_restriction(&self) -> Option<Vec<String>> {
        let mut all = Vec::new();
        for t in &self.terms {
            all.extend(t.name_restriction()?);
        }
        all.sort();
        all.dedup();
        Some(all)
    }
}

static EMPTY_LABELS: Labels = Labels::new();

/// A node's labels, or an empty set.
pub fn node_labels(node: &Node) -> &Labels {
    node.metadata.labels.as_ref().unwrap_or(&EMPTY_LABELS)
}

/// An object's labels from its metadata, or an empty set.
pub fn labels_of(labels: &Option<Labels>) -> &Labels {
    labels.as_ref().unwrap_or(&EMPTY_LABELS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
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

    #[test]
    fn node_requirement_operators() {
        let l = labels(&[("zone", "a"), ("gen", "5")]);
        let cases = [
            (req("zone", "In", &["a", "b"]), true),
            (req("zone", "In", &["b"]), false),
            (req("zone", "NotIn", &["b"]), true),
            (req("missing", "NotIn", &["b"]), true),
            (req("zone", "Exists", &[]), true),
            (req("missing", "Exists", &[]), false),
            (req("missing", "DoesNotExist", &[]), true),
            (req("gen", "Gt", &["4"]), true),
            (req("gen", "Gt", &["5"]), false),
            (req("gen", "Lt", &["6"]), true),
            (req("zone", "Lt", &["6"]), false),
            (req("gen", "Gt", &["x"]), false),
            (req("zone", "Bogus", &["a"]), false),
        ];
        for (r, want) in cases {
            let term = NodeTerm::compile(&NodeSelectorTerm {
                match_expressions: Some(vec![r.clone()]),
                match_fields: None,
            });
            assert_eq!(term.matches(&l, "n1"), want, "{r:?}");
        }
    }

    #[test]
    fn match_fields_and_empty_terms() {
        let term = NodeTerm::compile(&NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![req("metadata.name", "In", &["n1", "n2"])]),
        });
        assert!(term.matches(&Labels::new(), "n1"));
        assert!(!term.matches(&Labels::new(), "n3"));
        assert_eq!(
            term.name_restriction(),
            Some(vec!["n1".to_string(), "n2".to_string()])
        );
        let empty = NodeTerm::compile(&NodeSelectorTerm::default());
        assert!(!empty.matches(&Labels::new(), "n1"));
    }

    #[test]
    fn label_selector_semantics() {
        let l = labels(&[("app", "web"), ("tier", "fe")]);
        assert!(Selector::everything().matches(&l));
        assert!(!Selector::nothing().matches(&l));
        let sel = Selector::from_label_selector(&LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "NotIn".into(),
                values: Some(vec!["be".into()]),
            }]),
        });
        assert!(sel.matches(&l));
        assert!(!sel.matches(&labels(&[("app", "db")])));
        let mut with_key = sel.clone();
        with_key.require_equal("version", "1");
        assert!(!with_key.matches(&l));
    }
}
