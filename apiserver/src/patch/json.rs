//! JSON Patch (RFC 6902) as upstream's API server applies it — the
//! semantics and the words of the evanphx/json-patch v4 library it uses,
//! which are looser than the RFC in ways clients rely on: `replace` of an
//! object member that is not there sets it, array indices may be negative
//! (counted from the end) or carry leading zeros, a `test` of a missing
//! member against `null` passes, and `copy` from a missing member copies
//! `null`. Each failure reads as upstream's does
//! (`replace operation does not apply: doc is missing key: /spec/x/3:
//! missing value`), since that text is what users search for.
//!
//! Written here rather than taken from the `json-patch` crate, which
//! follows the RFC strictly and words its errors its own way.

use serde_json::Value;

use crate::go_json::cannot_unmarshal;

/// The library's sentinel errors, which every message ends with.
const MISSING: &str = "missing value";
const INVALID_INDEX: &str = "invalid index referenced";
const TEST_FAILED: &str = "test failed";

/// Why a patch could not be applied, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonPatchError {
    /// The body is not a list of operations (upstream: 400).
    #[error("{0}")]
    Decode(String),
    /// An operation does not apply to the document (upstream: 422).
    #[error("{0}")]
    Apply(String),
}

/// The operations of `body`, as upstream decodes them.
pub fn decode(body: &Value) -> Result<&[Value], JsonPatchError> {
    let Some(ops) = body.as_array() else {
        return Err(JsonPatchError::Decode(cannot_unmarshal(
            body,
            "jsonpatch.Patch",
        )));
    };
    if let Some(bad) = ops.iter().find(|op| !op.is_object() && !op.is_null()) {
        return Err(JsonPatchError::Decode(cannot_unmarshal(
            bad,
            "jsonpatch.Operation",
        )));
    }
    Ok(ops)
}

/// Applies `ops` to `doc` in order; on an error `doc` may hold the
/// operations before the failing one (callers patch a copy).
pub fn apply(doc: &mut Value, ops: &[Value]) -> Result<(), JsonPatchError> {
    for op in ops {
        apply_one(doc, op).map_err(JsonPatchError::Apply)?;
    }
    Ok(())
}

/// A field of the operation that must be a string (`path`, `from`):
/// `None` when absent, `Err` with Go's words when not a string.
fn string_field<'a>(op: &'a Value, field: &str) -> Option<Result<&'a str, String>> {
    match op.get(field)? {
        Value::Null => None,
        Value::String(s) => Some(Ok(s)),
        other => Some(Err(cannot_unmarshal(other, "string"))),
    }
}

