//! Name validation as upstream applies it: DNS-1123 subdomains for most
//! objects, DNS-1123 labels for namespaces, DNS-1035 labels for services,
//! path-segment names for RBAC and events.

use crate::status::FieldError;

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// Which rule a resource's names follow (each kind's strategy says).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameRule {
    /// A DNS-1123 subdomain: lower-case alphanumerics, `-` and `.`, up to 253 characters.
    Subdomain,
    /// A DNS-1123 label: lower-case alphanumerics and `-`, up to 63 characters.
    Label,
    /// A DNS-1035 label: a DNS-1123 label starting with a letter.
    Dns1035,
    /// Any name usable as a path segment: not `.` or `..`, without `/` or `%`.
    PathSegment,
}

fn is_label_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
}

/// Upstream's RFC 1123 label pattern, `[a-z0-9]([-a-z0-9]*[a-z0-9])?`,
/// whatever the length.
fn matches_label(s: &str) -> bool {
    !s.is_empty() && s.chars().all(is_label_char) && !s.starts_with('-') && !s.ends_with('-')
}

/// Upstream's RFC 1123 subdomain pattern: dot-separated parts, each
/// matching the label pattern — whatever their length, as upstream's
/// pattern bounds none of them (only the whole, at 253).
fn matches_subdomain(s: &str) -> bool {
    s.split('.').all(matches_label)
}

/// Upstream's DNS-1035 label pattern, `[a-z]([-a-z0-9]*[a-z0-9])?`.
fn matches_dns1035(s: &str) -> bool {
    matches_label(s) && s.starts_with(|c: char| c.is_ascii_lowercase())
}

/// RFC 1123 label: at most 63 of [a-z0-9-], alphanumeric at both ends.
pub(crate) fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && matches_label(s)
}

/// RFC 1123 subdomain: dot-separated labels, at most 253 characters.
pub(crate) fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && matches_subdomain(s)
}

/// Errors for `name` under `rule`, reported at `field`.
pub(crate) fn validate_name(rule: NameRule, name: &str, field: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match rule {
        NameRule::Subdomain => {
            if name.len() > 253 {
                errors.push(FieldError::invalid(
                    field,
                    name,
                    "must be no more than 253 characters",
                ));
            }
            if !matches_subdomain(name) {
                errors.push(FieldError::invalid(field, name, SUBDOMAIN_MSG));
            }
        }
        NameRule::Label | NameRule::Dns1035 => {
            if name.len() > 63 {
                errors.push(FieldError::invalid(
                    field,
                    name,
                    "must be no more than 63 characters",
                ));
            }
            let (ok, msg) = if rule == NameRule::Label {
                (matches_label(name), LABEL_MSG)
            } else {
                (matches_dns1035(name), DNS1035_MSG)
            };
            if !ok {
                errors.push(FieldError::invalid(field, name, msg));
            }
        }
        NameRule::PathSegment => {
            if name == "." || name == ".." {
                errors.push(FieldError::invalid(
                    field,
                    name,
                    format!("may not be '{name}'"),
                ));
            }
            for bad in ["/", "%"] {
                if name.contains(bad) {
                    errors.push(FieldError::invalid(
                        field,
                        name,
                        format!("may not contain '{bad}'"),
                    ));
                }
            }
        }
    }
    errors
}

/// What a qualified name's name part (or a whole key with more than one
/// `/`) must look like, in upstream's words.
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// A member's `name` at `field` in a list whose names are DNS labels, each
/// once (containers, volumes): required, a label, and not among `seen`,
/// which it then joins.
pub(crate) fn unique_label<'a>(
    name: Option<&'a str>,
    field: &str,
    seen: &mut Vec<&'a str>,
    errors: &mut Vec<FieldError>,
) {
    match name {
        None | Some("") => errors.push(FieldError::required(field, "")),
        Some(name) => {
            if !is_dns1123_label(name) {
                errors.extend(validate_name(NameRule::Label, name, field));
            }
            if seen.contains(&name) {
                errors.push(FieldError::duplicate(field, name));
            }
            seen.push(name);
        }
    }
}

