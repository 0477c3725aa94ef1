//! The value algorithms of field management, all driven by a [`Schema`]:
//! the set of fields a value sets, the difference between two values as
//! field sets, the merge of an applied configuration into a live object, and
//! the removal of a set of fields from a value.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::schema::{ListType, Schema};
use super::set::{FieldSet, Path, PathElement, display_path};

/// A value the schema cannot place (a list element without its key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct WalkError {
    /// Where, as upstream prints paths (`.spec.containers[0]`).
    pub path: String,
    pub message: String,
}

/// Where a walk is: the field names (for the schema) and the full path.
#[derive(Default)]
struct Cursor {
    fields: Vec<String>,
    path: Path,
}

impl Cursor {
    fn names(&self) -> Vec<&str> {
        self.fields.iter().map(String::as_str).collect()
    }

    fn list_type(&self, schema: &dyn Schema) -> ListType {
        schema.list_type(&self.names())
    }

    fn atomic_map(&self, schema: &dyn Schema) -> bool {
        !self.path.is_empty() && schema.atomic_map(&self.names())
    }

    fn enter_field(&mut self, name: &str) {
        self.fields.push(name.to_string());
        self.path.push(PathElement::field(name));
    }

    fn leave_field(&mut self) {
        self.fields.pop();
        self.path.pop();
    }
}

/// The element naming `item` in a list of `list_type`, if it can be named.
fn item_element(list_type: &ListType, item: &Value) -> Result<PathElement, String> {
    match list_type {
        ListType::Set => match item {
            Value::Object(_) | Value::Array(_) => {
                Err("a set list may only hold scalar values".to_string())
            }
            scalar => Ok(PathElement::value(scalar)),
        },
        ListType::Map(keys) => {
            let Value::Object(map) = item else {
                return Err("an associative list may only hold objects".to_string());
            };
            let mut fields = Vec::with_capacity(keys.len());
            for key in keys {
                match map
                    .get(key.name)
                    .filter(|v| !v.is_null())
                    .or(key.default.as_ref())
                {
                    Some(v) => fields.push((key.name.to_string(), v.clone())),
                    None => {
                        return Err(format!(
                            "associative list with keys has an element that omits key field {:?} (and doesn't have default value)",
                            key.name
                        ));
                    }
                }
            }
            Ok(PathElement::key(&fields))
        }
        ListType::Atomic => Err("atomic lists have no elements of their own".to_string()),
    }
}

/// Elements of a stored list: by name where possible, by position otherwise
/// (a stored object is never rejected for a list the schema cannot name).
fn stored_elements(list_type: &ListType, items: &[Value]) -> Vec<PathElement> {
    let mut seen = HashSet::new();
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item_element(list_type, item) {
            Ok(pe) if seen.insert(pe.clone()) => pe,
            _ => PathElement::index(i),
        })
        .collect()
}

/// Whether the list at the cursor is merged item by item.
fn granular(list_type: &ListType) -> bool {
    !matches!(list_type, ListType::Atomic)
}

/// The fields an applied configuration sets: every leaf, every atomic value
/// and every element of a set or associative list. Fails on elements without
/// their key and on duplicates, as upstream rejects such configurations.
pub(crate) fn applied_fields(schema: &dyn Schema, config: &Value) -> Result<FieldSet, WalkError> {
    let mut out = FieldSet::new();
    collect_applied(schema, config, &mut Cursor::default(), &mut out)?;
    Ok(out)
}

fn collect_applied(
    schema: &dyn Schema,
    value: &Value,
    at: &mut Cursor,
    out: &mut FieldSet,
) -> Result<(), WalkError> {
    match value {
        Value::Object(map) if !at.atomic_map(schema) => {
            for (name, child) in map {
                at.enter_field(name);
                collect_applied(schema, child, at, out)?;
                at.leave_field();
            }
        }
        Value::Array(items) => {
            let list_type = at.list_type(schema);
            if !granular(&list_type) {
                out.insert(&at.path);
                return Ok(());
            }
            let mut seen = HashSet::new();
            for (i, item) in items.iter().enumerate() {
                let element = item_element(&list_type, item).map_err(|message| WalkError {
                    path: format!("{}[{i}]", display_path(&at.path)),
                    message,
                })?;
                if !seen.insert(element.clone()) {
                    return Err(WalkError {
                        path: display_path(&at.path),
                        message: format!("duplicate entries for key {}", element.display()),
                    });
                }
                at.path.push(element);
                out.insert(&at.path);
                if item.is_object() {
                    collect_applied(schema, item, at, out)?;
                }
                at.path.pop();
            }
        }
        _ => out.insert(&at.path),
    }
    Ok(())
}

