//! Label selectors in the query syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`,
//! `a notin (x)`, `a`, `!a`, `a>1`, comma-separated and all required; parsed
//! here (with upstream's error wording) into the requirements of
//! `skiff_common::labels`, which does the matching.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use skiff_common::labels::{Operator as Op, Requirement, Selector};

use super::SelectorError;
use crate::status::FieldError;
use crate::validation::{validate_label_value, validate_qualified_name};

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    selector: Selector,
}

/// A token of the query syntax. `in` and `notin` are keywords only where
/// an operator may stand; as a key or value they are plain identifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    End,
    OpenPar,
    ClosePar,
    Comma,
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    Greater,
    Less,
    In,
    NotIn,
    Identifier,
}

/// White space between tokens, as upstream's lexer has it.
fn blank(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// The characters that end an identifier and start an operator.
fn special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits `input` into tokens, ending with [`Kind::End`]. Operators are
/// taken longest first (`!=` before `!`); anything else up to white space
/// or an operator is one identifier, so `a in(b)` and `a=b` need no spaces.
fn lex(input: &str) -> Vec<(Kind, &str)> {
    let bytes = input.as_bytes();
    let mut tokens = Vec::new();
    let mut at = 0;
    loop {
        while at < bytes.len() && blank(bytes[at]) {
            at += 1;
        }
        let Some(&c) = bytes.get(at) else {
            tokens.push((Kind::End, ""));
            return tokens;
        };
        let start = at;
        let kind = if special(c) {
            let pair = bytes.get(at + 1) == Some(&b'=') && matches!(c, b'=' | b'!');
            at += if pair { 2 } else { 1 };
            match (c, pair) {
                (b'=', true) => Kind::DoubleEquals,
                (b'!', true) => Kind::NotEquals,
                (b'=', _) => Kind::Equals,
                (b'!', _) => Kind::Not,
                (b'(', _) => Kind::OpenPar,
                (b')', _) => Kind::ClosePar,
                (b',', _) => Kind::Comma,
                (b'>', _) => Kind::Greater,
                _ => Kind::Less,
            }
        } else {
            while at < bytes.len() && !special(bytes[at]) && !blank(bytes[at]) {
                at += 1;
            }
            match &input[start..at] {
                "in" => Kind::In,
                "notin" => Kind::NotIn,
                _ => Kind::Identifier,
            }
        };
        tokens.push((kind, &input[start..at]));
    }
}

/// Where the parser stands: whether `in`/`notin` are read as operators.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    Operator,
    Values,
}

