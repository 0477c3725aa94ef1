//! Reading the JSON the API serves, as the tests at every layer do.

use serde_json::Value;

/// The strings of the JSON array `array` in order (a resource's verbs, a
/// rule's resources, the headers an echo server saw), leaving out any
/// element that is not a string; the test stops if `array` is not an
/// array.
pub fn str_array(array: &Value) -> Vec<&str> {
    array
        .as_array()
        .expect("a JSON array")
        .iter()
        .filter_map(Value::as_str)
        .collect()
}
