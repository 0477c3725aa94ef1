//! Field selectors: `path=value`, `path==value`, `path!=value`, comma
//! separated, over a per-resource set of supported field paths.

use serde_json::Value;

use super::SelectorError;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    field: String,
    value: String,
    equal: bool,
}

/// A parsed field selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<Requirement>,
}

/// Splits at commas not escaped with a backslash.
fn split_unescaped(input: &str, sep: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut escaped = false;
    for c in input.chars() {
        if escaped {
            current.push('\\');
            current.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    if escaped {
        // A lone backslash at the end is left for `unescape` to refuse.
        current.push('\\');
    }
    parts.push(current);
    parts
}

/// A value with its escapes (`\\`, `\,`, `\=`) taken out; any other
/// escape, or a bare `,` or `=`, is refused in upstream's words (which give
/// the character's code point).
fn unescape(value: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped @ ('\\' | ',' | '=')) => out.push(escaped),
                other => {
                    let sequence: String = std::iter::once('\\').chain(other).collect();
                    return Err(SelectorError(format!(
                        "invalid field selector: invalid escape sequence: {sequence}"
                    )));
                }
            },
            ',' | '=' => {
                return Err(SelectorError(format!(
                    "invalid field selector: unescaped character in value: {}",
                    u32::from(c)
                )));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

/// A term at its first operator (`!=`, `==` or `=`, tried in that order
/// at each position), as upstream splits it: `a=b!=c` is `a` = `b!=c`.
fn split_term(term: &str) -> Option<(&str, &str, bool)> {
    (0..term.len())
        .filter(|&i| term.is_char_boundary(i))
        .find_map(|i| {
            let rest = &term[i..];
            [("!=", false), ("==", true), ("=", true)]
                .into_iter()
                .find(|(op, _)| rest.starts_with(op))
                .map(|(op, equal)| (&term[..i], &rest[op.len()..], equal))
        })
}

impl FieldSelector {
    /// Parses the `fieldSelector` query syntax, accepting only `allowed`
    /// fields plus `metadata.name` and `metadata.namespace`.
    pub fn parse(input: &str, allowed: &[&str]) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        if input.trim().is_empty() {
            return Ok(Self::default());
        }
        for part in split_unescaped(input, ',') {
            // `a=b,` and `,a=b` have an empty term, which selects nothing.
            if part.is_empty() {
                continue;
            }
            let Some((field, value, equal)) = split_term(&part) else {
                return Err(SelectorError(format!(
                    "invalid selector: '{input}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if field != "metadata.name"
                && field != "metadata.namespace"
                && !allowed.contains(&field)
            {
                return Err(SelectorError(format!("field label not supported: {field}")));
            }
            requirements.push(Requirement {
                field: field.to_string(),
                value: unescape(value)?,
                equal,
            });
        }
        Ok(Self { requirements })
    }

    /// Whether the selector has no requirement (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The exact value required for `field`, when the selector pins one
    /// (lets single-object lists and watches skip a scan).
    pub fn exact(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.equal && r.field == field)
            .map(|r| r.value.as_str())
    }

    /// Whether every requirement is on `metadata.name` or
    /// `metadata.namespace`, which an object's storage key already says.
    pub fn only_names(&self) -> bool {
        self.requirements
            .iter()
            .all(|r| r.field == "metadata.name" || r.field == "metadata.namespace")
    }

    /// Whether the object is selected. Absent fields read as "" (booleans as
    /// "true"/"false", numbers in decimal), as upstream's field sets do.
    pub fn matches(&self, object: &Value) -> bool {
        self.requirements
            .iter()
            .all(|r| (field_value(object, &r.field) == r.value) == r.equal)
    }
}

fn field_value(object: &Value, path: &str) -> String {
    let mut current = object;
    for segment in path.split('.') {
        current = &current[segment];
    }
    match current {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null if path == "spec.unschedulable" || path == "spec.hostNetwork" => "false".into(),
        Value::Null if path == "status.replicas" || path == "status.successful" => "0".into(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matches_pod_fields() {
        let pod = json!({"metadata": {"name": "a", "namespace": "ns"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let allowed = &["spec.nodeName", "status.phase"];
        let cases = [
            ("metadata.name=a", true),
            ("metadata.name!=a", false),
            ("spec.nodeName=n1,status.phase==Running", true),
            ("spec.nodeName=", false),
            ("status.phase!=Pending", true),
        ];
        for (sel, want) in cases {
            assert_eq!(
                FieldSelector::parse(sel, allowed).unwrap().matches(&pod),
                want,
                "{sel}"
            );
        }
        let unscheduled = json!({"metadata": {"name": "b"}, "spec": {}});
        assert!(
            FieldSelector::parse("spec.nodeName=", allowed)
                .unwrap()
                .matches(&unscheduled)
        );
    }

    #[test]
    fn rejects_unsupported_fields() {
        let err = FieldSelector::parse("spec.foo=bar", &[]).unwrap_err();
        assert_eq!(err.0, "field label not supported: spec.foo");
        assert!(FieldSelector::parse("nonsense", &[]).is_err());
    }

    /// Terms split at their first operator, empty terms skipped, escapes
    /// taken out and bad ones refused, as upstream's `fields.ParseSelector`.
    #[test]
    fn terms_and_escapes_as_upstream() {
        let pod = json!({"metadata": {"name": "a=b,c"}, "spec": {"nodeName": "n"}});
        let selected = |s: &str| {
            FieldSelector::parse(s, &["spec.nodeName"])
                .unwrap()
                .matches(&pod)
        };
        assert!(selected(r"metadata.name=a\=b\,c"));
        assert!(selected("spec.nodeName=n,"));
        assert!(selected(",spec.nodeName==n"));
        assert!(!selected(r"metadata.name!=a\=b\,c"));
        let refusal = |s: &str| FieldSelector::parse(s, &["spec.nodeName"]).unwrap_err().0;
        assert_eq!(
            refusal("spec.nodeName=a!=b"),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            refusal(r"spec.nodeName=a\x"),
            r"invalid field selector: invalid escape sequence: \x"
        );
        assert_eq!(
            refusal(r"spec.nodeName=a\"),
            r"invalid field selector: invalid escape sequence: \"
        );
    }
}
