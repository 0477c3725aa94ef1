//! The key order of the JSON the server writes. Objects are held as
//! `serde_json::Value`, whose maps iterate alphabetically, but kube-apiserver
//! writes its Go types' field order, and clients compare error bodies and
//! people read `kubectl get --raw`. This module writes a `Value` with
//! upstream's order where it is fixed and known: a `Status` throughout
//! (details and causes included), and the top level and `metadata` of every
//! object (also list items, Table rows' objects and watch events' objects).
//! Keys it has no order for follow in alphabetical order after the ordered
//! ones. It only orders: it must never add, drop or change a value.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

/// Top level of an object or list (upstream's TypeMeta, ObjectMeta or
/// ListMeta, then by convention spec and status).
const OBJECT: &[&str] = &["kind", "apiVersion", "metadata", "spec", "status"];

/// `metav1.ObjectMeta` (the same names cover `ListMeta`'s).
const METADATA: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "continue",
    "remainingItemCount",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// `metav1.Status`.
const STATUS: &[&str] = &[
    "kind",
    "apiVersion",
    "metadata",
    "status",
    "message",
    "reason",
    "details",
    "code",
];

/// `metav1.StatusDetails`.
const STATUS_DETAILS: &[&str] = &[
    "name",
    "group",
    "kind",
    "uid",
    "causes",
    "retryAfterSeconds",
];

/// `metav1.StatusCause`.
const STATUS_CAUSE: &[&str] = &["reason", "message", "field"];

/// Serializes a top-level object (or anything else, unchanged) in upstream's
/// key order. `with_type: false` leaves `kind` and `apiVersion` out, as
/// items of typed lists are written.
pub(crate) struct Ordered<'a> {
    value: &'a Value,
    with_type: bool,
}

impl<'a> Ordered<'a> {
    /// `value` as a top-level object.
    pub(crate) fn new(value: &'a Value) -> Self {
        Self {
            value,
            with_type: true,
        }
    }

    /// `value` as an item of a list, its `kind` and `apiVersion` kept only
    /// when `with_type`.
    pub(crate) fn item(value: &'a Value, with_type: bool) -> Self {
        Self { value, with_type }
    }
}

/// A list's `metadata` (upstream's `ListMeta`: resourceVersion, continue,
/// remainingItemCount), for list bodies built field by field.
pub(crate) fn list_metadata(value: &Value) -> impl Serialize + '_ {
    Keys(value, METADATA, Inner::None)
}

/// `value` as JSON bytes in upstream's key order.
pub(crate) fn to_vec(value: &Value) -> Vec<u8> {
    // Most objects encode to well under a KiB; starting the buffer there
    // spares the three or four regrowths (and copies) from serde's 128 bytes.
    let mut out = Vec::with_capacity(1024);
    match serde_json::to_writer(&mut out, &Ordered::new(value)) {
        Ok(()) => out,
        Err(_) => Vec::new(),
    }
}

impl Serialize for Ordered<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Value::Object(map) = self.value else {
            return self.value.serialize(serializer);
        };
        let is_status = map.get("kind").and_then(Value::as_str) == Some("Status");
        let skip = |key: &str| !self.with_type && (key == "kind" || key == "apiVersion");
        let order = if is_status { STATUS } else { OBJECT };
        let mut out = serializer.serialize_map(None)?;
        for (key, value) in in_order(map, order) {
            if skip(key) {
                continue;
            }
            match (key, is_status) {
                ("metadata", _) => out.serialize_entry(key, &Keys(value, METADATA, Inner::None))?,
                ("details", true) => {
                    out.serialize_entry(key, &Keys(value, STATUS_DETAILS, Inner::Causes))?
                }
                ("items", false) => out.serialize_entry(key, &Items(value, Inner::Objects))?,
                ("rows", false) => out.serialize_entry(key, &Items(value, Inner::RowObjects))?,
                _ => out.serialize_entry(key, value)?,
            }
        }
        out.end()
    }
}

/// What is ordered below a map or inside a list's elements.
#[derive(Clone, Copy)]
enum Inner {
    /// Nothing: the values are written as they are.
    None,
    /// A Status' `details.causes`.
    Causes,
    /// List items: objects of their own.
    Objects,
    /// Table rows, whose `object` is an object of its own.
    RowObjects,
}

/// A map with `order` first; `inner` says what is ordered below it.
struct Keys<'a>(&'a Value, &'static [&'static str], Inner);

impl Serialize for Keys<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Keys(Value::Object(map), order, inner) = self else {
            return self.0.serialize(serializer);
        };
        let mut out = serializer.serialize_map(Some(map.len()))?;
        for (key, value) in in_order(map, order) {
            match (inner, key) {
                (Inner::Causes, "causes") => {
                    out.serialize_entry(key, &Items(value, Inner::Causes))?
                }
                (Inner::RowObjects, "object") => out.serialize_entry(key, &Ordered::new(value))?,
                _ => out.serialize_entry(key, value)?,
            }
        }
        out.end()
    }
}

