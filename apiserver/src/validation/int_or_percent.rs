//! `IntOrString` fields that hold a count or a percentage (rollout bounds,
//! disruption budgets), checked as upstream's ValidatePositiveIntOrPercent
//! and IsNotMoreThan100Percent, and shown in errors as upstream shows them.

use serde_json::Value;

use crate::status::FieldError;

pub(crate) const PERCENT_MSG: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

/// An `IntOrString` as upstream's field errors print it (Go's `%#v` of
/// the struct, since only its pointer has a String method).
fn go_int_or_string(value: &Value) -> String {
    match value {
        Value::String(s) => format!("intstr.IntOrString{{Type:1, IntVal:0, StrVal:{s:?}}}"),
        other => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            other.as_i64().unwrap_or(0)
        ),
    }
}

/// An Invalid error on the `IntOrString` `value` at `path`.
pub(crate) fn invalid(path: &str, value: &Value, detail: &str) -> FieldError {
    FieldError::invalid(path, value.clone(), detail).shown_as(go_int_or_string(value))
}

/// The number an `IntOrString` stands for (a percentage's number), and
/// whether it is a percentage; `None` when it is neither.
pub(crate) fn amount(value: &Value) -> Option<(i64, bool)> {
    match value {
        Value::String(s) => {
            let digits = s.strip_suffix('%')?;
            (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                .then(|| digits.parse().ok().map(|n| (n, true)))
                .flatten()
        }
        other => other.as_i64().map(|n| (n, false)),
    }
}

/// Upstream's ValidatePositiveIntOrPercent.
pub(crate) fn int_or_percent(value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    match value {
        Value::Null => {}
        Value::String(_) if amount(value).is_none() => {
            errors.push(invalid(path, value, PERCENT_MSG));
        }
        Value::String(_) => {}
        other => {
            if other.as_i64().is_some_and(|n| n < 0) {
                errors.push(FieldError::invalid(
                    path,
                    other.clone(),
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
}

/// Upstream's IsNotMoreThan100Percent.
pub(crate) fn at_most_all(value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    if amount(value).is_some_and(|(n, percent)| percent && n > 100) {
        errors.push(invalid(path, value, "must not be greater than 100%"));
    }
}

/// Whether the count or percentage is zero.
pub(crate) fn is_zero(value: &Value) -> bool {
    amount(value).is_some_and(|(n, _)| n == 0)
}