/// What changed from one value to the next, as field sets.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    /// Fields that now hold a value another writer did not set.
    pub(crate) fn changed(&self) -> FieldSet {
        self.added.union(&self.modified)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }
}

/// Fields of objects that always exist in a typed object, so their
/// appearance is not an addition of the object itself (upstream's zero-value
/// structs): no `.` entry is recorded for them.
fn always_present(element: &PathElement) -> bool {
    matches!(
        element.field_name(),
        Some("metadata" | "spec" | "status" | "template")
    )
}

/// Compares `old` and `new`: leaves and atomic values that appeared,
/// changed or went away, plus the objects and list elements that appeared
/// or went away as a whole.
pub(crate) fn compare(schema: &dyn Schema, old: &Value, new: &Value) -> Comparison {
    let mut comparing = Comparing {
        schema,
        at: Cursor::default(),
        out: Comparison::default(),
    };
    comparing.values(Some(old), Some(new));
    comparing.out
}

/// A comparison under way: the schema it follows, where it is, and what
/// it has found so far.
struct Comparing<'s> {
    schema: &'s dyn Schema,
    at: Cursor,
    out: Comparison,
}

impl Comparing<'_> {
    /// Compares the values at the cursor, recording what changed below it.
    fn values(&mut self, old: Option<&Value>, new: Option<&Value>) {
        let schema = self.schema;
        match (old, new) {
            (None, None) => {}
            (Some(gone), None) => {
                let mut set = FieldSet::new();
                whole(schema, gone, &mut self.at, &mut set);
                self.out.removed.union_with(&set);
            }
            (None, Some(came)) => {
                let mut set = FieldSet::new();
                whole(schema, came, &mut self.at, &mut set);
                self.out.added.union_with(&set);
            }
            (Some(Value::Object(a)), Some(Value::Object(b)))
                if !(self.at.atomic_map(schema) || a.is_empty() && b.is_empty()) =>
            {
                let names: Vec<&String> = a
                    .keys()
                    .chain(b.keys().filter(|k| !a.contains_key(*k)))
                    .collect();
                for name in names {
                    self.at.enter_field(name);
                    self.values(a.get(name), b.get(name));
                    self.at.leave_field();
                }
            }
            (Some(Value::Array(a)), Some(Value::Array(b)))
                if !(a.is_empty() && b.is_empty()) && granular(&self.at.list_type(schema)) =>
            {
                let list_type = self.at.list_type(schema);
                let a_elements = stored_elements(&list_type, a);
                let b_elements = stored_elements(&list_type, b);
                let b_by_element: HashMap<&PathElement, &Value> =
                    b_elements.iter().zip(b.iter()).collect();
                let a_by_element: HashMap<&PathElement, &Value> =
                    a_elements.iter().zip(a.iter()).collect();
                for (element, item) in a_elements.iter().zip(a.iter()) {
                    self.at.path.push(element.clone());
                    self.item(Some(item), b_by_element.get(element).copied());
                    self.at.path.pop();
                }
                for (element, item) in b_elements.iter().zip(b.iter()) {
                    if !a_by_element.contains_key(element) {
                        self.at.path.push(element.clone());
                        self.item(None, Some(item));
                        self.at.path.pop();
                    }
                }
            }
            (Some(a), Some(b)) => {
                if a != b && !self.at.path.is_empty() {
                    self.out.modified.insert(&self.at.path);
                }
            }
        }
    }

    /// A list element: the element itself is the unit that appears or goes.
    fn item(&mut self, old: Option<&Value>, new: Option<&Value>) {
        match (old, new) {
            (Some(Value::Object(_)), Some(Value::Object(_))) => self.values(old, new),
            (Some(a), Some(b)) => {
                if a != b {
                    self.out.modified.insert(&self.at.path);
                }
            }
            _ => self.values(old, new),
        }
    }
}