fn apply_one(doc: &mut Value, op: &Value) -> Result<(), String> {
    let kind = match op.get("op") {
        Some(Value::String(kind)) => kind.as_str(),
        _ => "unknown",
    };
    // The library reads a missing or null `value` as nothing, which it
    // then writes as JSON null.
    let value = || op.get("value").cloned().unwrap_or(Value::Null);
    match kind {
        "add" => {
            let path = path_of(op).map_err(|_| wrap("add operation failed to decode path"))?;
            let Some((parent, key)) = find_parent(doc, path) else {
                return Err(wrap(&format!(
                    "add operation does not apply: doc is missing path: \"{path}\""
                )));
            };
            add(parent, &key, value()).map_err(|e| format!("error in add for path: '{path}': {e}"))
        }
        "remove" => {
            let path = path_of(op).map_err(|_| wrap("remove operation failed to decode path"))?;
            let Some((parent, key)) = find_parent(doc, path) else {
                return Err(wrap(&format!(
                    "remove operation does not apply: doc is missing path: \"{path}\""
                )));
            };
            remove(parent, &key)
                .map(drop)
                .map_err(|e| format!("error in remove for path: '{path}': {e}"))
        }
        "replace" => {
            let path =
                path_of(op).map_err(|e| format!("replace operation failed to decode path: {e}"))?;
            if path.is_empty() {
                // Only an object or an array replaces the whole document;
                // anything else leaves it as it was (the library's error
                // there wraps nothing, so none is returned).
                let value = value();
                if value.is_object() || value.is_array() {
                    *doc = value;
                }
                return Ok(());
            }
            let Some((parent, key)) = find_parent(doc, path) else {
                return Err(wrap(&format!(
                    "replace operation does not apply: doc is missing path: {path}"
                )));
            };
            if get(parent, &key).is_err() {
                return Err(wrap(&format!(
                    "replace operation does not apply: doc is missing key: {path}"
                )));
            }
            set(parent, &key, value());
            Ok(())
        }
        "move" => {
            let from =
                from_of(op).map_err(|e| format!("move operation failed to decode from: {e}"))?;
            let Some((parent, key)) = find_parent(doc, from) else {
                return Err(wrap(&format!(
                    "move operation does not apply: doc is missing from path: {from}"
                )));
            };
            // The library reads the value before removing it; removing
            // fails alike where reading would (an index out of range).
            let moved = remove(parent, &key)
                .map_err(|e| format!("error in move for path: '{key}': {e}"))?;
            let path =
                path_of(op).map_err(|e| format!("move operation failed to decode path: {e}"))?;
            let Some((parent, key)) = find_parent(doc, path) else {
                return Err(wrap(&format!(
                    "move operation does not apply: doc is missing destination path: {path}"
                )));
            };
            add(parent, &key, moved).map_err(|e| format!("error in move for path: '{path}': {e}"))
        }
        "copy" => {
            let from =
                from_of(op).map_err(|e| format!("copy operation failed to decode from: {e}"))?;
            let Some((parent, key)) = find_parent(doc, from) else {
                return Err(wrap(&format!(
                    "copy operation does not apply: doc is missing from path: {from}"
                )));
            };
            let copied = get(parent, &key)
                .map_err(|e| format!("error in copy for from: '{from}': {e}"))?
                .cloned()
                .unwrap_or(Value::Null);
            let path = path_of(op).map_err(|_| wrap("copy operation failed to decode path"))?;
            let Some((parent, key)) = find_parent(doc, path) else {
                return Err(wrap(&format!(
                    "copy operation does not apply: doc is missing destination path: {path}"
                )));
            };
            add(parent, &key, copied)
                .map_err(|e| format!("error while adding value during copy: {e}"))
        }
        "test" => {
            let path =
                path_of(op).map_err(|e| format!("test operation failed to decode path: {e}"))?;
            let expected = value();
            let failed = || format!("testing value {path} failed: {TEST_FAILED}");
            if path.is_empty() {
                return if *doc == expected {
                    Ok(())
                } else {
                    Err(failed())
                };
            }
            let Some((parent, key)) = find_parent(doc, path) else {
                return Err(wrap(&format!(
                    "test operation does not apply: is missing path: {path}"
                )));
            };
            match get(parent, &key).map_err(|e| format!("error in test for path: '{path}': {e}"))? {
                // A missing member equals only the absence of a value.
                None if expected.is_null() => Ok(()),
                Some(found) if *found == expected => Ok(()),
                _ => Err(failed()),
            }
        }
        other => Err(format!("Unexpected kind: {other}")),
    }
}

/// `message` wrapping the library's "missing value".
fn wrap(message: &str) -> String {
    format!("{message}: {MISSING}")
}

fn path_of(op: &Value) -> Result<&str, String> {
    match string_field(op, "path") {
        Some(found) => found,
        None => Err(wrap("operation missing path field")),
    }
}

fn from_of(op: &Value) -> Result<&str, String> {
    match string_field(op, "from") {
        Some(found) => found,
        None => Err(wrap("operation, missing from field")),
    }
}

/// The container holding the last segment of `path` and that segment,
/// unescaped; `None` when a segment before it does not lead to an object
/// or array. As the library reads a path, the part before the first `/`
/// is ignored and `""` names no container.
fn find_parent<'a>(doc: &'a mut Value, path: &str) -> Option<(&'a mut Value, String)> {
    let mut segments: Vec<&str> = path.split('/').collect();
    if segments.len() < 2 {
        return None;
    }
    let key = unescape(segments.pop()?);
    let mut current = doc;
    for part in &segments[1..] {
        let part = unescape(part);
        current = match current {
            Value::Object(map) => map.get_mut(&part)?,
            Value::Array(items) => {
                let at = array_index(&part, items.len()).ok()?;
                items.get_mut(at)?
            }
            _ => return None,
        };
        if !current.is_object() && !current.is_array() {
            return None;
        }
    }
    if !current.is_object() && !current.is_array() {
        return None;
    }
    Some((current, key))
}

/// RFC 6901's escapes, `~1` before `~0` as the library replaces them.
fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// Go's `strconv.Atoi` of an index, negative counted from the end.
fn parse_index(key: &str) -> Result<i64, String> {
    key.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing {}: invalid syntax", go_quote(key)))
}

fn invalid_index(index: i64) -> String {
    format!("Unable to access invalid index: {index}: {INVALID_INDEX}")
}

