//! The strategy of a kind whose rules all live in its own definition module
//! (defaults and checks): nothing per kind but which functions to call.

use serde_json::Value;

use super::KindStrategy;
use crate::kinds::Written;
use crate::registry::ResourceInfo;
use crate::status::FieldError;
use crate::validation::NameRule;

/// A kind described by its definition module's functions.
#[derive(Debug)]
pub(crate) struct Defined {
    pub name_rule: NameRule,
    pub defaults: fn(&mut Value),
    pub validate: fn(&Value, &mut Vec<FieldError>),
}

impl KindStrategy for Defined {
    fn name_rule(&self) -> NameRule {
        self.name_rule
    }

    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        (self.defaults)(object);
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written { object, .. } = *written;
        (self.validate)(object, errors);
    }
}
