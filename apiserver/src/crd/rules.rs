//! CRD validation rules (`x-kubernetes-validations`): CEL rules written on
//! any node of a version's schema, with `self` bound to the value at that
//! node and, for transition rules, `oldSelf` to the same node of the stored
//! object. Rules are compiled when the CRD is written (one that does not
//! compile refuses the CRD, [`check_definition`]) and again when its schema
//! is decoded for serving; [`validate`] runs them on every create and
//! update of a custom object, reporting each failure as a field error at
//! the node's path (or its `fieldPath`), worded as upstream words them.
//!
//! All rules of one object share one budget (`crate::cel::Budget`), so a
//! hostile CRD cannot hold the server. Old values are found for object
//! properties, map values and the items of `x-kubernetes-list-type: map`
//! lists (by their keys); elsewhere transition rules do not run, as
//! upstream. Nothing here reads or writes the store.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use super::schema::{Additional, Schema};
use crate::cel::{self, Budget, Declarations, EvalError, Program};
use crate::status::FieldError;

/// The variables a rule may name.
const ROOTS: &[&str] = &["self", "oldSelf"];

/// The reasons a rule may give.
const REASONS: &[&str] = &[
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
];

/// One `x-kubernetes-validations` entry, with its programs once compiled.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// The CEL expression; true means valid.
    #[serde(default)]
    pub rule: String,
    /// The message when the rule fails.
    pub message: Option<String>,
    /// A CEL expression giving the message instead.
    pub message_expression: Option<String>,
    /// The failure's reason, e.g. `FieldValueForbidden`.
    pub reason: Option<String>,
    /// The path to report the failure at, relative to the rule's node.
    pub field_path: Option<String>,
    /// Evaluate the rule on create too, with `oldSelf` absent (an optional).
    pub optional_old_self: Option<bool>,
    #[serde(skip)]
    program: Option<Arc<Program>>,
    #[serde(skip)]
    message_program: Option<Arc<Program>>,
}

impl Rule {
    /// Compiles the rule and its message expression; what does not compile
    /// stays `None` (the CRD was refused for it when written).
    pub(super) fn compile(&mut self) {
        let declared = Declarations::roots(ROOTS);
        self.program = cel::compile(&self.rule, &declared).ok();
        self.message_program = self
            .message_expression
            .as_deref()
            .filter(|m| !m.is_empty())
            .and_then(|m| cel::compile(m, &declared).ok());
    }
}

/// Refuses every rule of a schema (as written in the CRD, at `path`) that
/// does not compile, has no rule text, or gives an unknown reason.
pub(crate) fn check_definition(schema: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let Some(node) = schema.as_object() else {
        return;
    };
    let declared = Declarations::roots(ROOTS);
    for (i, rule) in node
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("{path}.x-kubernetes-validations[{i}]");
        let text = rule["rule"].as_str().unwrap_or("");
        if text.trim().is_empty() {
            errors.push(FieldError::required(format!("{at}.rule"), ""));
        } else if let Err(error) = cel::compile(text, &declared) {
            errors.push(FieldError::invalid(
                format!("{at}.rule"),
                text,
                format!("compilation failed: {error}"),
            ));
        }
        if let Some(message) = rule["messageExpression"].as_str().filter(|m| !m.is_empty())
            && let Err(error) = cel::compile(message, &declared)
        {
            errors.push(FieldError::invalid(
                format!("{at}.messageExpression"),
                message,
                format!("messageExpression compilation failed: {error}"),
            ));
        }
        crate::validation::one_of(rule, "reason", REASONS, &at, errors);
        if rule["optionalOldSelf"] == true
            && !cel::compile(text, &declared).is_ok_and(|p| p.uses("oldSelf"))
        {
            errors.push(FieldError::invalid(
                format!("{at}.optionalOldSelf"),
                true,
                "may not be set on validation rules that do not reference oldSelf",
            ));
        }
    }
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            check_definition(child, &format!("{path}.properties[{name}]"), errors);
        }
    }
    if let Some(items) = node.get("items") {
        check_definition(items, &format!("{path}.items"), errors);
    }
    if let Some(additional) = node.get("additionalProperties") {
        check_definition(additional, &format!("{path}.additionalProperties"), errors);
    }
}

/// Runs every rule of `schema` on `object` (and `old`, the stored object
/// on updates), adding a field error for each that fails.
pub(crate) fn validate(
    schema: &Schema,
    object: &Value,
    old: Option<&Value>,
    errors: &mut Vec<FieldError>,
) {
    let budget = Budget::standard();
    let mut walk = Walk {
        budget,
        errors,
        out_of_budget: false,
    };
    walk.node(schema, object, old, "");
}

struct Walk<'e> {
    budget: Arc<Budget>,
    errors: &'e mut Vec<FieldError>,
    /// Set once the budget ran out: no further rule runs.
    out_of_budget: bool,
}

