//! Server-side field validation, `fieldValidation=Strict|Warn|Ignore` on
//! create, update and patch: fields of the request body the kind does not
//! know, and fields given twice in one JSON object, fail the request with a
//! 400 listing every one (Strict), or are reported in `Warning` headers and
//! dropped (Warn, the default), or are dropped silently (Ignore).
//!
//! Unknown fields are found by decoding the body into the kind's typed form
//! and comparing: whatever the typed round trip loses, the kind does not
//! know. Duplicates are found while the JSON text is decoded (one pass),
//! since a decoded object keeps only the last value of a repeated key.

mod duplicates;
mod screen;
mod unknown;

pub(crate) use screen::screen;

pub(crate) use duplicates::{decode_noting_duplicates, duplicate_fields};
pub(crate) use unknown::{strip_unknown, unknown_fields};

use crate::status::ApiError;

/// What the client asked to happen to unknown and duplicate fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Directive {
    /// Unknown fields are dropped and duplicates resolved to the last, silently.
    Ignore,
    /// The same, with a warning for each.
    #[default]
    Warn,
    /// Refuse the request, naming each.
    Strict,
}

impl Directive {
    /// Parses the `fieldValidation` query parameter (absent means Warn, as
    /// upstream).
    pub(crate) fn parse(value: Option<&str>) -> Result<Self, ApiError> {
        match value {
            None | Some("") => Ok(Directive::Warn),
            Some("Ignore") => Ok(Directive::Ignore),
            Some("Warn") => Ok(Directive::Warn),
            Some("Strict") => Ok(Directive::Strict),
            Some(other) => Err(ApiError::BadRequest(format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// One offending field of a request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// A field the kind does not have, by path (`spec.containers[0].foo`).
    Unknown(String),
    /// A field given more than once in one object.
    Duplicate(String),
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Unknown(path) => write!(f, "unknown field \"{path}\""),
            Problem::Duplicate(path) => write!(f, "duplicate field \"{path}\""),
        }
    }
}

/// Applies the directive: the error Strict answers with, or the warnings
/// Warn answers with.
///
/// `context` prefixes the message as upstream does for decoding errors of
/// whole objects (`Pod in version "v1" cannot be handled as a Pod: `).
pub(crate) fn decide(
    directive: Directive,
    problems: &[Problem],
    context: &str,
) -> Result<Vec<String>, ApiError> {
    if problems.is_empty() || directive == Directive::Ignore {
        return Ok(Vec::new());
    }
    let rendered: Vec<String> = problems.iter().map(Problem::to_string).collect();
    match directive {
        Directive::Strict => Err(ApiError::BadRequest(format!(
            "{context}strict decoding error: {}",
            rendered.join(", ")
        ))),
        _ => Ok(rendered),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_lists_every_problem_and_warn_returns_them() {
        let problems = vec![
            Problem::Unknown("spec.foo".into()),
            Problem::Duplicate("metadata.name".into()),
        ];
        let err = decide(Directive::Strict, &problems, "").unwrap_err();
        assert_eq!(
            err.to_string(),
            "strict decoding error: unknown field \"spec.foo\", duplicate field \"metadata.name\""
        );
        let warnings = decide(Directive::Warn, &problems, "").unwrap();
        assert_eq!(
            warnings,
            vec![
                "unknown field \"spec.foo\"",
                "duplicate field \"metadata.name\""
            ]
        );
        assert!(decide(Directive::Ignore, &problems, "").unwrap().is_empty());
        assert!(Directive::parse(Some("strict")).is_err());
        assert_eq!(Directive::parse(None).unwrap(), Directive::Warn);
    }
}
