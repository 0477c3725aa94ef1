//! The default strategy every built-in resource starts with: kinds with no
//! rules of their own (their Table columns, if any, are named with their
//! registry entry). A kind that needs more gets its own module.

use super::KindStrategy;

/// Every default rule.
#[derive(Debug)]
pub(crate) struct Plain;

impl KindStrategy for Plain {}

/// Kinds without a rule of their own.
pub(crate) static PLAIN: Plain = Plain;