/// The position `key` names in an array of `len` items, for reading.
fn array_index(key: &str, len: usize) -> Result<usize, String> {
    let index = parse_index(key)?;
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let at = if index < 0 {
        if index < -len {
            return Err(invalid_index(index));
        }
        index + len
    } else {
        index
    };
    if at >= len {
        return Err(invalid_index(at));
    }
    usize::try_from(at).map_err(|_| invalid_index(index))
}

/// The member or item `key` of `parent`: `Ok(None)` for a missing object
/// member (the library does not tell that apart from a present one),
/// an error for an array index out of range.
fn get<'a>(parent: &'a Value, key: &str) -> Result<Option<&'a Value>, String> {
    match parent {
        Value::Object(map) => Ok(map.get(key)),
        Value::Array(items) => Ok(items.get(array_index(key, items.len())?)),
        _ => Ok(None),
    }
}

/// Replaces what `get` found (it exists, or is an object member).
fn set(parent: &mut Value, key: &str, value: Value) {
    match parent {
        Value::Object(map) => {
            map.insert(key.to_string(), value);
        }
        Value::Array(items) => {
            if let Ok(at) = array_index(key, items.len())
                && let Some(slot) = items.get_mut(at)
            {
                *slot = value;
            }
        }
        _ => {}
    }
}

fn add(parent: &mut Value, key: &str, value: Value) -> Result<(), String> {
    match parent {
        Value::Object(map) => {
            map.insert(key.to_string(), value);
            Ok(())
        }
        Value::Array(items) => {
            if key == "-" {
                items.push(value);
                return Ok(());
            }
            let index = key.parse::<i64>().map_err(|_| {
                format!(
                    "value was not a proper array index: '{key}': strconv.Atoi: parsing {}: invalid syntax",
                    go_quote(key)
                )
            })?;
            // The array as it will be, one longer.
            let grown = i64::try_from(items.len()).unwrap_or(i64::MAX) + 1;
            if index >= grown || index < -grown {
                return Err(invalid_index(index));
            }
            let at = if index < 0 { index + grown } else { index };
            let at = usize::try_from(at).map_err(|_| invalid_index(index))?;
            items.insert(at, value);
            Ok(())
        }
        _ => Err(invalid_index(0)),
    }
}

fn remove(parent: &mut Value, key: &str) -> Result<Value, String> {
    match parent {
        Value::Object(map) => map
            .remove(key)
            .ok_or_else(|| format!("Unable to remove nonexistent key: {key}: {MISSING}")),
        Value::Array(items) => {
            let index = parse_index(key)?;
            let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
            if index >= len || index < -len {
                return Err(invalid_index(index));
            }
            let at = if index < 0 { index + len } else { index };
            let at = usize::try_from(at).map_err(|_| invalid_index(index))?;
            Ok(items.remove(at))
        }
        _ => Err(format!(
            "Unable to remove nonexistent key: {key}: {MISSING}"
        )),
    }
}

