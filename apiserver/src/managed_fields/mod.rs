//! Field ownership (`metadata.managedFields`), as upstream's
//! structured-merge-diff tracks it: every write records which fields its
//! manager set, in FieldsV1 sets; updates move the fields they change to
//! their writer; server-side apply (in `patch::apply`) merges by these sets,
//! removes fields an applier stopped applying and reports conflicts.
//!
//! Only the field-ownership rules live here; the handlers decide when they
//! run, and nothing here reads or writes the store.

pub(crate) mod entries;
pub(crate) mod schema;
pub(crate) mod set;
pub(crate) mod walk;

use serde_json::{Map, Value, json};

pub(crate) use entries::{Managers, Operation, Writer};
pub(crate) use schema::{Deduced, Schema, for_group};
pub(crate) use set::{Path, display_path};
pub(crate) use walk::{WalkError, applied_fields, compare, merge, remove, without_nulls};

use crate::admission::WriteInfo;
use crate::object::now_rfc3339;
use crate::registry::{ResourceInfo, Subresource};

/// Metadata the server owns: never part of a manager's fields (upstream's
/// stripped metadata, plus the deletion markers only DELETE sets).
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "generation",
    "managedFields",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// The name upstream gives the manager that owns what an object held before
/// its first apply.
pub(crate) const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// Which part of an object a write may own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything (kinds without a status subresource).
    Whole,
    /// Everything but `status`, which its subresource owns.
    MainResource,
    /// Only `status` (writes through the status subresource).
    Status,
}

impl Scope {
    /// The scope of a write to `info` through `subresource`.
    pub fn of(info: &ResourceInfo, subresource: Option<Subresource>) -> Scope {
        match subresource {
            Some(Subresource::Status) => Scope::Status,
            _ if info.has(Subresource::Status) => Scope::MainResource,
            _ => Scope::Whole,
        }
    }

    /// `object` as far as managers own it: without apiVersion, kind, server
    /// metadata, fields outside the scope, and nulls.
    pub fn view(self, object: &Value) -> Value {
        let Some(map) = object.as_object() else {
            return json!({});
        };
        let mut out = Map::new();
        for (key, value) in map {
            let keep = match (self, key.as_str()) {
                (_, "apiVersion" | "kind") => false,
                (Scope::Status, k) => k == "status",
                (Scope::MainResource, "status") => false,
                _ => true,
            };
            if !keep {
                continue;
            }
            if key == "metadata" {
                let mut meta = value.as_object().cloned().unwrap_or_default();
                meta.retain(|k, _| !SERVER_METADATA.contains(&k.as_str()));
                if !meta.is_empty() {
                    out.insert(key.clone(), without_nulls(&Value::Object(meta)));
                }
                continue;
            }
            out.insert(key.clone(), without_nulls(value));
        }
        Value::Object(out)
    }
}

/// The identity of a write for its managedFields entry.
pub(crate) fn writer(info: &ResourceInfo, write: &WriteInfo) -> Writer {
    Writer {
        manager: write.manager.clone(),
        operation: if write.apply {
            Operation::Apply
        } else {
            Operation::Update
        },
        api_version: info.api_version(),
        subresource: write.subresource.map(|s| s.name().to_string()),
    }
}

/// An update from `old` to `new` by `writer`: the fields it added or
/// changed become its own (taken from whoever held them), fields it removed
/// are no one's. The writer's time moves only when it took fields.
pub(crate) fn track_update(
    schema: &dyn Schema,
    scope: Scope,
    managers: &mut Managers,
    writer: &Writer,
    (old, new): (&Value, &Value),
) {
    let diff = compare(schema, &scope.view(old), &scope.view(new));
    if diff.is_empty() {
        managers.prune();
        return;
    }
    let taken = diff.changed();
    if diff.removed.is_empty() {
        managers.release(&taken, None);
    } else {
        managers.release(&taken.union(&diff.removed), None);
    }
    if !taken.is_empty() {
        let entry = managers.entry(writer);
        entry.fields.union_with(&taken);
        entry.time = Some(now_rfc3339());
    }
    managers.prune();
}

