//! Label and field selectors, parsed from their query-string syntax and
//! matched against JSON objects (for lists and for watches alike).

pub mod field;
pub mod label;

pub use field::FieldSelector;
pub use label::LabelSelector;

/// A selector string that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);
