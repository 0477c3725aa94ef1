//! Why a body does not decode into its kind, in the words of upstream's
//! decoder (Go's `encoding/json`, as `sigs.k8s.io/json` forks it):
//! `json: cannot unmarshal bool into Go struct field ConfigMap.data of type
//! string`. People search for these words and tools match on them; serde's
//! own (`invalid type: boolean, expected a string`) name neither the field
//! nor the type.
//!
//! Only a failed decode pays: the typed decode runs again noting where it
//! stopped, and the kind's OpenAPI schema (made on the kind's first failure
//! and kept) is walked along that path to find
//! what Go would name: the innermost struct holding the field, the field
//! path from the root (map keys and list indices left out, as Go leaves
//! them), and the Go type the value should have had. Where the schema cannot
//! say (a kind without one, a path it does not describe), the caller keeps
//! serde's words.
//!
//! Go's names for named string types (`v1.Protocol`) are not in the schema;
//! such a field is named by its underlying type (`string`).

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use serde_path_to_error::Segment;
use skiff_common::quantity::syntax::SyntaxError;

/// The schema names whose Go types decode themselves (custom `UnmarshalJSON`).
const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const TIMES: &[&str] = &[
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime",
];

/// `value` decoded into the built-in kind's type `T`, or why it does not in
/// upstream's words (serde's where the schema cannot say): the one typed
/// decode of a written body, for the registry's round trip and the reviews.
pub(crate) fn decode<T: k8s_openapi::Resource + DeserializeOwned>(
    value: &Value,
) -> Result<T, String> {
    T::deserialize(value).map_err(|e| {
        explain::<T>(T::GROUP, T::VERSION, T::KIND, value).unwrap_or_else(|| e.to_string())
    })
}

/// Upstream's message for why `value` does not decode into `T`, the type of
/// the built-in kind `group/version, Kind=kind`; `None` when `T` decodes it
/// or the schema cannot say where it fails.
pub(crate) fn explain<T: DeserializeOwned>(
    group: &str,
    version: &str,
    kind: &str,
    value: &Value,
) -> Option<String> {
    let failed = serde_path_to_error::deserialize::<_, T>(value).err()?;
    let made = crate::openapi::kind_definitions(group, version, kind)?;
    let (root, definitions) = made.as_ref();
    let schema = Schemas { definitions };
    schema.explain(root, value, failed.path())
}

/// A kind's schema definitions, by name, with `#/definitions/` references.
struct Schemas<'a> {
    definitions: &'a Map<String, Value>,
}

/// Where the walk along the failed path stands.
struct Position<'a> {
    /// The schema of the value here, references not yet followed.
    schema: &'a Value,
    /// The definition `schema` is, when it is one itself (the root).
    definition: Option<&'a str>,
    value: &'a Value,
    /// The Go struct holding the last field on the path (`ConfigMap`).
    structure: Option<String>,
    /// JSON field names from the root, map keys and indices left out.
    fields: Vec<&'a str>,
}

