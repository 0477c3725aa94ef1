//! CustomResourceDefinitions: turning stored CRDs into served resources.
//! A CRD is validated (names, versions, structural schema) when written;
//! the [`controller`] then accepts its names, registers every served version
//! in the live registry with a watch cache for its storage prefix, sets the
//! `NamesAccepted`/`Established` conditions, and on deletion removes every
//! custom object before letting the CRD go. Custom objects are pruned,
//! defaulted and validated against their version's schema on every write,
//! stored in the storage version and served in the requested one.
//!
//! Nothing here reaches the store directly except through the handlers'
//! admission hooks and the in-process API client of the controller.

pub(crate) mod controller;
pub(crate) mod defaults;
pub(crate) mod definition;
pub(crate) mod printer;
pub(crate) mod prune;
mod resources;
pub(crate) mod rules;
pub(crate) mod scale;
pub(crate) mod schema;
pub(crate) mod structural;
pub(crate) mod values;

use serde_json::{Value, json};

use crate::status::FieldError;
pub(crate) use resources::{Acceptance, Served, served_resources};

/// Everything the handlers need about one served version of a CRD.
#[derive(Debug)]
pub struct CustomVersion {
    /// `metadata.name` of the CRD.
    pub crd_name: String,
    /// `group/version` this entry serves.
    pub api_version: String,
    /// `group/version` objects are stored in.
    pub storage_api_version: String,
    /// `spec.names.singular` (defaulted to the lower-case kind), for discovery.
    pub singular: String,
    /// The version's structural schema, for validation, pruning and defaulting.
    pub schema: Option<schema::Schema>,
    /// The version's `openAPIV3Schema` as written, for OpenAPI documents.
    pub openapi_schema: Option<Value>,
    /// The version's printer columns, for tables.
    pub columns: Vec<printer::PrinterColumn>,
    /// The scale subresource's paths, when enabled.
    pub scale: Option<scale::ScalePaths>,
}

impl CustomVersion {
    /// A stored object as this version serves it: its apiVersion rewritten
    /// (conversion strategy None) and the schema's defaults applied.
    // Named for the direction it converts in, beside `to_storage`.
    #[allow(clippy::wrong_self_convention)]
    pub fn from_storage(&self, mut object: Value) -> Value {
        set_api_version(&mut object, &self.api_version);
        if let Some(schema) = &self.schema {
            defaults::apply(schema, &mut object);
        }
        object
    }

    /// An object of this version as stored.
    pub fn to_storage(&self, mut object: Value) -> Value {
        set_api_version(&mut object, &self.storage_api_version);
        object
    }

    /// Drops fields the schema does not know, then applies its defaults.
    pub fn prune_and_default(&self, object: &mut Value) {
        if let Some(schema) = &self.schema {
            prune::prune_root(schema, object);
            defaults::apply(schema, object);
        }
    }

    /// A copy of `object` without the fields the schema does not allow.
    pub fn pruned(&self, object: &Value) -> Value {
        let mut copy = object.clone();
        if let Some(schema) = &self.schema {
            prune::prune_root(schema, &mut copy);
        }
        copy
    }

    /// Every violation of the schema, with field paths: its structural
    /// checks, then (when those pass) its `x-kubernetes-validations` rules,
    /// transition rules seeing `old` (the stored object, on updates).
    pub fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if let Some(schema) = &self.schema {
            values::validate(schema, object, "", &mut errors);
            if errors.is_empty() {
                rules::validate(schema, object, old, &mut errors);
            }
        }
        errors
    }
}

fn set_api_version(object: &mut Value, api_version: &str) {
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".into(), json!(api_version));
    }
}

/// Fails unless one of `errors` says `text` (the crd tests' check of a
/// rendered field error).
#[cfg(test)]
fn assert_reported(errors: &[String], text: &str) {
    assert!(errors.iter().any(|e| e.contains(text)), "{errors:?}");
}