/// A list whose elements are ordered as `inner` says.
struct Items<'a>(&'a Value, Inner);

impl Serialize for Items<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Value::Array(elements) = self.0 else {
            return self.0.serialize(serializer);
        };
        let mut out = serializer.serialize_seq(Some(elements.len()))?;
        for element in elements {
            match self.1 {
                Inner::Causes => {
                    out.serialize_element(&Keys(element, STATUS_CAUSE, Inner::None))?
                }
                Inner::Objects => out.serialize_element(&Ordered::new(element))?,
                Inner::RowObjects => {
                    out.serialize_element(&Keys(element, &[], Inner::RowObjects))?
                }
                Inner::None => out.serialize_element(element)?,
            }
        }
        out.end()
    }
}

/// The entries of `map`: those named in `order` first, in that order, then
/// the rest as the map keeps them.
fn in_order<'m>(
    map: &'m Map<String, Value>,
    order: &'static [&'static str],
) -> impl Iterator<Item = (&'m str, &'m Value)> {
    let named = order
        .iter()
        .filter_map(|key| map.get_key_value(*key))
        .map(|(k, v)| (k.as_str(), v));
    let rest = map
        .iter()
        .filter(|(k, _)| !order.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v));
    named.chain(rest)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(value: &Value) -> String {
        String::from_utf8(to_vec(value)).unwrap()
    }

    #[test]
    fn a_status_is_written_in_upstream_field_order() {
        let status = json!({
            "code": 422, "reason": "Invalid", "message": "m", "status": "Failure",
            "metadata": {}, "apiVersion": "v1", "kind": "Status",
            "details": {"kind": "configmaps", "name": "a", "group": "",
                "causes": [{"field": "f", "message": "x", "reason": "FieldValueInvalid"}]},
        });
        assert_eq!(
            text(&status),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","reason":"Invalid","details":{"name":"a","group":"","kind":"configmaps","causes":[{"reason":"FieldValueInvalid","message":"x","field":"f"}]},"code":422}"#
        );
    }

    #[test]
    fn objects_lists_and_rows_put_type_metadata_spec_status_first() {
        let object = json!({"status": {"b": 1, "a": 2}, "spec": {"z": 1},
            "metadata": {"uid": "u", "namespace": "ns", "name": "n", "labels": {"y": "1", "x": "2"}},
            "kind": "Pod", "apiVersion": "v1", "data": 1});
        let want = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"n","namespace":"ns","uid":"u","labels":{"x":"2","y":"1"}},"spec":{"z":1},"status":{"a":2,"b":1},"data":1}"#;
        assert_eq!(text(&object), want);

        let list = json!({"items": [object.clone()], "metadata": {"resourceVersion": "5"},
            "kind": "PodList", "apiVersion": "v1"});
        assert_eq!(
            text(&list),
            format!(
                r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"5"}},"items":[{want}]}}"#
            )
        );

        let table = json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
            "columnDefinitions": [], "rows": [{"object": object, "cells": ["n"]}]});
        assert_eq!(
            text(&table),
            format!(
                r#"{{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{{}},"columnDefinitions":[],"rows":[{{"cells":["n"],"object":{want}}}]}}"#
            )
        );
    }

    #[test]
    fn list_metadata_puts_resource_version_before_continue_and_count() {
        let meta = json!({"remainingItemCount": 3, "continue": "c", "resourceVersion": "9"});
        assert_eq!(
            serde_json::to_string(&list_metadata(&meta)).unwrap(),
            r#"{"resourceVersion":"9","continue":"c","remainingItemCount":3}"#
        );
        let list = json!({"items": [], "metadata": meta, "kind": "PodList", "apiVersion": "v1"});
        assert_eq!(
            text(&list),
            r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"c","remainingItemCount":3},"items":[]}"#
        );
    }

    #[test]
    fn list_items_can_leave_their_type_out_and_nothing_else_changes() {
        let object = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "n"},
            "weird": [null, 1.5, "s", {"b": 1, "a": 2}]});
        let bare = serde_json::to_string(&Ordered::item(&object, false)).unwrap();
        assert_eq!(
            bare,
            r#"{"metadata":{"name":"n"},"weird":[null,1.5,"s",{"a":2,"b":1}]}"#
        );
        let round: Value = serde_json::from_slice(&to_vec(&object)).unwrap();
        assert_eq!(round, object);
        assert_eq!(text(&json!("plain")), r#""plain""#);
    }
}