impl<'a> Schemas<'a> {
    /// Follows a `$ref`: the definition's name and schema.
    fn resolve(&self, schema: &'a Value) -> (Option<&'a str>, &'a Value) {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(reference) => {
                let name = reference
                    .strip_prefix("#/definitions/")
                    .unwrap_or(reference);
                match self.definitions.get(name) {
                    Some(definition) => (Some(name), definition),
                    None => (Some(name), schema),
                }
            }
            None => (None, schema),
        }
    }

    fn explain(
        &self,
        root: &str,
        value: &'a Value,
        path: &serde_path_to_error::Path,
    ) -> Option<String> {
        let (root, schema) = self.definitions.get_key_value(root)?;
        let mut here = Position {
            schema,
            definition: Some(root.as_str()),
            value,
            structure: None,
            fields: Vec::new(),
        };
        for segment in path.iter() {
            let (referenced, schema) = self.resolve(here.schema);
            let name = referenced.or(here.definition.take());
            match segment {
                Segment::Map { key } => {
                    let value = here.value.get(key.as_str())?;
                    if let Some((field, inner)) = schema
                        .get("properties")
                        .and_then(Value::as_object)
                        .and_then(|p| p.get_key_value(key.as_str()))
                    {
                        here.structure = Some(go_struct_name(name?).to_string());
                        here.fields.push(field.as_str());
                        here.schema = inner;
                    } else {
                        here.schema = schema.get("additionalProperties")?;
                    }
                    here.value = value;
                }
                Segment::Seq { index } => {
                    here.value = here.value.get(index)?;
                    here.schema = schema.get("items")?;
                }
                Segment::Enum { .. } | Segment::Unknown => return None,
            }
        }
        self.message(&here)
    }

    /// The message for the value at `here` not fitting its schema.
    fn message(&self, here: &Position<'_>) -> Option<String> {
        let (name, _) = self.resolve(here.schema);
        if name == Some(QUANTITY) {
            // Quantity reads its raw JSON as text: anything but a string or
            // a number fails its grammar, not a type check.
            return Some(SyntaxError::Format.to_string());
        }
        if let Value::String(text) = here.value
            && self.is_bytes(here.schema)
        {
            // A []byte field holds base64, and Go names the first byte it
            // could not read.
            return base64_error(text.as_bytes())
                .map(|at| format!("illegal base64 data at input byte {at}"));
        }
        let ty = self.go_type(here.schema)?;
        let got = match here.value {
            Value::Bool(_) => "bool".to_string(),
            Value::String(_) => "string".to_string(),
            Value::Object(_) => "object".to_string(),
            Value::Array(_) => "array".to_string(),
            // Go reads a number into an integer by its text, and names the
            // text that did not fit; other mismatches are just "number".
            Value::Number(n) if matches!(ty.as_str(), "int32" | "int64" | "int") => {
                format!("number {n}")
            }
            Value::Number(_) => "number".to_string(),
            // Go decodes null into anything; it is never the reason.
            Value::Null => return None,
        };
        Some(match &here.structure {
            Some(structure) => format!(
                "json: cannot unmarshal {got} into Go struct field {structure}.{} of type {ty}",
                here.fields.join(".")
            ),
            None => format!("json: cannot unmarshal {got} into Go value of type {ty}"),
        })
    }

    fn is_bytes(&self, schema: &Value) -> bool {
        let (_, resolved) = self.resolve(schema);
        resolved.get("format").and_then(Value::as_str) == Some("byte")
    }

    /// The Go type a schema stands for, as Go prints it (`[]v1.Container`,
    /// `map[string]string`).
    fn go_type(&self, schema: &Value) -> Option<String> {
        let (name, resolved) = self.resolve(schema);
        match name {
            // IntOrString decodes anything but a string as an int32.
            Some(INT_OR_STRING) => return Some("int32".into()),
            // Time decodes its JSON as a string first.
            Some(name) if TIMES.contains(&name) => return Some("string".into()),
            Some(name) if resolved.get("properties").is_some() => {
                return Some(go_qualified_name(name));
            }
            _ => {}
        }
        let format = resolved.get("format").and_then(Value::as_str);
        Some(match resolved.get("type").and_then(Value::as_str)? {
            "string" if format == Some("byte") => "[]uint8".into(),
            "string" => "string".into(),
            "boolean" => "bool".into(),
            "integer" => match format {
                Some("int32") => "int32".into(),
                Some("int64") => "int64".into(),
                _ => "int".into(),
            },
            "number" => match format {
                Some("float") => "float32".into(),
                _ => "float64".into(),
            },
            "array" => format!("[]{}", self.go_type(resolved.get("items")?)?),
            "object" => match resolved.get("additionalProperties") {
                Some(inner) if inner.is_object() => {
                    format!("map[string]{}", self.go_type(inner)?)
                }
                _ => return None,
            },
            _ => return None,
        })
    }
}

/// Where Go's standard base64 decoding of `text` stops, as the offset its
/// `CorruptInputError` names; `None` when Go reads it all. Line breaks are
/// skipped and padding is required, as in Go's `StdEncoding`.
fn base64_error(text: &[u8]) -> Option<usize> {
    let symbol = |b: u8| b.is_ascii_alphanumeric() || b == b'+' || b == b'/';
    let line_break = |b: u8| b == b'\n' || b == b'\r';
    let mut at = 0;
    while at < text.len() {
        // One quantum of four symbols.
        let mut taken = 0;
        while taken < 4 {
            let Some(&b) = text.get(at) else {
                // The input ends inside a quantum: padding was required.
                return (taken > 0).then(|| at - taken);
            };
            at += 1;
            if symbol(b) {
                taken += 1;
                continue;
            }
            if line_break(b) {
                continue;
            }
            if b != b'=' || taken < 2 {
                return Some(at - 1);
            }
            if taken == 2 {
                // "==" is expected; the first is read.
                while text.get(at).copied().is_some_and(line_break) {
                    at += 1;
                }
                match text.get(at) {
                    None => return Some(text.len()),
                    Some(b'=') => at += 1,
                    Some(_) => return Some(at - 1),
                }
            }
            while text.get(at).copied().is_some_and(line_break) {
                at += 1;
            }
            // Padding ends the data; anything after it is garbage.
            return (at < text.len()).then_some(at);
        }
    }
    None
}

/// `PodSpec` of `io.k8s.api.core.v1.PodSpec`.
fn go_struct_name(definition: &str) -> &str {
    definition.rsplit('.').next().unwrap_or(definition)
}

