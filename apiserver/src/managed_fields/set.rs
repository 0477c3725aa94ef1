//! Sets of field paths, as `metadata.managedFields[].fieldsV1` encodes them.
//!
//! A path is a list of [`PathElement`]s kept in their FieldsV1 key form
//! (`f:name`, `k:{"name":"c"}`, `v:"x"`, `i:0`), so sets compare, sort and
//! encode without another representation. A set is a tree: each node says
//! whether the path ending there is a member, and holds the longer paths.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// The FieldsV1 key that marks the path of an object as a member itself.
const SELF: &str = ".";

/// A FieldsV1 document that is not a well-formed field set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetError {
    #[error("fieldsV1 must be a JSON object, found {0}")]
    NotAnObject(String),
    #[error("invalid field path element {0:?}")]
    BadElement(String),
}

/// One step of a field path, in its FieldsV1 key form.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PathElement(String);

impl PathElement {
    /// A named field of an object.
    pub fn field(name: &str) -> Self {
        Self(format!("f:{name}"))
    }

    /// An element of an associative list, named by its key fields.
    pub fn key(fields: &[(String, Value)]) -> Self {
        let mut sorted: Vec<&(String, Value)> = fields.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let body: Vec<String> = sorted
            .iter()
            .map(|(name, value)| format!("{}:{}", Value::String(name.clone()), canonical(value)))
            .collect();
        Self(format!("k:{{{}}}", body.join(",")))
    }

    /// An element of a list used as a set, named by its value.
    pub fn value(value: &Value) -> Self {
        Self(format!("v:{}", canonical(value)))
    }

    /// An element of a list by position (lists whose items cannot be named).
    pub fn index(index: usize) -> Self {
        Self(format!("i:{index}"))
    }

    /// Reads a FieldsV1 key, normalising the JSON of `k:` and `v:` forms.
    pub fn parse(text: &str) -> Result<Self, SetError> {
        let bad = || SetError::BadElement(text.to_string());
        let (prefix, rest) = text.split_at_checked(2).ok_or_else(bad)?;
        match prefix {
            "f:" => Ok(Self(text.to_string())),
            "i:" => rest.parse::<usize>().map(Self::index).map_err(|_| bad()),
            "v:" => serde_json::from_str::<Value>(rest)
                .map(|v| Self::value(&v))
                .map_err(|_| bad()),
            "k:" => match serde_json::from_str::<Value>(rest) {
                Ok(Value::Object(map)) => {
                    let fields: Vec<(String, Value)> = map.into_iter().collect();
                    Ok(Self::key(&fields))
                }
                _ => Err(bad()),
            },
            _ => Err(bad()),
        }
    }

    /// The FieldsV1 key.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The field name, when this element names a field.
    pub fn field_name(&self) -> Option<&str> {
        self.0.strip_prefix("f:")
    }

    /// The element as upstream prints it in conflict messages:
    /// `.name`, `[name="c",port=80]`, `[="x"]`, `[0]`.
    pub fn display(&self) -> String {
        let (prefix, rest) = self.0.split_at(2);
        match prefix {
            "f:" => format!(".{rest}"),
            "i:" => format!("[{rest}]"),
            "v:" => format!("[={rest}]"),
            _ => match serde_json::from_str::<Map<String, Value>>(rest) {
                Ok(map) => {
                    let parts: Vec<String> = map.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    format!("[{}]", parts.join(","))
                }
                Err(_) => format!("[{rest}]"),
            },
        }
    }
}

/// JSON text with object keys sorted, so equal values give equal elements.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let body: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&map[*k])))
                .collect();
            format!("{{{}}}", body.join(","))
        }
        Value::Array(items) => {
            let body: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", body.join(","))
        }
        other => other.to_string(),
    }
}

/// A field path, from the object root.
pub(crate) type Path = Vec<PathElement>;

