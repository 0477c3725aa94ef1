//! ConfigMaps and Secrets: the keys their data maps may use, a Secret's
//! default type and the keys its type requires (registry credentials as a
//! JSON object), and what an update may not
//! change (the data of one marked
//! `immutable`, and the mark itself; a Secret's type).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use super::{KindStrategy, set_default};
use crate::kinds::Written;
use crate::registry::ResourceInfo;
use crate::status::FieldError;
use crate::watch_cache::CacheForm;

named_kind! {
    /// Core `configmaps`.
    ConfigMaps = k8s_openapi::api::core::v1::ConfigMap;
}

impl KindStrategy for ConfigMaps {
    /// Held as served JSON: bulk data the server itself rarely reads.
    fn cache_form(&self) -> CacheForm {
        CacheForm::Encoded
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written { object, old, .. } = *written;
        if let Some(old) = old {
            kept_while_immutable(old, object, &["data", "binaryData"], errors);
        }
        data_keys(object, &["data", "binaryData"], errors);
        for (field, other) in [("data", "binaryData"), ("binaryData", "data")] {
            for key in object[field].as_object().into_iter().flat_map(|m| m.keys()) {
                if object[other].get(key).is_some() {
                    errors.push(FieldError::invalid(
                        format!("{field}[{key}]"),
                        key.as_str(),
                        format!("duplicate of key present in {other}"),
                    ));
                }
            }
        }
        // Upstream names no field: the error is about the whole object.
        if data_size(object, "data", false) + data_size(object, "binaryData", true) > MAX_DATA_BYTES
        {
            errors.push(FieldError::too_long("", MAX_DATA_BYTES));
        }
    }
}

named_kind! {
    /// Core `secrets`.
    Secrets = k8s_openapi::api::core::v1::Secret;
}

impl KindStrategy for Secrets {
    /// Held as served JSON: bulk data the server itself rarely reads.
    fn cache_form(&self) -> CacheForm {
        CacheForm::Encoded
    }

    /// `stringData` is a write-only convenience: its entries are encoded
    /// into `data` (winning over a key both name) and the field is dropped,
    /// so it is never stored or returned.
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        set_default(object, "type", json!("Opaque"));
        merge_string_data(object);
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written { object, old, .. } = *written;
        if let Some(old) = old {
            if old["type"] != object["type"] {
                errors.push(FieldError::invalid(
                    "type",
                    object["type"].clone(),
                    "field is immutable",
                ));
            }
            // `stringData` is already merged into `data` here.
            kept_while_immutable(old, object, &["data"], errors);
        }
        data_keys(object, &["data", "stringData"], errors);
        if data_size(object, "data", true) > MAX_DATA_BYTES {
            errors.push(FieldError::too_long("data", MAX_DATA_BYTES));
        }
        typed_secret(object, errors);
    }
}

/// What a Secret's type requires of it, as upstream's ValidateSecret: a
/// service account token names its account, and the well-known types have
/// their keys (basic auth one of its two).
fn typed_secret(secret: &Value, errors: &mut Vec<FieldError>) {
    let has = |key: &str| secret["data"].get(key).is_some_and(|v| !v.is_null());
    let mut require = |key: &str| {
        if !has(key) {
            errors.push(FieldError::required(format!("data[{key}]"), ""));
        }
    };
    match secret["type"].as_str().unwrap_or_default() {
        "kubernetes.io/service-account-token" => {
            let account = "kubernetes.io/service-account.name";
            let named = secret["metadata"]["annotations"][account]
                .as_str()
                .is_some_and(|name| !name.is_empty());
            if !named {
                errors.push(FieldError::required(
                    format!("metadata.annotations[{account}]"),
                    "",
                ));
            }
        }
        "kubernetes.io/dockercfg" => docker_config(secret, ".dockercfg", errors),
        "kubernetes.io/dockerconfigjson" => docker_config(secret, ".dockerconfigjson", errors),
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            require("username");
            require("password");
        }
        // An empty key is as good as none.
        "kubernetes.io/ssh-auth"
            if secret["data"]["ssh-privatekey"]
                .as_str()
                .is_none_or(str::is_empty) =>
        {
            errors.push(FieldError::required("data[ssh-privatekey]", ""));
        }
        "kubernetes.io/tls" => {
            require("tls.crt");
            require("tls.key");
        }
        _ => {}
    }
}

/// A registry credentials Secret's `key`: present, and a JSON object once
/// decoded from base64 (the refusal never shows what it holds).
fn docker_config(secret: &Value, key: &str, errors: &mut Vec<FieldError>) {
    let at = format!("data[{key}]");
    let Some(encoded) = secret["data"][key].as_str() else {
        errors.push(FieldError::required(at, ""));
        return;
    };
    // Bad base64 was refused when the body was decoded.
    let Ok(bytes) = BASE64.decode(encoded) else {
        return;
    };
    let why = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(_)) => return,
        Ok(other) => crate::go_json::cannot_unmarshal(&other, "map[string]interface {}"),
        Err(e) => crate::go_json::syntax_error(&bytes).unwrap_or_else(|| e.to_string()),
    };
    errors.push(FieldError::invalid(at, "<secret contents redacted>", why));
}

/// The most a ConfigMap's or Secret's values may hold together (1 MiB).
const MAX_DATA_BYTES: usize = 1024 * 1024;

/// The bytes the values of `field` hold: base64 ones decoded.
fn data_size(object: &Value, field: &str, base64: bool) -> usize {
    let values = object[field]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values());
    values
        .filter_map(Value::as_str)
        .map(|v| {
            if base64 {
                let padding = v.bytes().rev().take_while(|b| *b == b'=').count();
                ((v.len() / 4) * 3).saturating_sub(padding)
            } else {
                v.len()
            }
        })
        .sum()
}

/// Upstream's words for a change of an object marked immutable.
const IMMUTABLE_SET: &str = "field is immutable when `immutable` is set";

/// Once `old` is marked `immutable`, the mark stays and so does each of
/// `fields` (a field set to null is a field not set).
fn kept_while_immutable(old: &Value, new: &Value, fields: &[&str], errors: &mut Vec<FieldError>) {
    if old["immutable"] != true {
        return;
    }
    if new["immutable"] != true {
        errors.push(FieldError::forbidden("immutable", IMMUTABLE_SET));
    }
    for field in fields {
        if old[*field] != new[*field] {
            errors.push(FieldError::forbidden(*field, IMMUTABLE_SET));
        }
    }
}

/// Moves a Secret's `stringData` into `data`, base64-encoded. Values that
/// are not strings are left for validation to refuse.
fn merge_string_data(object: &mut Value) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let Some(Value::Object(strings)) = map.get("stringData") else {
        return;
    };
    let data_ok = map.get("data").is_none_or(|d| d.is_null() || d.is_object());
    if !data_ok || strings.values().any(|v| !v.is_string()) {
        return;
    }
    let Some(Value::Object(strings)) = map.remove("stringData") else {
        return;
    };
    let data = map.entry("data").or_insert_with(|| json!({}));
    if data.is_null() {
        *data = json!({});
    }
    let Some(data) = data.as_object_mut() else {
        return;
    };
    for (key, value) in strings {
        let plain = value.as_str().unwrap_or_default();
        data.insert(key, json!(BASE64.encode(plain)));
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