/// Every path of a value that appears or goes as a whole: the value itself
/// and everything below it.
fn whole(schema: &dyn Schema, value: &Value, at: &mut Cursor, out: &mut FieldSet) {
    let is_field_object = at.path.last().is_some_and(always_present);
    match value {
        Value::Object(map) if !map.is_empty() && !at.atomic_map(schema) => {
            if !is_field_object {
                out.insert(&at.path);
            }
            for (name, child) in map {
                at.enter_field(name);
                whole(schema, child, at, out);
                at.leave_field();
            }
        }
        Value::Array(items) if !items.is_empty() && granular(&at.list_type(schema)) => {
            out.insert(&at.path);
            let list_type = at.list_type(schema);
            for (element, item) in stored_elements(&list_type, items).into_iter().zip(items) {
                at.path.push(element);
                if item.is_object() {
                    whole(schema, item, at, out);
                } else {
                    out.insert(&at.path);
                }
                at.path.pop();
            }
        }
        _ => out.insert(&at.path),
    }
}

/// Merges an applied configuration into the live object: objects field by
/// field, associative and set lists element by element (the configuration's
/// order for shared elements, live-only elements kept where they were),
/// everything else replaced by the configuration's value.
pub(crate) fn merge(schema: &dyn Schema, live: &Value, config: &Value) -> Value {
    merge_at(schema, Some(live), config, &mut Cursor::default())
}

fn merge_at(schema: &dyn Schema, live: Option<&Value>, config: &Value, at: &mut Cursor) -> Value {
    match (live, config) {
        (Some(Value::Object(l)), Value::Object(c)) if !at.atomic_map(schema) => {
            let mut out = l.clone();
            for (name, value) in c {
                at.enter_field(name);
                let merged = merge_at(schema, l.get(name), value, at);
                at.leave_field();
                out.insert(name.clone(), merged);
            }
            Value::Object(out)
        }
        (Some(Value::Array(l)), Value::Array(c)) => {
            let list_type = at.list_type(schema);
            if !granular(&list_type) {
                return config.clone();
            }
            Value::Array(merge_list(schema, &list_type, l, c, at))
        }
        _ => config.clone(),
    }
}

fn merge_list(
    schema: &dyn Schema,
    list_type: &ListType,
    live: &[Value],
    config: &[Value],
    at: &mut Cursor,
) -> Vec<Value> {
    let l_elements = stored_elements(list_type, live);
    let c_elements = stored_elements(list_type, config);
    let l_by: HashMap<&PathElement, &Value> = l_elements.iter().zip(live).collect();
    let c_set: HashSet<&PathElement> = c_elements.iter().collect();
    let shared: Vec<&PathElement> = c_elements.iter().filter(|e| l_by.contains_key(e)).collect();
    let mut next_shared = shared.iter();
    let mut wanted = next_shared.next().copied();
    let mut done: HashSet<&PathElement> = HashSet::new();
    let mut out = Vec::with_capacity(live.len() + config.len());
    let (mut li, mut ci) = (0, 0);
    let merge_item = |element: &PathElement, l: Option<&Value>, c: &Value, at: &mut Cursor| {
        at.path.push(element.clone());
        let merged = merge_at(schema, l, c, at);
        at.path.pop();
        merged
    };
    while li < live.len() || ci < config.len() {
        if li < live.len() && ci < config.len() {
            let l = &l_elements[li];
            if *l == c_elements[ci] {
                done.insert(l);
                out.push(merge_item(l, Some(&live[li]), &config[ci], at));
                li += 1;
                ci += 1;
                wanted = next_shared.next().copied();
                continue;
            }
            // A shared element the configuration wants later: it is placed
            // when the configuration reaches it.
            if c_set.contains(l) && wanted.is_some_and(|w| w != l) {
                li += 1;
                continue;
            }
        }
        if li < live.len() {
            let l = &l_elements[li];
            if !c_set.contains(l) {
                out.push(live[li].clone());
                li += 1;
                continue;
            }
            if done.contains(l) {
                li += 1;
                continue;
            }
        }
        if ci < config.len() {
            let c = &c_elements[ci];
            done.insert(c);
            out.push(merge_item(c, l_by.get(c).copied(), &config[ci], at));
            ci += 1;
            if wanted == Some(c) {
                wanted = next_shared.next().copied();
            }
        } else {
            // Only live elements the configuration already placed are left.
            li += 1;
        }
    }
    out
}

