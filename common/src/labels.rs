//! Label-selector matching, compiled once so matching never re-parses: the
//! requirements (`key In (a,b)`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`,
//! `Lt`) that `metav1.LabelSelector`, node selector terms and the
//! `labelSelector` query syntax all come down to.
//!
//! Semantics follow the Kubernetes API: a selector with no requirements
//! matches everything; a selector that could not be compiled (an unknown
//! operator, `In` without values) matches nothing, which is the safe reading
//! for affinity and spreading. The query-syntax parser and its error wording
//! stay with the API server; this module only matches.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Labels of an object, as stored on its metadata.
pub type Labels = BTreeMap<String, String>;

/// Labels from `(key, value)` pairs (tests and builders).
pub fn from_pairs(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// What one requirement asks of a label's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operator {
    /// The label is present with one of these values.
    In(Vec<String>),
    /// The label is absent or has none of these values.
    NotIn(Vec<String>),
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label is an integer greater than this.
    Gt(i64),
    /// The label is an integer less than this.
    Lt(i64),
}

/// One `key operator values` requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// What the label's value must satisfy.
    pub op: Operator,
}

impl Requirement {
    /// A requirement on `key`.
    pub fn new(key: impl Into<String>, op: Operator) -> Self {
        Self {
            key: key.into(),
            op,
        }
    }

    /// Whether the value `value_of(key)` satisfies the requirement (`None`
    /// for a missing label).
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        match &self.op {
            Operator::In(values) => value.is_some_and(|v| values.iter().any(|x| x == v)),
            Operator::NotIn(values) => value.is_none_or(|v| !values.iter().any(|x| x == v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::Gt(n) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Operator::Lt(n) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }

    /// Whether `labels` satisfy the requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.matches_value(labels.get(&self.key).map(String::as_str))
    }
}

/// A compiled label selector: every requirement must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
    /// Set when the selector could not be compiled: it then matches nothing.
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

    /// A selector of these requirements.
    pub fn from_requirements(requirements: Vec<Requirement>) -> Self {
        Selector {
            requirements,
            nothing: false,
        }
    }

    /// Compiles an API label selector; an invalid operator (or `In`/`NotIn`
    /// without values) yields a selector matching nothing.
    pub fn from_label_selector(sel: &LabelSelector) -> Self {
        let mut requirements = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            requirements.push(Requirement::new(k, Operator::In(vec![v.clone()])));
        }
        for e in sel.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            let op = match e.operator.as_str() {
                "In" if !values.is_empty() => Operator::In(values),
                "NotIn" if !values.is_empty() => Operator::NotIn(values),
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                _ => return Selector::nothing(),
            };
            requirements.push(Requirement::new(&e.key, op));
        }
        Selector::from_requirements(requirements)
    }

    /// Compiles an optional selector: `None` matches nothing.
    pub fn from_optional(sel: Option<&LabelSelector>) -> Self {
        sel.map_or_else(Selector::nothing, Selector::from_label_selector)
    }

    /// A selector requiring every label of `set` (a Service's or
    /// ReplicationController's map selector).
    pub fn from_map(set: &Labels) -> Self {
        let mut s = Selector::everything();
        for (k, v) in set {
            s.require_equal(k, v);
        }
        s
    }

    /// Adds `key In (value)` (used for `matchLabelKeys`).
    pub fn require_equal(&mut self, key: &str, value: &str) {
        self.requirements
            .push(Requirement::new(key, Operator::In(vec![value.into()])));
    }

    /// Adds `key NotIn (value)` (used for `mismatchLabelKeys`).
    pub fn require_not_equal(&mut self, key: &str, value: &str) {
        self.requirements
            .push(Requirement::new(key, Operator::NotIn(vec![value.into()])));
    }

    /// Adds every requirement of `other` (both must then hold).
    pub fn and(&mut self, other: &Selector) {
        self.nothing |= other.nothing;
        self.requirements.extend(other.requirements.iter().cloned());
    }

    /// True if `labels` satisfy every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// As [`matches`](Self::matches), reading each label through `value_of`
    /// (for labels held in another shape, such as JSON).
    pub fn matches_with<'a>(&self, value_of: impl Fn(&str) -> Option<&'a str>) -> bool {
        !self.nothing
            && self
                .requirements
                .iter()
                .all(|r| r.matches_value(value_of(&r.key)))
    }

    /// The requirements, in order.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// True when the selector matches nothing at all.
    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    /// True when the selector has no requirements and so matches every label set.
    pub fn is_everything(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::from_pairs as labels;

    /// The values of an `In` or `NotIn` operator.
    fn values(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn operators_read_the_label_value() {
        use Operator::*;
        let l = labels(&[("zone", "a"), ("gen", "5")]);
        let cases = [
            ("zone", In(values(&["a", "b"])), true),
            ("zone", In(values(&["b"])), false),
            ("zone", NotIn(values(&["b"])), true),
            ("missing", NotIn(values(&["b"])), true),
            ("zone", Exists, true),
            ("missing", DoesNotExist, true),
            ("gen", Gt(4), true),
            ("gen", Gt(5), false),
            ("gen", Lt(6), true),
            ("zone", Lt(6), false),
        ];
        for (key, op, want) in cases {
            let r = Requirement::new(key, op);
            assert_eq!(r.matches(&l), want, "{r:?}");
        }
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
        assert!(sel.matches_with(|k| l.get(k).map(String::as_str)));
        assert!(!sel.matches(&labels(&[("app", "db")])));
        let mut with_key = sel.clone();
        with_key.require_equal("version", "1");
        assert!(!with_key.matches(&l));
        let bad = Selector::from_label_selector(&LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "In".into(),
                values: None,
            }]),
        });
        assert!(bad.is_nothing() && !bad.matches(&l));
        assert!(!Selector::from_optional(None).matches(&l));
    }
}
