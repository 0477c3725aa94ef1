//! Server-side apply: an apply body (YAML or JSON) merged onto a live object
//! with its managedFields; the input is `<options><live JSON>\0<apply body>`.

use crate::{assert_refused_with, options, two_parts};
use serde_json::Value;
use skiff_apiserver::fuzzing;
use skiff_apiserver::patch;

/// Checks one input; panics where skiff answers it wrongly.
pub fn run(data: &[u8]) {
    let Some((flags, rest)) = options(data) else {
        return;
    };
    let (live, body) = two_parts(rest);
    let live = match serde_json::from_slice::<Value>(live) {
        Ok(live) if live.is_object() => live,
        _ if live.is_empty() => serde_json::json!({}),
        _ => return,
    };
    let config = match patch::parse_applied(body) {
        Ok(config) => config,
        Err(_) => return,
    };
    let which = flags & 0x3;
    let status = flags & 0x4 != 0;
    let force = flags & 0x8 != 0;
    let manager = if flags & 0x10 != 0 { "kubectl" } else { "fuzz" };
    match fuzzing::apply(which, status, manager, force, &live, &config) {
        Ok(applied) => {
            assert!(applied.is_object(), "apply produced {applied}");
            // A second manager applying the same configuration on top must be
            // answered too (shared ownership or a conflict), never a panic.
            if let Err(e) = fuzzing::apply(which, status, "other", false, &applied, &config) {
                assert_refused_with(&e, &[400, 409]);
            }
        }
        Err(e) => assert_refused_with(&e, &[400, 409]),
    }
}