/// Removes the member paths of `set` from `value`. Objects and lists left
/// empty by the removal go too, as the fields that held them. A map or list
/// element named in `set` stays when `keep` (what someone still owns) holds
/// fields below it: losing the claim on the container itself (`.`) does
/// not take what others, or the applier's new configuration, still own.
pub(crate) fn remove(schema: &dyn Schema, value: &mut Value, set: &FieldSet, keep: &FieldSet) {
    remove_at(schema, value, set, Some(keep), &mut Cursor::default());
}

fn remove_at(
    schema: &dyn Schema,
    value: &mut Value,
    set: &FieldSet,
    keep: Option<&FieldSet>,
    at: &mut Cursor,
) {
    let kept_below = |element: &PathElement| keep.and_then(|k| k.children(element));
    match value {
        Value::Object(map) if !at.atomic_map(schema) => {
            let names: Vec<String> = map.keys().cloned().collect();
            for name in names {
                let element = PathElement::field(&name);
                let still_owned = kept_below(&element);
                if set.has_member(&element) && still_owned.is_none() {
                    map.remove(&name);
                    continue;
                }
                let Some(children) = set.children(&element) else {
                    continue;
                };
                at.enter_field(&name);
                if let Some(child) = map.get_mut(&name) {
                    let was_empty = is_empty_container(child);
                    remove_at(schema, child, children, still_owned, at);
                    if !was_empty && is_empty_container(child) {
                        map.remove(&name);
                    }
                }
                at.leave_field();
            }
        }
        Value::Array(items) => {
            let list_type = at.list_type(schema);
            if !granular(&list_type) {
                return;
            }
            let elements = stored_elements(&list_type, items);
            let mut kept = Vec::with_capacity(items.len());
            for (element, mut item) in elements.into_iter().zip(std::mem::take(items)) {
                let still_owned = kept_below(&element);
                if set.has_member(&element) && still_owned.is_none() {
                    continue;
                }
                if let Some(children) = set.children(&element) {
                    at.path.push(element.clone());
                    remove_at(schema, &mut item, children, still_owned, at);
                    at.path.pop();
                }
                kept.push(item);
            }
            *items = kept;
        }
        _ => {}
    }
}