/// A recursive-descent parser over the tokens, with upstream's grammar and
/// error wording (`labels.Parse`): a client sees the same message for the
/// same mistake as from any Kubernetes server.
struct Parser<'a> {
    tokens: Vec<(Kind, &'a str)>,
    at: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self, context: Context) -> (Kind, &'a str) {
        // The last token is End; reading past it reads End again.
        let (kind, text) = self.tokens[self.at.min(self.tokens.len() - 1)];
        match kind {
            Kind::In | Kind::NotIn if context == Context::Values => (Kind::Identifier, text),
            _ => (kind, text),
        }
    }

    fn next(&mut self, context: Context) -> (Kind, &'a str) {
        let token = self.peek(context);
        self.at += 1;
        token
    }

    fn selector(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        loop {
            match self.peek(Context::Values) {
                (Kind::Identifier | Kind::Not, _) => {
                    let requirement = self
                        .requirement()
                        .map_err(|e| SelectorError(format!("unable to parse requirement: {e}")))?;
                    requirements.push(requirement);
                    match self.next(Context::Values) {
                        (Kind::End, _) => return Ok(requirements),
                        (Kind::Comma, _) => match self.peek(Context::Values) {
                            (Kind::Identifier | Kind::Not, _) => {}
                            (_, text) => {
                                return Err(SelectorError(format!(
                                    "found '{text}', expected: identifier after ','"
                                )));
                            }
                        },
                        (_, text) => {
                            return Err(SelectorError(format!(
                                "found '{text}', expected: ',' or 'end of string'"
                            )));
                        }
                    }
                }
                (Kind::End, _) => return Ok(requirements),
                (_, text) => {
                    return Err(SelectorError(format!(
                        "found '{text}', expected: !, identifier, or 'end of string'"
                    )));
                }
            }
        }
    }

    /// `[!]key [operator values]`.
    fn requirement(&mut self) -> Result<Requirement, String> {
        let (mut kind, mut key) = self.next(Context::Values);
        let absent = kind == Kind::Not;
        if absent {
            (kind, key) = self.next(Context::Values);
        }
        if kind != Kind::Identifier {
            return Err(format!("found '{key}', expected: identifier"));
        }
        check_key(key)?;
        let key = key.to_string();
        if absent {
            return Ok(Requirement {
                key,
                op: Op::DoesNotExist,
            });
        }
        if matches!(self.peek(Context::Values).0, Kind::End | Kind::Comma) {
            return Ok(Requirement {
                key,
                op: Op::Exists,
            });
        }
        let operator = match self.next(Context::Operator) {
            (
                kind @ (Kind::In
                | Kind::NotIn
                | Kind::Equals
                | Kind::DoubleEquals
                | Kind::NotEquals
                | Kind::Greater
                | Kind::Less),
                _,
            ) => kind,
            (_, text) => {
                return Err(format!(
                    "found '{text}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        };
        let values = match operator {
            Kind::In | Kind::NotIn => self.value_set()?,
            _ => BTreeSet::from([self.exact_value()?]),
        };
        // Sorted and without repeats, as upstream's set: an error's index
        // counts in this order.
        let values: Vec<String> = values.into_iter().map(str::to_string).collect();
        let mut errors = Vec::new();
        let number = match operator {
            Kind::Greater | Kind::Less => {
                let number = values[0].parse::<i64>();
                if number.is_err() {
                    errors.push(FieldError::invalid(
                        "values[0]",
                        values[0].as_str(),
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    ));
                }
                number.ok()
            }
            _ => None,
        };
        for (i, value) in values.iter().enumerate() {
            errors.extend(validate_label_value(value, &format!("values[{i}][{key}]")));
        }
        if !errors.is_empty() {
            return Err(aggregate(&errors));
        }
        let op = match (operator, number) {
            (Kind::Greater, Some(n)) => Op::Gt(n),
            (Kind::Less, Some(n)) => Op::Lt(n),
            (Kind::NotIn | Kind::NotEquals, _) => Op::NotIn(values),
            _ => Op::In(values),
        };
        Ok(Requirement { key, op })
    }

    /// `(a,b,…)`; empty members are the empty value, `()` is `("")`.
    fn value_set(&mut self) -> Result<BTreeSet<&'a str>, String> {
        match self.next(Context::Values) {
            (Kind::OpenPar, _) => {}
            (_, text) => return Err(format!("found '{text}' expected: '('")),
        }
        let (kind, first) = self.peek(Context::Values);
        match kind {
            Kind::Identifier | Kind::Comma => {
                let values = self.value_list()?;
                if self.next(Context::Values).0 != Kind::ClosePar {
                    // Upstream names the set's first token here.
                    return Err(format!("found '{first}', expected: ')'"));
                }
                Ok(values)
            }
            Kind::ClosePar => {
                self.next(Context::Values);
                Ok(BTreeSet::from([""]))
            }
            _ => Err(format!("found '{first}', expected: ',', ')' or identifier")),
        }
    }

    /// The members of a set, up to (not past) its `)`.
    fn value_list(&mut self) -> Result<BTreeSet<&'a str>, String> {
        let mut values = BTreeSet::new();
        loop {
            match self.next(Context::Values) {
                (Kind::Identifier, value) => {
                    values.insert(value);
                    match self.peek(Context::Values) {
                        (Kind::Comma, _) => {}
                        (Kind::ClosePar, _) => return Ok(values),
                        (_, text) => return Err(format!("found '{text}', expected: ',' or ')'")),
                    }
                }
                (Kind::Comma, _) => {
                    if values.is_empty() {
                        values.insert("");
                    }
                    match self.peek(Context::Values).0 {
                        Kind::ClosePar => {
                            values.insert("");
                            return Ok(values);
                        }
                        Kind::Comma => {
                            self.next(Context::Values);
                            values.insert("");
                        }
                        _ => {}
                    }
                }
                (_, text) => return Err(format!("found '{text}', expected: ',', or identifier")),
            }
        }
    }

    /// The value after `=`, `==`, `!=`, `>` or `<`; nothing is the empty value.
    fn exact_value(&mut self) -> Result<&'a str, String> {
        if matches!(self.peek(Context::Values).0, Kind::End | Kind::Comma) {
            return Ok("");
        }
        match self.next(Context::Values) {
            (Kind::Identifier, value) => Ok(value),
            (_, text) => Err(format!("found '{text}', expected: identifier")),
        }
    }
}

