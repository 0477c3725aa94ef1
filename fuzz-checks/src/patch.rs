//! PATCH bodies: JSON patch, merge patch and strategic merge patch applied to
//! a stored object (the input is `<type byte><object JSON>\0<patch body>`).

use crate::{options, two_parts};
use serde_json::Value;
use skiff_apiserver::patch::{self, PatchType};

const KINDS: [PatchType; 3] = [PatchType::Json, PatchType::Merge, PatchType::StrategicMerge];

/// Checks one input; panics where skiff answers it wrongly.
pub fn run(data: &[u8]) {
    let Some((choice, rest)) = options(data) else {
        return;
    };
    let kind = KINDS[usize::from(choice) % KINDS.len()];
    let (original, body) = two_parts(rest);
    let Ok(original) = serde_json::from_slice::<Value>(original) else {
        return;
    };
    if !original.is_object() {
        return;
    }
    let _ = patch::names_resource_version(kind, body);
    let Ok(patched) = patch::apply(kind, &original, body) else {
        return;
    };
    if kind == PatchType::Merge {
        // RFC 7386 patches are idempotent: applying one twice changes nothing more.
        let twice = patch::apply(kind, &patched, body).expect("the patch applied once");
        assert_eq!(twice, patched);
    }
}