/// The entries stored in `object`, if any.
pub(crate) fn stored(object: &Value) -> Option<Managers> {
    Managers::decode(object.pointer("/metadata/managedFields"))
}

/// Writes `managers` into `object` (removing the field when none own
/// anything).
pub(crate) fn store(object: &mut Value, managers: &Managers) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if managers.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), managers.encode());
    }
}

/// Records a create: the creator owns every field it set (defaults
/// included). `provided` is the body's own managedFields, which upstream
/// takes as the starting point; server-side apply passes the entries it
/// already computed (with `write.apply`), which are kept as they are.
pub(crate) fn on_create(
    info: &ResourceInfo,
    object: &mut Value,
    provided: Option<&Value>,
    write: &WriteInfo,
) {
    let mut managers = Managers::decode(provided).unwrap_or_default();
    if !write.apply {
        let scope = Scope::of(info, write.subresource);
        let schema = for_group(info.group);
        track_update(
            schema,
            scope,
            &mut managers,
            &writer(info, write),
            (&json!({}), object),
        );
    }
    store(object, &managers);
}

/// Records an update from `old` to `new`. Entries the client sent in `new`
/// replace the stored ones (main resource only, as upstream); an object
/// stored without entries stays without them. Apply writes arrive with their
/// entries computed and are left alone.
pub(crate) fn on_update(info: &ResourceInfo, old: &Value, new: &mut Value, write: &WriteInfo) {
    if write.apply {
        return;
    }
    let from_body = if write.subresource.is_none() {
        Managers::decode(new.pointer("/metadata/managedFields"))
    } else {
        None
    };
    let Some(mut managers) = from_body.or_else(|| stored(old)) else {
        store(new, &Managers::default());
        return;
    };
    let scope = Scope::of(info, write.subresource);
    track_update(
        for_group(info.group),
        scope,
        &mut managers,
        &writer(info, write),
        (old, new),
    );
    store(new, &managers);
}

#[cfg(test)]
mod tests {
    use super::schema::Builtin;
    use super::*;

    fn updater(name: &str) -> Writer {
        Writer {
            manager: name.into(),
            operation: Operation::Update,
            api_version: "v1".into(),
            subresource: None,
        }
    }

    #[test]
    fn updates_move_changed_fields_to_their_writer() {
        let mut managers = Managers::default();
        let created = json!({"metadata": {"name": "c", "uid": "u", "labels": {"a": "1"}}, "data": {"x": "1", "y": "2"}});
        track_update(
            &Builtin,
            Scope::Whole,
            &mut managers,
            &updater("creator"),
            (&json!({}), &created),
        );
        assert_eq!(
            managers.encode()[0]["fieldsV1"],
            json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:data": {".": {}, "f:x": {}, "f:y": {}}})
        );
        let edited = json!({"metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"x": "9"}});
        track_update(
            &Builtin,
            Scope::Whole,
            &mut managers,
            &updater("editor"),
            (&created, &edited),
        );
        let encoded = managers.encode();
        let by_name = |n: &str| {
            encoded
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["manager"] == n)
                .unwrap()["fieldsV1"]
                .clone()
        };
        assert_eq!(
            by_name("creator"),
            json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:data": {}}),
            "the creator keeps the map it made, a member without children"
        );
        assert_eq!(by_name("editor"), json!({"f:data": {"f:x": {}}}));
        let before = managers.clone();
        track_update(
            &Builtin,
            Scope::Whole,
            &mut managers,
            &updater("idle"),
            (&edited, &edited),
        );
        assert_eq!(
            managers, before,
            "a write that changes nothing changes no entry"
        );
    }

    #[test]
    fn scopes_split_status_from_the_rest() {
        let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
                            "spec": {"x": 1}, "status": {"phase": "Running"}});
        assert_eq!(
            Scope::Status.view(&object),
            json!({"status": {"phase": "Running"}})
        );
        assert_eq!(
            Scope::MainResource.view(&object),
            json!({"metadata": {"labels": {"a": "b"}}, "spec": {"x": 1}})
        );
    }
}