/// A key must be a qualified name; upstream reports it without a field path.
fn check_key(key: &str) -> Result<(), String> {
    let errors = validate_qualified_name(key, "<nil>");
    if errors.is_empty() {
        return Ok(());
    }
    let details: Vec<&str> = errors.iter().map(|e| e.detail.as_str()).collect();
    Err(FieldError::invalid("<nil>", key, details.join("; ")).render())
}

/// Several field errors in one message, as upstream's aggregate prints them.
fn aggregate(errors: &[FieldError]) -> String {
    match errors {
        [one] => one.render(),
        _ => {
            let all: Vec<String> = errors.iter().map(FieldError::render).collect();
            format!("[{}]", all.join(", "))
        }
    }
}

impl LabelSelector {
    /// Parses the `labelSelector` query syntax.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let mut parser = Parser {
            tokens: lex(input),
            at: 0,
        };
        Ok(Self::of(parser.selector()?))
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

    /// The forms upstream's lexer accepts without spaces, keywords as
    /// values and keys, and empty values.
    #[test]
    fn parses_what_upstream_parses() {
        let o = obj(json!({"app": "web", "in": "notin", "e": "", "n": "5"}));
        let cases = [
            ("app in(web)", true),
            ("app notin(db,web)", false),
            ("app in (db,,web)", true),
            ("in in (notin)", true),
            ("in", true),
            ("e=", true),
            ("e in ()", true),
            ("e in (,x)", true),
            ("!missing,app==web", true),
            ("app!=web", false),
            ("n > 4", true),
            (" app = web , n<6 ", true),
        ];
        for (sel, want) in cases {
            let parsed = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(parsed.matches(&o), want, "{sel}");
        }
    }

    /// Each mistake is refused in upstream's words (`labels.Parse`).
    #[test]
    fn refusals_are_worded_as_upstream() {
        let label_rule = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
        let cases = [
            (
                "a in (b",
                "unable to parse requirement: found '', expected: ',' or ')'".to_string(),
            ),
            (
                "a in b",
                "unable to parse requirement: found 'b' expected: '('".to_string(),
            ),
            (
                "type=app,versionv1.0.1)",
                "unable to parse requirement: found ')', expected: in, notin, =, ==, !=, gt, lt"
                    .to_string(),
            ),
            (
                "a=b=c",
                "found '=', expected: ',' or 'end of string'".to_string(),
            ),
            ("a,", "found '', expected: identifier after ','".to_string()),
            (
                ",a",
                "found ',', expected: !, identifier, or 'end of string'".to_string(),
            ),
            ("!", "unable to parse requirement: found '', expected: identifier".to_string()),
            (
                "a in (b c)",
                "unable to parse requirement: found 'c', expected: ',' or ')'".to_string(),
            ),
            (
                "a in (=)",
                "unable to parse requirement: found '=', expected: ',', ')' or identifier"
                    .to_string(),
            ),
            (
                "a>b",
                "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer".to_string(),
            ),
            (
                "a=-b-",
                format!("unable to parse requirement: values[0][a]: Invalid value: \"-b-\": {label_rule}"),
            ),
            (
                "a in (x,-y-,_z)",
                format!("unable to parse requirement: [values[0][a]: Invalid value: \"-y-\": {label_rule}, values[1][a]: Invalid value: \"_z\": {label_rule}]"),
            ),
            (
                "-a=b",
                "unable to parse requirement: <nil>: Invalid value: \"-a\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_string(),
            ),
        ];
        for (sel, want) in cases {
            let got = LabelSelector::parse(sel).map(|_| ()).unwrap_err().0;
            assert_eq!(got, want, "{sel}");
        }
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
