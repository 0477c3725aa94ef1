//! Node selectors, compiled once so matching never re-parses, on the label requirements
//! of `skiff_common::labels` (whose `Selector` the scheduler uses for pod label
//! selectors).
//!
//! Semantics follow the Kubernetes API: node selector terms are ORed, requirements
//! inside a term are ANDed, and an empty or invalid term matches nothing.

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use skiff_common::labels::{Operator, Requirement};

pub(crate) use skiff_common::labels::{Labels, Selector};

/// One compiled node selector term: label requirements plus `metadata.name` field
/// requirements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeTerm {
    labels: Vec<Requirement>,
    fields: Vec<Requirement>,
    /// Invalid terms (bad operators, unsupported fields) match nothing.
    valid: bool,
}

impl NodeTerm {
    /// Compiles an API node selector term.
    pub(crate) fn compile(term: &NodeSelectorTerm) -> Self {
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
                let c = compile_node_requirement(r).filter(|c| {
                    r.key == "metadata.name" && matches!(c.op, Operator::In(_) | Operator::NotIn(_))
                });
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
    pub(crate) fn matches(&self, labels: &Labels, node_name: &str) -> bool {
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
    pub(crate) fn name_restriction(&self) -> Option<Vec<String>> {
        if !self.valid {
            return Some(Vec::new());
        }
        let mut out: Option<Vec<String>> = None;
        for f in &self.fields {
            if let Operator::In(values) = &f.op {
                out = Some(match out {
                    None => values.clone(),
                    Some(prev) => prev.into_iter().filter(|n| values.contains(n)).collect(),
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
        "In" if !values.is_empty() => Operator::In(values),
        "NotIn" if !values.is_empty() => Operator::NotIn(values),
        "Exists" if values.is_empty() => Operator::Exists,
        "DoesNotExist" if values.is_empty() => Operator::DoesNotExist,
        "Gt" => Operator::Gt(single_int()?),
        "Lt" => Operator::Lt(single_int()?),
        _ => return None,
    };
    Some(Requirement::new(&r.key, op))
}

/// A compiled `NodeSelector`: the node matches if any term matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CompiledNodeSelector {
    terms: Vec<NodeTerm>,
}

impl CompiledNodeSelector {
    /// Compiles an API node selector.
    pub(crate) fn compile(sel: &NodeSelector) -> Self {
        CompiledNodeSelector {
            terms: sel
                .node_selector_terms
                .iter()
                .map(NodeTerm::compile)
                .collect(),
        }
    }

    /// True if any term matches the node.
    pub(crate) fn matches(&self, labels: &Labels, node_name: &str) -> bool {
        self.terms.iter().any(|t| t.matches(labels, node_name))
    }

    /// The union of node names the terms restrict to, or `None` if some term allows any
    /// node name.
    pub(crate) fn name_restriction(&self) -> Option<Vec<String>> {
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
pub(crate) fn node_labels(node: &Node) -> &Labels {
    node.metadata.labels.as_ref().unwrap_or(&EMPTY_LABELS)
}

/// An object's labels from its metadata, or an empty set.
pub(crate) fn labels_of(labels: &Option<Labels>) -> &Labels {
    labels.as_ref().unwrap_or(&EMPTY_LABELS)
}

#[cfg(test)]
mod tests {
    use super::*;

    use skiff_common::labels::from_pairs as labels;

    use crate::testing::node_req as req;

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
}
