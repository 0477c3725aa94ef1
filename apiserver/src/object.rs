//! Helpers over the JSON form of Kubernetes objects: metadata access, the
//! stored encoding (without resourceVersion) and decoding from store values.

use bytes::Bytes;
use serde_json::{Map, Value, json};
use skiff_store::{KeyValue, Revision};

/// `metadata.<field>` as a string, if present.
pub(crate) fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// The `metadata` map, created when missing.
pub(crate) fn meta_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = json!({});
    }
    let map = object
        .as_object_mut()
        .expect("object was just made an object");
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta.as_object_mut()
        .expect("metadata was just made an object")
}

/// Drops the `metadata` fields upstream's encoding leaves out when empty:
/// every ObjectMeta field is `omitempty`, so an empty string, map or list
/// and a zero `generation` are never stored or served (`labels: {}` sent
/// by a client, or added by a merge, reads back as no labels). Null
/// fields go too, as unset. `creationTimestamp` is a struct upstream, which
/// `omitempty` does not drop, and `deletionGracePeriodSeconds` a pointer,
/// whose zero is kept; both are left alone.
pub(crate) fn omit_empty_metadata(object: &mut Value) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    meta.retain(|field, value| match value {
        Value::Null => false,
        Value::String(s) => !s.is_empty() || field == "creationTimestamp",
        Value::Object(map) => !map.is_empty(),
        Value::Array(list) => !list.is_empty(),
        Value::Number(n) => field != "generation" || n.as_i64() != Some(0),
        Value::Bool(_) => true,
    });
}

/// Sets `metadata.resourceVersion` from a store revision.
pub(crate) fn set_resource_version(object: &mut Value, revision: Revision) {
    meta_mut(object).insert("resourceVersion".into(), json!(revision.to_string()));
}

/// `metadata.resourceVersion` of `object` as a store revision (none when
/// missing or not a number).
pub(crate) fn resource_version(object: &Value) -> Option<Revision> {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
}

/// The list of `metadata.finalizers` as strings.
pub(crate) fn finalizers(object: &Value) -> Vec<String> {
    strings(&object["metadata"]["finalizers"])
}

/// Adds `finalizer` to `object`'s finalizers unless it is there already.
pub(crate) fn add_finalizer(object: &mut Value, finalizer: &str) {
    let list = meta_mut(object)
        .entry("finalizers")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(items) = list.as_array_mut()
        && !items.iter().any(|f| f == finalizer)
    {
        items.push(Value::String(finalizer.to_string()));
    }
}

/// The strings of a JSON list (none when it is not a list; other items are
/// skipped).
pub(crate) fn strings(list: &Value) -> Vec<String> {
    str_items(list).map(String::from).collect()
}

/// [`strings`] borrowed from the list, for readers that only look.
pub(crate) fn str_items(list: &Value) -> impl Iterator<Item = &str> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// The items of a JSON list with their indices (none when it is not a
/// list), for checks that report `field[i]`.
pub(crate) fn indexed(list: &Value) -> impl Iterator<Item = (usize, &Value)> {
    list.as_array().into_iter().flatten().enumerate()
}

/// Whether `metadata.deletionTimestamp` is set.
pub(crate) fn is_terminating(object: &Value) -> bool {
    meta_str(object, "deletionTimestamp").is_some()
}

/// The bytes stored for an object: its JSON without resourceVersion (the
/// store's mod revision is the resourceVersion).
pub(crate) fn encode_for_store(object: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(&WithoutResourceVersion(object, 0)).unwrap_or_default())
}

/// Serialises a value as is, except that `metadata.resourceVersion` of the
/// top-level object is left out, without copying the object first. The number
/// is the depth: 0 for the object, 1 for its `metadata`.
struct WithoutResourceVersion<'a>(&'a Value, u8);

impl serde::Serialize for WithoutResourceVersion<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (Value::Object(map), depth @ (0 | 1)) = (self.0, self.1) else {
            return self.0.serialize(serializer);
        };
        let skipped = usize::from(depth == 1 && map.contains_key("resourceVersion"));
        let mut out = serializer.serialize_map(Some(map.len() - skipped))?;
        for (key, value) in map {
            match (depth, key.as_str()) {
                (0, "metadata") => out.serialize_entry(key, &WithoutResourceVersion(value, 1))?,
                (1, "resourceVersion") => {}
                _ => out.serialize_entry(key, value)?,
            }
        }
        out.end()
    }
}

