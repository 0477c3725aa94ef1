//! Field ownership on ordinary writes: the new object's body may carry any
//! `metadata.managedFields`; the input is `<options><old JSON>\0<new JSON>`.

use crate::{options, two_parts};
use serde_json::Value;
use skiff_apiserver::fuzzing;

/// Checks one input; panics where skiff answers it wrongly.
pub fn run(data: &[u8]) {
    let Some((flags, rest)) = options(data) else {
        return;
    };
    let (old, new) = two_parts(rest);
    let (Ok(old), Ok(new)) = (
        serde_json::from_slice::<Value>(old),
        serde_json::from_slice::<Value>(new),
    ) else {
        return;
    };
    if !old.is_object() || !new.is_object() {
        return;
    }
    for entry in new
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(fields) = entry.get("fieldsV1")
            && let Ok(canonical) = fuzzing::fields_v1_canonical(fields)
        {
            let again = fuzzing::fields_v1_canonical(&canonical)
                .unwrap_or_else(|e| panic!("canonical {canonical} refused: {e}"));
            assert_eq!(again, canonical);
        }
    }
    let stored = fuzzing::track_update(flags, "fuzz", &old, &new);
    // What was stored is read back at the next write.
    if let Some(entries) = stored
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    {
        for entry in entries {
            let fields = &entry["fieldsV1"];
            let canonical = fuzzing::fields_v1_canonical(fields)
                .unwrap_or_else(|e| panic!("stored fieldsV1 {fields} unreadable: {e}"));
            assert_eq!(&canonical, fields, "stored fieldsV1 not canonical");
        }
    }
}