fn is_empty_container(value: &Value) -> bool {
    match value {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// `value` without nulls inside objects: an applied `field: null` sets
/// nothing.
pub(crate) fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect::<Map<String, Value>>(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::schema::{Builtin, Deduced};
    use super::*;
    use serde_json::json;

    fn fields_v1(set: &FieldSet) -> Value {
        set.to_fields_v1()
    }

    #[test]
    fn applied_fields_use_keys_sets_and_atomic_leaves() {
        let config = json!({
            "metadata": {"name": "d", "labels": {"app": "web"}, "finalizers": ["a"]},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{
                    "name": "c", "image": "nginx", "args": ["-x"],
                    "ports": [{"containerPort": 80}]
                }]}}
            }
        });
        let set = applied_fields(&Builtin, &config).unwrap();
        assert_eq!(
            fields_v1(&set),
            json!({
                "f:metadata": {"f:name": {}, "f:labels": {"f:app": {}}, "f:finalizers": {r#"v:"a""#: {}}},
                "f:spec": {
                    "f:selector": {},
                    "f:template": {"f:spec": {"f:containers": {r#"k:{"name":"c"}"#: {
                        ".": {}, "f:name": {}, "f:image": {}, "f:args": {},
                        "f:ports": {r#"k:{"containerPort":80,"protocol":"TCP"}"#: {".": {}, "f:containerPort": {}}}
                    }}}}
                }
            })
        );
        let deduced = applied_fields(&Deduced, &config).unwrap();
        assert!(deduced.contains(&[
            PathElement::field("spec"),
            PathElement::field("template"),
            PathElement::field("spec"),
            PathElement::field("containers"),
        ]));
    }

    #[test]
    fn applied_fields_reject_missing_keys_and_duplicates() {
        let missing = json!({"spec": {"containers": [{"image": "x"}]}});
        let err = applied_fields(&Builtin, &missing).unwrap_err();
        assert_eq!(err.path, ".spec.containers[0]");
        assert!(err.message.contains("\"name\""), "{err}");
        let duplicate = json!({"spec": {"containers": [{"name": "a"}, {"name": "a"}]}});
        let err = applied_fields(&Builtin, &duplicate).unwrap_err();
        assert!(err.message.contains("duplicate"), "{err}");
    }

    #[test]
    fn compare_reports_added_modified_removed() {
        let old = json!({"data": {"a": "1", "b": "2"}, "spec": {"containers": [{"name": "x", "image": "1"}]}});
        let new = json!({"data": {"a": "9", "c": "3"}, "metadata": {"labels": {"l": "v"}},
                         "spec": {"containers": [{"name": "x", "image": "2"}, {"name": "y", "image": "1"}]}});
        let cmp = compare(&Builtin, &old, &new);
        assert_eq!(
            fields_v1(&cmp.modified),
            json!({"f:data": {"f:a": {}}, "f:spec": {"f:containers": {r#"k:{"name":"x"}"#: {"f:image": {}}}}})
        );
        assert_eq!(
            fields_v1(&cmp.added),
            json!({"f:data": {"f:c": {}},
                   "f:metadata": {"f:labels": {".": {}, "f:l": {}}},
                   "f:spec": {"f:containers": {r#"k:{"name":"y"}"#: {".": {}, "f:name": {}, "f:image": {}}}}})
        );
        assert_eq!(fields_v1(&cmp.removed), json!({"f:data": {"f:b": {}}}));
        assert!(compare(&Builtin, &old, &old).is_empty());
    }

    #[test]
    fn merge_by_key_keeps_live_only_elements_and_config_order() {
        let live = json!({"spec": {"containers": [
            {"name": "a", "image": "1"}, {"name": "b", "image": "1"}, {"name": "c", "image": "1"}
        ], "tolerations": [{"key": "t"}]}});
        let config = json!({"spec": {"containers": [
            {"name": "c", "image": "2"}, {"name": "a", "image": "2"}, {"name": "d", "image": "2"}
        ], "tolerations": [{"key": "u"}]}});
        let merged = merge(&Builtin, &live, &config);
        let names: Vec<&str> = merged["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["b", "c", "a", "d"]);
        assert_eq!(merged["spec"]["containers"][1]["image"], "2");
        assert_eq!(merged["spec"]["containers"][0]["image"], "1");
        assert_eq!(merged["spec"]["tolerations"], json!([{"key": "u"}]));
        let set_live = json!({"metadata": {"finalizers": ["a", "b"]}});
        let set_config = json!({"metadata": {"finalizers": ["c", "a"]}});
        assert_eq!(
            merge(&Builtin, &set_live, &set_config)["metadata"]["finalizers"],
            json!(["c", "a", "b"])
        );
    }

    #[test]
    fn remove_drops_members_and_emptied_parents() {
        let mut value = json!({"metadata": {"labels": {"a": "1"}, "name": "n"},
                               "spec": {"containers": [{"name": "x", "image": "i"}, {"name": "y"}]}});
        let mut set = FieldSet::new();
        set.insert(&[
            PathElement::field("metadata"),
            PathElement::field("labels"),
            PathElement::field("a"),
        ]);
        set.insert(&[
            PathElement::field("spec"),
            PathElement::field("containers"),
            PathElement::key(&[("name".into(), json!("y"))]),
        ]);
        remove(&Builtin, &mut value, &set, &FieldSet::new());
        assert_eq!(
            value,
            json!({"metadata": {"name": "n"}, "spec": {"containers": [{"name": "x", "image": "i"}]}})
        );
    }
}
