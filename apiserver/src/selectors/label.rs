//! Label selectors in the query syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`,
//! `a notin (x)`, `a`, `!a`, `a>1`, comma-separated and all required; parsed
//! here (with upstream's error wording) into the requirements of
//! `skiff_common::labels`, which does the matching.

use std::collections::BTreeMap;

use serde_json::Value;
use skiff_common::labels::{Operator as Op, Requirement, Selector};

use super::SelectorError;

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    selector: Selector,
}

fn valid_key(key: &str) -> bool {
    let name = key.rsplit_once('/').map(|(_, n)| n).unwrap_or(key);
    !name.is_empty()
        && name.len() <= 63
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn valid_value(value: &str) -> bool {
    value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// Splits at top-level commas (commas inside parentheses belong to a set).
fn split_requirements(input: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&input[start..]);
    parts
}

fn parse_set(rest: &str, raw: &str) -> Result<Vec<String>, SelectorError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            SelectorError(format!(
                "unable to parse requirement: found '{rest}', expected: '('"
            ))
        })?;
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
    for v in &values {
        if !valid_value(v) {
            return Err(SelectorError(format!(
                "unable to parse requirement: values[0][{raw}]: Invalid value: \"{v}\""
            )));
        }
    }
    Ok(values)
}

fn parse_requirement(raw: &str) -> Result<Requirement, SelectorError> {
    let s = raw.trim();
    if s.is_empty() {
        return Err(SelectorError("found '', expected: identifier".into()));
    }
    if let Some(key) = s.strip_prefix('!') {
        return Ok(Requirement {
            key: checked_key(key.trim())?,
            op: Op::DoesNotExist,
        });
    }
    for (token, is_not) in [(" notin ", true), (" in ", false)] {
        if let Some(idx) = s.find(token) {
            let key = checked_key(s[..idx].trim())?;
            let values = parse_set(&s[idx + token.len()..], raw)?;
            let op = if is_not {
                Op::NotIn(values)
            } else {
                Op::In(values)
            };
            return Ok(Requirement { key, op });
        }
    }
    for (token, kind) in [("!=", 0), ("==", 1), ("=", 1), (">", 2), ("<", 3)] {
        if let Some(idx) = s.find(token) {
            let key = checked_key(s[..idx].trim())?;
            let value = s[idx + token.len()..].trim().to_string();
            let op = match kind {
                0 | 1 => {
                    if !valid_value(&value) {
                        return Err(SelectorError(format!(
                            "unable to parse requirement: values[0][{key}]: Invalid value: \"{value}\""
                        )));
                    }
                    if kind == 0 {
                        Op::NotIn(vec![value])
                    } else {
                        Op::In(vec![value])
                    }
                }
                _ => {
                    let n: i64 = value.parse().map_err(|_| {
                        SelectorError(format!("unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer: {value}"))
                    })?;
                    if kind == 2 { Op::Gt(n) } else { Op::Lt(n) }
                }
            };
            return Ok(Requirement { key, op });
        }
    }
    Ok(Requirement {
        key: checked_key(s)?,
        op: Op::Exists,
    })
}

fn checked_key(key: &str) -> Result<String, SelectorError> {
    if valid_key(key) {
        Ok(key.to_string())
    } else {
        Err(SelectorError(format!(
            "unable to parse requirement: <nil>: Invalid value: \"{key}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        )))
    }
}

impl LabelSelector {
    /// Parses the `labelSelector` query syntax.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        if input.trim().is_empty() {
            return Ok(Self::default());
        }
        let requirements = split_requirements(input)
            .into_iter()
            .map(parse_requirement)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::of(requirements))
    }

    fn of(requirements: Vec<Requirement>) -> Self {
        Self {
            selector: Selector::from_requirements(requirements),
        }
    }

    /// Builds a selector from a `metav1.LabelSelector` object
    /// (`matchLabels` + `matchExpressions`), as workload specs carry.
    pub fn from_object(selector: &Value) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in labels {
                requirements.push(Requirement {
                    key: k.clone(),
                    op: Op::In(vec![v.as_str().unwrap_or("").to_string()]),
                });
            }
        }
        for expr in selector
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = expr["key"].as_str().unwrap_or("").to_string();
            let values: Vec<String> = expr["values"]
                .as_array()
                .map(|vs| {
                    vs.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            let op = match expr["operator"].as_str().unwrap_or("") {
                "In" => Op::In(values),
                "NotIn" => Op::NotIn(values),
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                other => {
                    return Err(SelectorError(format!(
                        "{other:?} is not a valid label selector operator"
                    )));
                }
            };
            requirements.push(Requirement { key, op });
        }
        Ok(Self::of(requirements))
    }

    /// Whether the selector matches everything.
    pub fn is_empty(&self) -> bool {
        self.selector.is_everything()
    }

    /// Whether an object with these labels is selected.
    pub fn matches_labels(&self, labels: &BTreeMap<&str, &str>) -> bool {
        self.selector.matches_with(|key| labels.get(key).copied())
    }

    /// Whether an object (its `metadata.labels`) is selected. Labels are
    /// looked up in the object's own map (a value that is not a string
    /// reads as ""): a watch event is matched against every watcher's
    /// selector, so nothing is built per match.
    pub fn matches(&self, object: &Value) -> bool {
        if self.is_empty() {
            return true;
        }
        let labels = object["metadata"]["labels"].as_object();
        self.selector.matches_with(|key| {
            labels
                .and_then(|m| m.get(key))
                .map(|v| v.as_str().unwrap_or(""))
        })
    }

    /// The selector in query syntax (used by the scale subresource).
    pub fn to_query(&self) -> String {
        self.selector
            .requirements()
            .iter()
            .map(|r| match &r.op {
                Op::In(vs) if vs.len() == 1 => format!("{}={}", r.key, vs[0]),
                Op::In(vs) => format!("{} in ({})", r.key, vs.join(",")),
                Op::NotIn(vs) if vs.len() == 1 => format!("{}!={}", r.key, vs[0]),
                Op::NotIn(vs) => format!("{} notin ({})", r.key, vs.join(",")),
                Op::Exists => r.key.clone(),
                Op::DoesNotExist => format!("!{}", r.key),
                Op::Gt(n) => format!("{}>{n}", r.key),
                Op::Lt(n) => format!("{}<{n}", r.key),
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"labels": labels}})
    }

    #[test]
    fn operators_match_as_upstream() {
        let o = obj(json!({"app": "web", "tier": "front", "n": "5"}));
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("app=web,tier=back", false),
            ("app in (db,web),tier", true),
            ("n>4", true),
            ("n<5", false),
            ("", true),
        ];
        for (sel, want) in cases {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&o),
                want,
                "{sel}"
            );
        }
    }

    #[test]
    fn rejects_malformed() {
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("a b=c").is_err());
        assert!(LabelSelector::parse("app=we b").is_err());
    }

    #[test]
    fn object_selector_renders_query() {
        let s = LabelSelector::from_object(&json!({"matchLabels": {"app": "x"},
            "matchExpressions": [{"key": "t", "operator": "In", "values": ["a", "b"]}]}))
        .unwrap();
        assert_eq!(s.to_query(), "app=x,t in (a,b)");
        assert!(s.matches(&obj(json!({"app": "x", "t": "b"}))));
    }
}
