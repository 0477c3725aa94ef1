//! The OpenAPI v3 schema of one CRD version, decoded from its JSON once
//! (with its patterns compiled) so every object write can be checked,
//! pruned and defaulted against it without re-parsing.

use std::collections::BTreeMap;

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

/// `additionalProperties`: a boolean or a schema for every other key.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Additional {
    /// `true` allows any other key, `false` none.
    Allowed(bool),
    /// Every other key's value must match this schema.
    Schema(Box<Schema>),
}

/// One node of a structural schema (the subset of JSONSchemaProps that
/// validation, pruning and defaulting use).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schema {
    /// `type`.
    #[serde(rename = "type")]
    pub ty: Option<String>,
    /// `format`, e.g. `int32` or `date-time`.
    pub format: Option<String>,
    /// `properties`.
    #[serde(default)]
    pub properties: BTreeMap<String, Schema>,
    /// `additionalProperties`.
    pub additional_properties: Option<Additional>,
    /// `items`, for arrays.
    pub items: Option<Box<Schema>>,
    /// `required`.
    #[serde(default)]
    pub required: Vec<String>,
    /// `enum`.
    #[serde(rename = "enum")]
    pub enumeration: Option<Vec<Value>>,
    /// `minimum`.
    pub minimum: Option<f64>,
    /// `maximum`.
    pub maximum: Option<f64>,
    /// `exclusiveMinimum`.
    #[serde(default)]
    pub exclusive_minimum: bool,
    /// `exclusiveMaximum`.
    #[serde(default)]
    pub exclusive_maximum: bool,
    /// `minLength`.
    pub min_length: Option<u64>,
    /// `maxLength`.
    pub max_length: Option<u64>,
    /// `minItems`.
    pub min_items: Option<u64>,
    /// `maxItems`.
    pub max_items: Option<u64>,
    /// `minProperties`.
    pub min_properties: Option<u64>,
    /// `maxProperties`.
    pub max_properties: Option<u64>,
    /// `pattern`, a regular expression.
    pub pattern: Option<String>,
    /// `nullable`: null is kept rather than pruned or refused.
    #[serde(default)]
    pub nullable: bool,
    /// `default`.
    pub default: Option<Value>,
    /// `x-kubernetes-preserve-unknown-fields`: unknown fields are not pruned.
    #[serde(rename = "x-kubernetes-preserve-unknown-fields")]
    pub preserve_unknown_fields: Option<bool>,
    /// `x-kubernetes-int-or-string`.
    #[serde(rename = "x-kubernetes-int-or-string", default)]
    pub int_or_string: bool,
    /// `x-kubernetes-embedded-resource`: the value is an object with its own apiVersion, kind and metadata.
    #[serde(rename = "x-kubernetes-embedded-resource", default)]
    pub embedded_resource: bool,
    /// `x-kubernetes-list-type` (`atomic`, `set`, `map`).
    #[serde(rename = "x-kubernetes-list-type")]
    pub list_type: Option<String>,
    /// `x-kubernetes-list-map-keys`: what identifies an item of a `map` list.
    #[serde(rename = "x-kubernetes-list-map-keys", default)]
    pub list_map_keys: Vec<String>,
    /// `x-kubernetes-validations`: CEL rules about the value at this node
    /// (`crd::rules`).
    #[serde(rename = "x-kubernetes-validations", default)]
    pub rules: Vec<super::rules::Rule>,
    /// `pattern`, compiled by [`Schema::compile`]; `None` also when it does
    /// not compile (CRD validation rejects such schemas before they serve).
    #[serde(skip)]
    pub regex: Option<Regex>,
}

impl Schema {
    /// Decodes a schema from the CRD's JSON and compiles its patterns.
    pub fn parse(value: &Value) -> Result<Self, serde_json::Error> {
        let mut schema: Schema = serde_json::from_value(value.clone())?;
        schema.compile();
        Ok(schema)
    }

    fn compile(&mut self) {
        self.regex = self.pattern.as_deref().and_then(|p| Regex::new(p).ok());
        for rule in &mut self.rules {
            rule.compile();
        }
        for child in self.properties.values_mut() {
            child.compile();
        }
        if let Some(items) = &mut self.items {
            items.compile();
        }
        if let Some(Additional::Schema(s)) = &mut self.additional_properties {
            s.compile();
        }
    }

    /// Unknown fields below this node are kept.
    pub fn preserves_unknown(&self) -> bool {
        self.preserve_unknown_fields == Some(true)
    }

    /// The schema of the value under `key` of an object at this node.
    pub fn property(&self, key: &str) -> Option<&Schema> {
        self.properties
            .get(key)
            .or(match &self.additional_properties {
                Some(Additional::Schema(s)) => Some(s),
                _ => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_the_fields_validation_uses() {
        let s = Schema::parse(&json!({"type": "object", "required": ["spec"],
            "properties": {"spec": {"type": "object", "properties": {
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "any": {"x-kubernetes-preserve-unknown-fields": true}}}}}))
        .unwrap();
        let spec = s.property("spec").unwrap();
        let name = spec.property("name").unwrap();
        assert!(name.regex.as_ref().unwrap().is_match("abc"));
        assert_eq!(name.max_length, Some(5));
        assert_eq!(
            spec.property("labels")
                .unwrap()
                .property("anything")
                .unwrap()
                .ty
                .as_deref(),
            Some("string")
        );
        assert!(spec.property("any").unwrap().preserves_unknown());
        assert_eq!(s.required, vec!["spec"]);
    }
}
