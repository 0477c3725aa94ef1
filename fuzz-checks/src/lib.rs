//! What each fuzz target checks of one input: one module per target, each
//! with `run(data)`, which panics where skiff answers that input wrongly
//! (a panic inside skiff, a 5xx for a client's mistake, a value that does
//! not survive its own round trip). The libFuzzer targets in `fuzz/` call
//! these on nightly (`scripts/fuzz`); `tests/corpus.rs` replays the
//! committed corpus through them on stable, in the ordinary test run. This
//! crate must never hold checks that only one of the two runs.

pub mod apply;
pub mod body;
pub mod managed_fields;
pub mod patch;
pub mod protobuf;
pub mod quantity;
pub mod selectors;
pub mod store_codec;

use serde_json::Value;
use skiff_apiserver::status::ApiError;

/// The input's first byte (options for the target) and the rest.
pub fn options(data: &[u8]) -> Option<(u8, &[u8])> {
    data.split_first().map(|(first, rest)| (*first, rest))
}

/// The bytes before and after the first NUL: two documents in one input.
/// Without a NUL the second is empty.
pub fn two_parts(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|b| *b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[]),
    }
}

/// Equal JSON, except that floats may differ in their last bits: serde_json
/// reads decimal text to the nearest float only approximately, so printing a
/// float and reading it back is not always exact.
pub fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => x == y || (x - y).abs() <= x.abs().max(y.abs()) * 1e-15,
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((kx, vx), (ky, vy))| kx == ky && same_json(vx, vy))
        }
        _ => a == b,
    }
}

/// A refused request must be answered with one of `codes` (the client's
/// fault), never a 5xx, and its Status must serialize.
pub fn assert_refused_with(error: &ApiError, codes: &[u16]) {
    let code = error.code().as_u16();
    assert!(
        codes.contains(&code),
        "answered {code} (wanted one of {codes:?}): {error}"
    );
    let status = error.to_status();
    assert_eq!(status["code"].as_u64(), Some(u64::from(code)), "{status}");
}
