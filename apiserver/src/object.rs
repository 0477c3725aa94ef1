//! Helpers over the JSON form of Kubernetes objects: metadata access, the
//! stored encoding (without resourceVersion) and decoding from store values.

use bytes::Bytes;
use serde_json::{Map, Value, json};
use skiff_store::{KeyValue, Revision};

/// `metadata.<field>` as a string, if present.
pub fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// The `metadata` map, created when missing.
pub fn meta_mut(object: &mut Value) -> &mut Map<String, Value> {
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

/// Sets `metadata.resourceVersion` from a store revision.
pub fn set_resource_version(object: &mut Value, revision: Revision) {
    meta_mut(object).insert("resourceVersion".into(), json!(revision.to_string()));
}

/// The list of `metadata.finalizers` as strings.
pub fn finalizers(object: &Value) -> Vec<String> {
    object["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_terminating(object: &Value) -> bool {
    meta_str(object, "deletionTimestamp").is_some()
}

/// The bytes stored for an object: its JSON without resourceVersion (the
/// store's mod revision is the resourceVersion).
pub fn encode_for_store(object: &Value) -> Bytes {
    let mut copy = object.clone();
    if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    Bytes::from(serde_json::to_vec(&copy).unwrap_or_default())
}

/// Decodes a stored value, setting resourceVersion from its mod revision.
pub fn decode_from_store(kv: &KeyValue) -> Result<Value, serde_json::Error> {
    let mut object: Value = serde_json::from_slice(&kv.value)?;
    set_resource_version(&mut object, kv.mod_revision);
    Ok(object)
}

/// Now, as an RFC 3339 timestamp with second precision (metav1.Time).
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// `seconds` from now, as an RFC 3339 timestamp.
pub fn rfc3339_in(seconds: i64) -> String {
    let ts = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .unwrap_or_else(|_| jiff::Timestamp::now());
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The value at `path` when every step is an object field (never panics on
/// user data of the wrong shape, unlike `IndexMut`).
pub fn path_mut<'a>(value: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    let mut current = value;
    for segment in path {
        current = current.as_object_mut()?.get_mut(*segment)?;
    }
    Some(current)
}

/// Sets a top-level field of an object (no-op on non-objects).
pub fn set_field(object: &mut Value, field: &str, value: Value) {
    if let Some(map) = object.as_object_mut() {
        map.insert(field.to_string(), value);
    }
}