impl Walk<'_> {
    fn node(&mut self, schema: &Schema, value: &Value, old: Option<&Value>, path: &str) {
        if value.is_null() || self.out_of_budget {
            return;
        }
        for rule in &schema.rules {
            self.rule(rule, value, old, path);
        }
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    let child_schema =
                        schema
                            .properties
                            .get(key)
                            .or(match &schema.additional_properties {
                                Some(Additional::Schema(s)) => Some(s.as_ref()),
                                _ => None,
                            });
                    if let Some(child_schema) = child_schema {
                        let old_child = old.and_then(|o| o.get(key));
                        let child_path = if schema.properties.contains_key(key) {
                            super::values::child_path(path, key)
                        } else {
                            format!("{}[{key}]", if path.is_empty() { "<nil>" } else { path })
                        };
                        self.node(child_schema, child, old_child, &child_path);
                    }
                }
            }
            Value::Array(items) => {
                let Some(item_schema) = schema.items.as_deref() else {
                    return;
                };
                for (i, item) in items.iter().enumerate() {
                    let old_item = old.and_then(|o| old_list_item(schema, item, o));
                    self.node(item_schema, item, old_item, &format!("{path}[{i}]"));
                }
            }
            _ => {}
        }
    }

    fn rule(&mut self, rule: &Rule, value: &Value, old: Option<&Value>, path: &str) {
        let Some(program) = &rule.program else {
            return;
        };
        let optional_old = rule.optional_old_self == Some(true);
        let transition = program.uses("oldSelf");
        if transition && old.is_none() && !optional_old {
            return;
        }
        let mut variables = vec![("self", cel::from_json(value))];
        if transition {
            let old_self = if optional_old {
                optional_of(old)
            } else {
                old.map(cel::from_json)
            };
            match old_self {
                Some(old_self) => variables.push(("oldSelf", old_self)),
                None => return,
            }
        }
        let field = match rule.field_path.as_deref().filter(|p| !p.is_empty()) {
            Some(relative) => format!("{path}{relative}"),
            None if path.is_empty() => "<nil>".to_string(),
            None => path.to_string(),
        };
        let type_name = super::values::type_name(value);
        match cel::evaluate(program, &variables, &self.budget).and_then(|v| cel::as_bool(&v)) {
            Ok(true) => {}
            Ok(false) => {
                let message = rule
                    .message_program
                    .as_ref()
                    .and_then(|p| cel::evaluate(p, &variables, &self.budget).ok())
                    .and_then(|v| cel::as_string(&v).ok())
                    .filter(|m| !m.trim().is_empty() && !m.contains('\n'))
                    .or_else(|| rule.message.clone().filter(|m| !m.is_empty()))
                    .unwrap_or_else(|| format!("failed rule: {}", rule.rule));
                self.errors.push(match rule.reason.as_deref() {
                    Some("FieldValueForbidden") => FieldError::forbidden(field, message),
                    Some("FieldValueRequired") => FieldError::required(field, message),
                    Some("FieldValueDuplicate") => {
                        let mut error = FieldError::duplicate(field, type_name);
                        error.detail = message;
                        error
                    }
                    _ => FieldError::invalid(field, type_name, message),
                });
            }
            Err(EvalError::CostExceeded | EvalError::Timeout) => {
                self.out_of_budget = true;
                self.errors.push(FieldError::forbidden(
                    field,
                    "validation failed due to running out of cost budget, no further validation rules will be run",
                ));
            }
            Err(error) => self.errors.push(FieldError::invalid(
                field,
                type_name,
                format!("rule evaluation error: {error}"),
            )),
        }
    }
}

/// `optional.of(old)` or `optional.none()` as a CEL value.
fn optional_of(old: Option<&Value>) -> Option<cel::Value> {
    let declared = Declarations::roots(&["v"]);
    let budget = Budget::standard();
    match old {
        Some(old) => {
            let program = cel::compile("optional.of(v)", &declared).ok()?;
            cel::evaluate(&program, &[("v", cel::from_json(old))], &budget).ok()
        }
        None => {
            let program = cel::compile("optional.none()", &declared).ok()?;
            cel::evaluate(&program, &[], &budget).ok()
        }
    }
}

/// The stored item a new item of a `map` list corresponds to (same key
/// values); other lists do not correlate items.
fn old_list_item<'o>(schema: &Schema, item: &Value, old: &'o Value) -> Option<&'o Value> {
    if schema.list_type.as_deref() != Some("map") || schema.list_map_keys.is_empty() {
        return None;
    }
    old.as_array()?.iter().find(|candidate| {
        schema
            .list_map_keys
            .iter()
            .all(|key| candidate.get(key) == item.get(key))
    })
}

#[cfg(test)]
mod tests;
