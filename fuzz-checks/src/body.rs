//! Create/update bodies in JSON and YAML, as the handlers decode them.

use crate::{assert_refused_with, options, same_json};

const MEDIA_TYPES: &[Option<&str>] = &[
    Some("application/json"),
    Some("application/yaml"),
    None,
    Some("application/json; charset=utf-8"),
    Some("text/yaml"),
    Some("application/x-yaml"),
];

/// Checks one input; panics where skiff answers it wrongly.
pub fn run(data: &[u8]) {
    let Some((choice, body)) = options(data) else {
        return;
    };
    let media = MEDIA_TYPES[usize::from(choice) % MEDIA_TYPES.len()];
    match skiff_apiserver::fuzzing::decode_body(media, body) {
        Ok(object) => {
            assert!(object.is_object(), "decoded a non-object: {object}");
            // What the server stores is this value printed as JSON; reading
            // that back must give the same object.
            let text = serde_json::to_vec(&object).expect("a Value always prints");
            let again = skiff_apiserver::fuzzing::decode_body(Some("application/json"), &text)
                .unwrap_or_else(|e| panic!("the server's own JSON is refused: {e}"));
            assert!(same_json(&object, &again), "{object} became {again}");
        }
        Err(e) => assert_refused_with(&e, &[400]),
    }
}