/// `v1.PodSpec` of `io.k8s.api.core.v1.PodSpec`: Go qualifies a type by
/// the last element of its package path.
fn go_qualified_name(definition: &str) -> String {
    let mut parts = definition.rsplit('.');
    match (parts.next(), parts.next()) {
        (Some(name), Some(package)) => format!("{package}.{name}"),
        _ => definition.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
    use serde_json::json;

    fn pod(spec: Value) -> Option<String> {
        explain::<Pod>(
            "",
            "v1",
            "Pod",
            &json!({"metadata": {"name": "p"}, "spec": spec}),
        )
    }

    #[test]
    fn a_map_value_names_the_map_field_not_the_key() {
        let cm = json!({"metadata": {"name": "c"}, "data": {"enabled": true}});
        assert_eq!(
            explain::<ConfigMap>("", "v1", "ConfigMap", &cm).as_deref(),
            Some("json: cannot unmarshal bool into Go struct field ConfigMap.data of type string")
        );
        let cm = json!({"metadata": {"name": "c"}, "data": {"nested": {"a": "b"}}});
        assert_eq!(
            explain::<ConfigMap>("", "v1", "ConfigMap", &cm).as_deref(),
            Some(
                "json: cannot unmarshal object into Go struct field ConfigMap.data of type string"
            )
        );
    }

    #[test]
    fn a_field_deep_in_lists_names_its_struct_and_the_whole_path() {
        let deployment = json!({
            "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"spec": {
                "containers": [{"name": "c", "image": "i",
                    "env": [{"name": "A", "value": "x"}, {"name": "PORT", "value": 8080}]}]}}}
        });
        assert_eq!(
            explain::<Deployment>("apps", "v1", "Deployment", &deployment).as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field \
                 EnvVar.spec.template.spec.containers.env.value of type string"
            )
        );
    }

    #[test]
    fn integers_name_the_text_that_did_not_fit() {
        let service =
            |port: Value| json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": port}]}});
        assert_eq!(
            explain::<Service>("", "v1", "Service", &service(json!("80x"))).as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field ServicePort.spec.ports.port of type int32"
            )
        );
        assert_eq!(
            explain::<Service>("", "v1", "Service", &service(json!(80.5))).as_deref(),
            Some(
                "json: cannot unmarshal number 80.5 into Go struct field ServicePort.spec.ports.port of type int32"
            )
        );
        let target = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80, "targetPort": true}]}});
        assert_eq!(
            explain::<Service>("", "v1", "Service", &target).as_deref(),
            Some(
                "json: cannot unmarshal bool into Go struct field ServicePort.spec.ports.targetPort of type int32"
            )
        );
    }

    #[test]
    fn structs_lists_and_maps_are_named_as_go_prints_them() {
        assert_eq!(
            pod(json!({"containers": {"name": "c", "image": "i"}})).as_deref(),
            Some(
                "json: cannot unmarshal object into Go struct field PodSpec.spec.containers of type []v1.Container"
            )
        );
        assert_eq!(
            explain::<Pod>(
                "",
                "v1",
                "Pod",
                &json!({"metadata": {"name": "p"}, "spec": "x"})
            )
            .as_deref(),
            Some("json: cannot unmarshal string into Go struct field Pod.spec of type v1.PodSpec")
        );
        assert_eq!(
            pod(json!({"containers": [{"name": "c", "image": "i", "args": ["a", 1]}]})).as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field Container.spec.containers.args of type string"
            )
        );
        assert_eq!(
            pod(json!({"nodeSelector": ["a"], "containers": []})).as_deref(),
            Some(
                "json: cannot unmarshal array into Go struct field PodSpec.spec.nodeSelector of type map[string]string"
            )
        );
        assert_eq!(
            pod(json!({"hostNetwork": "true", "containers": []})).as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field PodSpec.spec.hostNetwork of type bool"
            )
        );
        let annotated = json!({"metadata": {"name": "p", "annotations": {"a": 1}}});
        assert_eq!(
            explain::<Pod>("", "v1", "Pod", &annotated).as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.annotations of type string"
            )
        );
    }

    #[test]
    fn self_decoding_types_keep_their_own_words() {
        assert_eq!(
            pod(json!({"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": true}}}]}))
            .as_deref(),
            Some(
                "quantities must match the regular expression \
                 '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            )
        );
        let secret = json!({"metadata": {"name": "s"}, "data": {"a": 5}});
        assert_eq!(
            explain::<Secret>("", "v1", "Secret", &secret).as_deref(),
            Some("json: cannot unmarshal number into Go struct field Secret.data of type []uint8")
        );
    }

    #[test]
    fn bad_base64_names_the_byte_go_stops_at() {
        let secret = |data: &str| json!({"metadata": {"name": "s"}, "data": {"a": data}});
        for (data, at) in [
            ("!!!notbase64", 0),
            ("YWJj!", 4),
            ("Y", 0),
            ("YWJjZA=", 7),
            ("YW=j", 2),
            ("YQ==YQ==", 4),
        ] {
            assert_eq!(
                explain::<Secret>("", "v1", "Secret", &secret(data)),
                Some(format!("illegal base64 data at input byte {at}")),
                "{data}"
            );
        }
        assert_eq!(base64_error(b"YWJj\nZA=="), None);
        assert_eq!(base64_error(b""), None);
    }

    #[test]
    fn what_decodes_has_nothing_to_explain() {
        assert_eq!(
            pod(json!({"containers": [{"name": "c", "image": "i"}]})),
            None
        );
    }
}
