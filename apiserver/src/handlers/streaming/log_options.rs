//! `pods/log` options checked by the API server, as upstream's
//! `ValidatePodLogOptions`: a malformed number is a 400, a value out of range
//! a 422 `PodLogOptions` Invalid naming each field, before the node is asked.

use crate::status::{ApiError, FieldError};

/// Checks the `pods/log` query `pairs` of pod `name`.
pub(super) fn check(name: &str, pairs: &[(String, String)]) -> Result<(), ApiError> {
    let number = |field: &str| -> Result<Option<i64>, ApiError> {
        let Some((_, raw)) = pairs.iter().rev().find(|(k, _)| k == field) else {
            return Ok(None);
        };
        raw.parse::<i64>().map(Some).map_err(|_| {
            ApiError::BadRequest(format!(
                "PodLogOptions: {field}: invalid value {raw:?}: not an integer"
            ))
        })
    };
    let tail_lines = number("tailLines")?;
    let limit_bytes = number("limitBytes")?;
    let since_seconds = number("sinceSeconds")?;
    let since_time = pairs.iter().any(|(k, v)| k == "sinceTime" && !v.is_empty());
    let mut causes = Vec::new();
    let (non_negative, positive) = (
        "must be greater than or equal to 0",
        "must be greater than 0",
    );
    at_least(&mut causes, "tailLines", tail_lines, 0, non_negative);
    at_least(&mut causes, "limitBytes", limit_bytes, 1, positive);
    if since_seconds.is_some() && since_time {
        causes.push(FieldError::forbidden(
            "",
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        ));
    }
    at_least(&mut causes, "sinceSeconds", since_seconds, 1, positive);
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::Invalid {
        kind: "PodLogOptions".into(),
        group: String::new(),
        name: name.to_string(),
        causes,
    })
}

/// Adds why `field` is invalid to `causes` when its `value` is below `min`.
fn at_least(causes: &mut Vec<FieldError>, field: &str, value: Option<i64>, min: i64, detail: &str) {
    if let Some(n) = value.filter(|n| *n < min) {
        causes.push(FieldError::invalid(field, n, detail));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(query: &[(&str, &str)]) -> Vec<(String, String)> {
        query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn accepts_options_in_range() {
        let ok = pairs(&[
            ("tailLines", "0"),
            ("limitBytes", "1"),
            ("sinceSeconds", "5"),
        ]);
        assert!(check("p", &ok).is_ok());
        assert!(check("p", &pairs(&[("sinceTime", "2026-01-01T00:00:00Z")])).is_ok());
    }

    #[test]
    fn out_of_range_options_are_invalid_with_every_field() {
        let bad = pairs(&[
            ("tailLines", "-1"),
            ("limitBytes", "0"),
            ("sinceSeconds", "0"),
            ("sinceTime", "2026-01-01T00:00:00Z"),
        ]);
        let Err(e @ ApiError::Invalid { .. }) = check("p", &bad) else {
            panic!("expected Invalid");
        };
        let message = e.to_string();
        for part in [
            "PodLogOptions \"p\" is invalid",
            "tailLines: Invalid value: -1: must be greater than or equal to 0",
            "limitBytes: Invalid value: 0: must be greater than 0",
            "sinceSeconds: Invalid value: 0: must be greater than 0",
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        ] {
            assert!(message.contains(part), "{part:?} missing from {message}");
        }
    }

    #[test]
    fn a_malformed_number_is_a_bad_request() {
        let Err(ApiError::BadRequest(message)) = check("p", &pairs(&[("tailLines", "x")])) else {
            panic!("expected BadRequest");
        };
        assert!(message.contains("tailLines"), "{message}");
    }
}