/// Go's `%q`, as strconv's errors quote their input.
fn go_quote(s: &str) -> String {
    skiff_common::quote::go_quote(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patched(doc: Value, ops: Value) -> Result<Value, JsonPatchError> {
        let mut doc = doc;
        apply(&mut doc, decode(&ops)?)?;
        Ok(doc)
    }

    fn refused(doc: Value, ops: Value) -> String {
        match patched(doc, ops) {
            Err(JsonPatchError::Apply(message)) => message,
            other => panic!("expected an apply error, got {other:?}"),
        }
    }

    #[test]
    fn the_operations_apply_as_the_rfc_says() {
        let doc = json!({"a": {"b": [1, 2, 3]}, "c": "x"});
        let out = patched(
            doc,
            json!([
                {"op": "add", "path": "/a/b/1", "value": 9},
                {"op": "add", "path": "/a/b/-", "value": 4},
                {"op": "remove", "path": "/a/b/0"},
                {"op": "replace", "path": "/c", "value": "y"},
                {"op": "copy", "from": "/c", "path": "/d"},
                {"op": "move", "from": "/d", "path": "/a/e"},
                {"op": "test", "path": "/a/e", "value": "y"},
                {"op": "add", "path": "/f~1g", "value": {"h~i": 1}},
                {"op": "test", "path": "/f~1g/h~0i", "value": 1}
            ]),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"a": {"b": [9, 2, 3, 4], "e": "y"}, "c": "y", "f/g": {"h~i": 1}})
        );
    }

    #[test]
    fn where_upstream_is_looser_than_the_rfc_so_is_this() {
        // `replace` of a member that is not there sets it.
        let out = patched(
            json!({"data": {}}),
            json!([{"op": "replace", "path": "/data/k", "value": "v"}]),
        );
        assert_eq!(out, Ok(json!({"data": {"k": "v"}})));
        // Negative indices count from the end; leading zeros are read.
        let out = patched(
            json!({"l": [1, 2, 3]}),
            json!([
                {"op": "replace", "path": "/l/-1", "value": 30},
                {"op": "remove", "path": "/l/-3"},
                {"op": "add", "path": "/l/01", "value": 5},
                {"op": "add", "path": "/l/-1", "value": 6}
            ]),
        );
        assert_eq!(out, Ok(json!({"l": [2, 5, 30, 6]})));
        // A missing member tests equal to null; copying it copies null.
        let out = patched(
            json!({"a": {}}),
            json!([
                {"op": "test", "path": "/a/x", "value": null},
                {"op": "copy", "from": "/a/x", "path": "/a/y"}
            ]),
        );
        assert_eq!(out, Ok(json!({"a": {"y": null}})));
    }

    #[test]
    fn failures_read_as_upstreams() {
        let doc = json!({"spec": {"containers": [{"name": "a"}]}, "data": {"k": "v"}});
        let cases = [
            (
                json!([{"op": "replace", "path": "/spec/containers/3", "value": {}}]),
                "replace operation does not apply: doc is missing key: /spec/containers/3: missing value",
            ),
            (
                json!([{"op": "replace", "path": "/spec/nope/x", "value": 1}]),
                "replace operation does not apply: doc is missing path: /spec/nope/x: missing value",
            ),
            (
                json!([{"op": "add", "path": "/metadata/labels/a", "value": "b"}]),
                "add operation does not apply: doc is missing path: \"/metadata/labels/a\": missing value",
            ),
            (
                json!([{"op": "add", "path": "/spec/containers/5", "value": {}}]),
                "error in add for path: '/spec/containers/5': Unable to access invalid index: 5: invalid index referenced",
            ),
            (
                json!([{"op": "remove", "path": "/data/zz"}]),
                "error in remove for path: '/data/zz': Unable to remove nonexistent key: zz: missing value",
            ),
            (
                json!([{"op": "remove", "path": "/nope/zz"}]),
                "remove operation does not apply: doc is missing path: \"/nope/zz\": missing value",
            ),
            (
                json!([{"op": "test", "path": "/data/k", "value": "w"}]),
                "testing value /data/k failed: test failed",
            ),
            (
                json!([{"op": "move", "from": "/nope/a", "path": "/b"}]),
                "move operation does not apply: doc is missing from path: /nope/a: missing value",
            ),
            (
                json!([{"op": "copy", "from": "/data/k", "path": "/nope/b"}]),
                "copy operation does not apply: doc is missing destination path: /nope/b: missing value",
            ),
            (
                json!([{"op": "replace", "value": 1}]),
                "replace operation failed to decode path: operation missing path field: missing value",
            ),
            (
                json!([{"op": "add", "value": 1}]),
                "add operation failed to decode path: missing value",
            ),
            (
                json!([{"op": "move", "path": "/b"}]),
                "move operation failed to decode from: operation, missing from field: missing value",
            ),
            (
                json!([{"op": "merge", "path": "/b"}]),
                "Unexpected kind: merge",
            ),
            (json!([{"path": "/b"}]), "Unexpected kind: unknown"),
        ];
        for (ops, expected) in cases {
            assert_eq!(refused(doc.clone(), ops.clone()), expected, "{ops}");
        }
    }

    #[test]
    fn a_body_that_is_not_a_list_of_operations_is_a_decode_error() {
        assert_eq!(
            decode(&json!({"op": "add"})),
            Err(JsonPatchError::Decode(
                "json: cannot unmarshal object into Go value of type jsonpatch.Patch".into()
            ))
        );
        assert_eq!(
            decode(&json!(["add"])),
            Err(JsonPatchError::Decode(
                "json: cannot unmarshal string into Go value of type jsonpatch.Operation".into()
            ))
        );
    }

    #[test]
    fn a_move_into_its_own_child_fails_without_harm() {
        let doc = json!({"metadata": {"labels": {"app": "web"}}});
        let message = refused(
            doc,
            json!([{"op": "move", "from": "/metadata", "path": "/metadata/labels/x"}]),
        );
        assert_eq!(
            message,
            "move operation does not apply: doc is missing destination path: /metadata/labels/x: missing value"
        );
    }
}
