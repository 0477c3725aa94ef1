//! ConfigMaps and Secrets: the keys their data maps may use, a Secret's
//! default type, and their columns.

use serde_json::{Value, json};

use super::{KindStrategy, set_default};
use crate::registry::ResourceInfo;
use crate::status::FieldError;
use crate::table::Printer;

/// Core `configmaps`.
#[derive(Debug)]
pub(crate) struct ConfigMaps;

impl KindStrategy for ConfigMaps {
    fn validate(
        &self,
        _info: &ResourceInfo,
        object: &Value,
        _old: Option<&Value>,
        errors: &mut Vec<FieldError>,
    ) {
        data_keys(object, &["data", "binaryData"], errors);
    }

    fn printer(&self) -> &'static Printer {
        &crate::table::core::CONFIGMAPS
    }
}

/// Core `secrets`.
#[derive(Debug)]
pub(crate) struct Secrets;

impl KindStrategy for Secrets {
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        set_default(object, "type", json!("Opaque"));
    }

    fn validate(
        &self,
        _info: &ResourceInfo,
        object: &Value,
        _old: Option<&Value>,
        errors: &mut Vec<FieldError>,
    ) {
        data_keys(object, &["data", "stringData"], errors);
    }

    fn printer(&self) -> &'static Printer {
        &crate::table::core::SECRETS
    }
}

/// ConfigMap/Secret keys: [-._a-zA-Z0-9]+, at most 253 characters.
fn data_keys(object: &Value, fields: &[&str], errors: &mut Vec<FieldError>) {
    for field in fields {
        for key in object[*field]
            .as_object()
            .into_iter()
            .flat_map(|m| m.keys())
        {
            let ok = !key.is_empty()
                && key.len() <= 253
                && key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
            if !ok {
                errors.push(FieldError::invalid(
                    format!("{field}[{key}]"),
                    key.as_str(),
                    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                ));
            }
        }
    }
}