/// Prints a path as upstream does in conflict messages (`.spec.replicas`).
pub(crate) fn display_path(path: &[PathElement]) -> String {
    path.iter().map(PathElement::display).collect()
}

/// A set of field paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    nodes: BTreeMap<PathElement, Node>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Node {
    member: bool,
    children: FieldSet,
}

impl Node {
    fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Adds `path` (the empty path is not a field and is ignored).
    pub fn insert(&mut self, path: &[PathElement]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        let node = self.nodes.entry(first.clone()).or_default();
        if rest.is_empty() {
            node.member = true;
        } else {
            node.children.insert(rest);
        }
    }

    /// Whether `path` itself is a member.
    pub fn contains(&self, path: &[PathElement]) -> bool {
        let Some((first, rest)) = path.split_first() else {
            return false;
        };
        match self.nodes.get(first) {
            Some(node) if rest.is_empty() => node.member,
            Some(node) => node.children.contains(rest),
            None => false,
        }
    }

    /// Whether `element` (one step below this set's root) is a member.
    pub fn has_member(&self, element: &PathElement) -> bool {
        self.nodes.get(element).is_some_and(|n| n.member)
    }

    /// The paths below `element`, relative to it.
    pub fn children(&self, element: &PathElement) -> Option<&FieldSet> {
        self.nodes
            .get(element)
            .map(|n| &n.children)
            .filter(|c| !c.is_empty())
    }