/// Decodes a stored value, setting resourceVersion from its mod revision.
pub(crate) fn decode_from_store(kv: &KeyValue) -> Result<Value, serde_json::Error> {
    let mut object: Value = serde_json::from_slice(&kv.value)?;
    set_resource_version(&mut object, kv.mod_revision);
    Ok(object)
}

/// Now, as an RFC 3339 timestamp with second precision (metav1.Time).
pub(crate) fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Whether the object's `status.conditions` hold one of type `kind` whose
/// status is `True`.
pub(crate) fn condition_true(object: &Value, kind: &str) -> bool {
    object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

/// The condition `type_` as it should read now, among an object's
/// `conditions`: `None` when it already says `status`, `reason` and
/// `message`; otherwise the new condition, which keeps its last transition
/// time while its status stays the same.
pub(crate) fn condition_update(
    conditions: &Value,
    type_: &str,
    (status, reason, message): (&str, &str, &str),
) -> Option<Value> {
    let current = conditions
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_));
    if current
        .is_some_and(|c| c["status"] == status && c["reason"] == reason && c["message"] == message)
    {
        return None;
    }
    let since = match current {
        Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
        _ => json!(now_rfc3339()),
    };
    Some(json!({"type": type_, "status": status, "reason": reason,
                "message": message, "lastTransitionTime": since}))
}

/// `seconds` from now, as an RFC 3339 timestamp.
pub(crate) fn rfc3339_in(seconds: i64) -> String {
    let ts = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .unwrap_or_else(|_| jiff::Timestamp::now());
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The value at `path` when every step is an object field (never panics on
/// user data of the wrong shape, unlike `IndexMut`).
pub(crate) fn path_mut<'a>(value: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    let mut current = value;
    for segment in path {
        current = current.as_object_mut()?.get_mut(*segment)?;
    }
    Some(current)
}

/// The items of the list at `path` (see [`path_mut`]); none when there is
/// no list there.
pub(crate) fn items_mut<'a>(
    value: &'a mut Value,
    path: &[&str],
) -> impl Iterator<Item = &'a mut Value> + use<'a> {
    path_mut(value, path)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// Sets a top-level field of an object (no-op on non-objects).
pub(crate) fn set_field(object: &mut Value, field: &str, value: Value) {
    if let Some(map) = object.as_object_mut() {
        map.insert(field.to_string(), value);
    }
}

/// Sets `section.field` of an object (`spec.replicas`, `status.phase`),
/// the section made an empty object first when it is missing or not one.
pub(crate) fn set_section_field(object: &mut Value, section: &str, field: &str, value: Value) {
    let mut part = object
        .get(section)
        .filter(|s| s.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    set_field(&mut part, field, value);
    set_field(object, section, part);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_form_leaves_out_only_the_top_level_resource_version() {
        let object = json!({
            "kind": "Pod",
            "metadata": {"name": "a", "resourceVersion": "42", "labels": {"resourceVersion": "x"}},
            "spec": {"metadata": {"resourceVersion": "7"}},
        });
        let stored: Value = serde_json::from_slice(&encode_for_store(&object)).expect("json");
        assert_eq!(
            stored,
            json!({
                "kind": "Pod",
                "metadata": {"name": "a", "labels": {"resourceVersion": "x"}},
                "spec": {"metadata": {"resourceVersion": "7"}},
            })
        );
        assert_eq!(object["metadata"]["resourceVersion"], "42");
    }

    #[test]
    fn empty_metadata_goes_as_omitempty_drops_it() {
        let mut object = json!({
            "metadata": {"name": "a", "namespace": "", "labels": {}, "annotations": {"k": ""},
                "finalizers": [], "generation": 0, "deletionGracePeriodSeconds": 0,
                "deletionTimestamp": null, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "data": {},
        });
        omit_empty_metadata(&mut object);
        assert_eq!(
            object,
            json!({
                "metadata": {"name": "a", "annotations": {"k": ""},
                    "deletionGracePeriodSeconds": 0, "creationTimestamp": "2026-01-01T00:00:00Z"},
                "data": {},
            })
        );
    }
}