/// Label/annotation key: optional DNS subdomain prefix and `/`, then a name
/// of at most 63 characters of [A-Za-z0-9-_.] starting and ending
/// alphanumeric. Each problem is its own error, worded as upstream's.
pub(crate) fn validate_qualified_name(key: &str, field: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut fail = |message: String| errors.push(FieldError::invalid(field, key, message));
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                fail("prefix part must be non-empty".into());
            } else {
                if prefix.len() > 253 {
                    fail("prefix part must be no more than 253 characters".into());
                }
                if !matches_subdomain(prefix) {
                    fail(format!("prefix part {SUBDOMAIN_MSG}"));
                }
            }
            name
        }
        _ => {
            fail(format!(
                "a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ));
            return errors;
        }
    };
    if name.is_empty() {
        fail("name part must be non-empty".into());
    } else if name.len() > 63 {
        fail("name part must be no more than 63 characters".into());
    }
    let matches = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !matches {
        fail(format!("name part {QUALIFIED_NAME_MSG}"));
    }
    errors
}

/// Label value: empty, or at most 63 of [A-Za-z0-9-_.] alphanumeric at
/// both ends; the length and the pattern are each their own error, as
/// upstream's.
pub(crate) fn validate_label_value(value: &str, field: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push(FieldError::invalid(
            field,
            value,
            "must be no more than 63 characters",
        ));
    }
    let matches = value.is_empty()
        || (value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric()));
    if !matches {
        errors.push(FieldError::invalid(
            field,
            value,
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The details of `errors`, the words a client reads.
    fn details(errors: Vec<FieldError>) -> Vec<String> {
        errors.into_iter().map(|e| e.detail).collect()
    }

    #[test]
    fn subdomain_and_label_rules() {
        assert!(is_dns1123_subdomain("a.b-c.d"));
        assert!(!is_dns1123_subdomain("A"));
        assert!(!is_dns1123_subdomain("a_b"));
        assert!(!is_dns1123_subdomain("-a"));
        assert!(is_dns1123_label("abc-1"));
        assert!(!is_dns1123_label("a.b"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        // Upstream's subdomain pattern bounds no part, only the whole.
        assert!(is_dns1123_subdomain(&"a".repeat(100)));
        assert!(validate_name(NameRule::Subdomain, &"a".repeat(100), "n").is_empty());
        assert_eq!(
            details(validate_name(NameRule::Subdomain, &"a".repeat(254), "n")),
            ["must be no more than 253 characters"]
        );
        for rule in [NameRule::Label, NameRule::Dns1035] {
            assert_eq!(
                details(validate_name(rule, &"a".repeat(64), "n")),
                ["must be no more than 63 characters"]
            );
        }
        assert!(validate_name(NameRule::Dns1035, "1abc", "metadata.name").len() == 1);
        assert!(validate_name(NameRule::PathSegment, "Mixed:Case", "metadata.name").is_empty());
        assert!(!validate_name(NameRule::PathSegment, "a/b", "metadata.name").is_empty());
    }

    #[test]
    fn qualified_names_and_values() {
        assert!(validate_qualified_name("app.kubernetes.io/name", "k").is_empty());
        assert!(validate_qualified_name("Foo_Bar", "k").is_empty());
        assert!(!validate_qualified_name("-bad", "k").is_empty());
        assert!(!validate_qualified_name("UPPER.io/x", "k").is_empty());
        let messages = |key: &str| details(validate_qualified_name(key, "k"));
        // More than one `/` is one error about the whole key, as upstream.
        let many = messages("a/b/c");
        assert_eq!(many.len(), 1);
        assert!(
            many[0].starts_with("a qualified name must consist of"),
            "{many:?}"
        );
        assert!(many[0].ends_with("(e.g. 'example.com/MyName')"), "{many:?}");
        assert_eq!(
            messages("/x"),
            ["prefix part must be non-empty".to_string()]
        );
        let empty = messages("example.com/");
        assert_eq!(empty[0], "name part must be non-empty");
        assert!(empty[1].starts_with("name part must consist of"));
        assert_eq!(
            messages(&"x".repeat(64)),
            ["name part must be no more than 63 characters".to_string()]
        );
        assert!(validate_label_value("", "v").is_empty());
        assert!(!validate_label_value("a b", "v").is_empty());
        assert_eq!(
            details(validate_label_value(&"b".repeat(64), "v")),
            ["must be no more than 63 characters"]
        );
        let both = details(validate_label_value(&format!("-{}", "b".repeat(63)), "v"));
        assert_eq!(both.len(), 2, "{both:?}");
        assert!(both[1].starts_with("a valid label must be"), "{both:?}");
    }
}