    /// Paths in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.union_with(other);
        out
    }

    /// Adds every path of `other` (in place: only what `self` lacks is
    /// copied).
    pub fn union_with(&mut self, other: &FieldSet) {
        for (element, node) in &other.nodes {
            match self.nodes.get_mut(element) {
                Some(mine) => {
                    mine.member |= node.member;
                    mine.children.union_with(&node.children);
                }
                None => {
                    self.nodes.insert(element.clone(), node.clone());
                }
            }
        }
    }

    /// Paths of `self` that are not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        for (element, node) in &self.nodes {
            let kept = match other.nodes.get(element) {
                None => node.clone(),
                Some(theirs) => Node {
                    member: node.member && !theirs.member,
                    children: node.children.difference(&theirs.children),
                },
            };
            if !kept.is_empty() {
                out.nodes.insert(element.clone(), kept);
            }
        }
        out
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        for (element, node) in &self.nodes {
            if let Some(theirs) = other.nodes.get(element) {
                let kept = Node {
                    member: node.member && theirs.member,
                    children: node.children.intersection(&theirs.children),
                };
                if !kept.is_empty() {
                    out.nodes.insert(element.clone(), kept);
                }
            }
        }
        out
    }

    /// Every member path, in sorted order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        self.collect_paths(&mut prefix, &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for (element, node) in &self.nodes {
            prefix.push(element.clone());
            if node.member {
                out.push(prefix.clone());
            }
            node.children.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The FieldsV1 form: one key per element, `{}` for a member without
    /// longer paths, `".": {}` for a member that also has them.
    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        for (element, node) in &self.nodes {
            let value = if node.children.is_empty() {
                Value::Object(Map::new())
            } else {
                let mut inner = match node.children.to_fields_v1() {
                    Value::Object(m) => m,
                    _ => Map::new(),
                };
                if node.member {
                    inner.insert(SELF.into(), Value::Object(Map::new()));
                }
                Value::Object(inner)
            };
            map.insert(element.as_str().to_string(), value);
        }
        Value::Object(map)
    }

    /// Reads a FieldsV1 document.
    pub fn from_fields_v1(value: &Value) -> Result<FieldSet, SetError> {
        let Value::Object(map) = value else {
            return Err(SetError::NotAnObject(value.to_string()));
        };
        let mut out = FieldSet::new();
        for (key, child) in map {
            if key == SELF {
                continue;
            }
            let element = PathElement::parse(key)?;
            let Value::Object(inner) = child else {
                return Err(SetError::NotAnObject(child.to_string()));
            };
            let children = FieldSet::from_fields_v1(child)?;
            let node = Node {
                member: inner.is_empty() || inner.contains_key(SELF),
                children,
            };
            out.nodes.insert(element, node);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    /// Found by the `managed_fields` fuzz target: a float in a list key read
    /// back as its neighbour (serde_json's fast float parsing is not exact),
    /// so a stored key stopped naming its item after one write.
    #[test]
    fn keys_holding_floats_read_back_unchanged() {
        let port: serde_json::Value = serde_json::from_str("7.777777777777776e+105").unwrap();
        let key = super::PathElement::key(&[("containerPort".into(), port)]);
        let again = super::PathElement::parse(key.as_str()).unwrap();
        assert_eq!(again, key);
        let value = super::PathElement::value(&serde_json::json!(0.30000000000000004));
        assert_eq!(super::PathElement::parse(value.as_str()).unwrap(), value);
    }

    use super::*;
    use serde_json::json;

    fn f(name: &str) -> PathElement {
        PathElement::field(name)
    }

    #[test]
    fn key_elements_are_canonical() {
        let a = PathElement::key(&[
            ("protocol".into(), json!("TCP")),
            ("containerPort".into(), json!(80)),
        ]);
        assert_eq!(a.as_str(), r#"k:{"containerPort":80,"protocol":"TCP"}"#);
        let parsed = PathElement::parse(r#"k:{"protocol":"TCP", "containerPort":80}"#).unwrap();
        assert_eq!(parsed, a);
        assert_eq!(a.display(), r#"[containerPort=80,protocol="TCP"]"#);
        assert_eq!(PathElement::value(&json!("x")).as_str(), r#"v:"x""#);
        assert_eq!(PathElement::value(&json!("x")).display(), r#"[="x"]"#);
        assert!(PathElement::parse("q:x").is_err());
        assert!(PathElement::parse("k:[1]").is_err());
    }

    #[test]
    fn encodes_members_with_children_using_dot() {
        let item = PathElement::key(&[("name".into(), json!("c"))]);
        let mut set = FieldSet::new();
        set.insert(&[f("data"), f("a")]);
        set.insert(&[f("spec"), f("containers"), item.clone()]);
        set.insert(&[f("spec"), f("containers"), item.clone(), f("image")]);
        let encoded = set.to_fields_v1();
        assert_eq!(
            encoded,
            json!({
                "f:data": {"f:a": {}},
                "f:spec": {"f:containers": {r#"k:{"name":"c"}"#: {".": {}, "f:image": {}}}}
            })
        );
        assert_eq!(FieldSet::from_fields_v1(&encoded).unwrap(), set);
        assert!(set.contains(&[f("spec"), f("containers"), item.clone()]));
        assert!(!set.contains(&[f("spec"), f("containers")]));
        assert_eq!(
            display_path(&[f("spec"), f("containers"), item, f("image")]),
            r#".spec.containers[name="c"].image"#
        );
    }

    #[test]
    fn set_algebra() {
        let mut a = FieldSet::new();
        a.insert(&[f("data"), f("x")]);
        a.insert(&[f("data"), f("y")]);
        let mut b = FieldSet::new();
        b.insert(&[f("data"), f("y")]);
        b.insert(&[f("data"), f("z")]);
        let paths =
            |s: &FieldSet| -> Vec<String> { s.paths().iter().map(|p| display_path(p)).collect() };
        assert_eq!(paths(&a.union(&b)), vec![".data.x", ".data.y", ".data.z"]);
        assert_eq!(paths(&a.difference(&b)), vec![".data.x"]);
        assert_eq!(paths(&a.intersection(&b)), vec![".data.y"]);
        assert!(
            a.difference(&a).is_empty(),
            "no empty nodes are left behind"
        );
    }

    #[test]
    fn rejects_malformed_documents() {
        assert!(FieldSet::from_fields_v1(&json!([])).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"f:a": 1})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"nope": {}})).is_err());
    }
}
