//! A decoded message (as a [`Node`] tree) to the JSON a client would have
//! sent for the same object.
//!
//! Field names come from the traced k8s-openapi shapes; the Kubernetes types
//! whose JSON form differs from their message (times, quantities,
//! int-or-string, embedded JSON, schema unions) are recognised by their
//! message name. Go always writes its non-pointer fields, so a zero string,
//! number or bool on the wire usually means "unset", exactly what JSON's
//! `omitempty` leaves out: such zeros are dropped, except for the fields
//! listed in [`ZERO_IS_A_VALUE`] and [`EMPTY_IS_A_VALUE`]. Embedded Go structs
//! (a message field the JSON form does not have, like a ConfigMapKeySelector's
//! `localObjectReference`) are inlined into their parent, as JSON does.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Number, Value};

use super::debug_tree::Node;
use super::schema::{Schemas, Shape};
use crate::go_format::go_duration;

/// Number and bool fields where zero or false is a deliberate choice with a
/// meaning different from leaving them out: Go pointers (`replicas: 0` scales
/// to nothing, absence defaults to one) and required fields whose zero is
/// valid (a CRD version with `served: false`, a PriorityClass `value: 0`).
/// Outside `status`, where Go's counters are plain ints.
pub(super) const ZERO_IS_A_VALUE: &[&str] = &[
    "replicas",
    "revisionHistoryLimit",
    "progressDeadlineSeconds",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "deletionGracePeriodSeconds",
    "gracePeriodSeconds",
    "backoffLimit",
    "backoffLimitPerIndex",
    "maxFailedIndexes",
    "completions",
    "parallelism",
    "ttlSecondsAfterFinished",
    "startingDeadlineSeconds",
    "successfulJobsHistoryLimit",
    "failedJobsHistoryLimit",
    "suspend",
    "runAsUser",
    "runAsGroup",
    "runAsNonRoot",
    "fsGroup",
    "privileged",
    "allowPrivilegeEscalation",
    "readOnlyRootFilesystem",
    "automountServiceAccountToken",
    "enableServiceLinks",
    "shareProcessNamespace",
    "hostUsers",
    "immutable",
    "tolerationSeconds",
    "expirationSeconds",
    "defaultMode",
    "mode",
    "priority",
    "minReplicas",
    "partition",
    "allocateLoadBalancerNodePorts",
    "storageClassName",
    "ready",
    "serving",
    "terminating",
    "served",
    "storage",
    "value",
    "controller",
    "blockOwnerDeletion",
    "orphanDependents",
];

/// Int-or-string fields held by value in Go: their zero (`0`) is the
/// "unset" the server defaults (a Service's targetPort becomes its port).
pub(super) const ZERO_INT_OR_STRING_IS_UNSET: &[&str] = &["targetPort"];

/// String fields where "" is a deliberate choice (a claim that asks for no
/// storage class, not the default one).
pub(super) const EMPTY_IS_A_VALUE: &[&str] = &["storageClassName"];

/// Which zero values of a field are kept rather than read as "unset".
#[derive(Debug, Clone, Copy)]
struct Keep {
    /// `0` and `false`.
    zero: bool,
    /// `""`.
    empty: bool,
}

/// Go's zero `time.Time` (0001-01-01T00:00:00Z) in Unix seconds.
const GO_ZERO_TIME: i64 = -62_135_596_800;

/// Why a decoded message has no JSON form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// A number JSON cannot hold (NaN, infinity) or that did not parse.
    #[error("field {field:?}: number {text:?} has no JSON form")]
    Number { field: String, text: String },
    /// A time outside the representable range.
    #[error("field {field:?}: time {seconds}s is out of range")]
    Time { field: String, seconds: i64 },
    /// Embedded raw data (RawExtension, JSON, FieldsV1) that is not JSON.
    #[error("field {field:?}: embedded object is not JSON: {reason}")]
    Embedded { field: String, reason: String },
    /// The dump did not have the structure prost produces.
    #[error("field {field:?}: unexpected value {found}")]
    Unexpected { field: String, found: String },
}

/// Decodes embedded bytes that carry their own `k8s\0` envelope.
pub(super) type NestedDecoder<'a> = &'a dyn Fn(&[u8]) -> Result<Value, String>;

/// Walks a message tree into JSON.
pub(super) struct Converter<'a> {
    schemas: &'a Schemas,
    nested: NestedDecoder<'a>,
}

impl<'a> Converter<'a> {
    /// A converter naming fields from `schemas`; `nested` decodes protobuf
    /// objects embedded in raw extensions.
    pub(super) fn new(schemas: &'a Schemas, nested: NestedDecoder<'a>) -> Self {
        Converter { schemas, nested }
    }

    /// Converts the top-level message of type `root` into a JSON object.
    pub(super) fn object(
        &self,
        node: &Node,
        root: usize,
    ) -> Result<Map<String, Value>, ConvertError> {
        match self.message(node, Some(root), "")? {
            Some(Value::Object(map)) => Ok(map),
            Some(other) => Err(unexpected("", &format!("{other}"))),
            None => Ok(Map::new()),
        }
    }

    /// A message's JSON, or `None` for a message that means "unset" (a zero time).
    fn message(
        &self,
        node: &Node,
        ty: Option<usize>,
        path: &str,
    ) -> Result<Option<Value>, ConvertError> {
        let Node::Message { name, fields } = node else {
            return Err(unexpected(path, &format!("{node:?}")));
        };
        if let Some(special) = self.special(name, fields, path)? {
            return Ok(special);
        }
        let ty = ty.or_else(|| self.schemas.by_name(name));
        let mut out = Map::new();
        self.fields_into(fields, ty, path, &mut out)?;
        Ok(Some(Value::Object(out)))
    }

    fn fields_into(
        &self,
        fields: &[(String, Node)],
        ty: Option<usize>,
        path: &str,
        out: &mut Map<String, Value>,
    ) -> Result<(), ConvertError> {
        for (rust_name, value) in fields {
            let schema = ty.and_then(|t| self.schemas.types[t].field(rust_name));
            if schema.is_none()
                && let Some(embedded) = self.embedded_fields(value, ty)
            {
                self.fields_into(embedded, ty, path, out)?;
                continue;
            }
            let json_name =
                schema.map_or_else(|| lower_camel(rust_name), |f| f.json_name.to_string());
            let child_path = format!("{path}.{json_name}");
            let keep = Keep {
                // Status counters are plain Go ints: their zeros mean "unset".
                zero: ZERO_IS_A_VALUE.contains(&json_name.as_str())
                    && !child_path.starts_with(".status."),
                empty: EMPTY_IS_A_VALUE.contains(&json_name.as_str()),
            };
            let shape = schema.map(|f| &f.shape);
            let value = self.field(value, shape, keep, &child_path)?;
            let unset = value.as_ref().is_some_and(|v| v.as_i64() == Some(0))
                && ZERO_INT_OR_STRING_IS_UNSET.contains(&json_name.as_str());
            if let Some(v) = value.filter(|_| !unset) {
                out.insert(json_name, v);
            }
        }
        Ok(())
    }

    /// The fields of an embedded Go struct: a message-valued field the JSON
    /// type lacks, whose own fields the JSON type has.
    fn embedded_fields<'n>(
        &self,
        value: &'n Node,
        ty: Option<usize>,
    ) -> Option<&'n [(String, Node)]> {
        let ty = &self.schemas.types[ty?];
        let Node::Some(inner) = value else {
            return None;
        };
        let Node::Message { fields, .. } = inner.as_ref() else {
            return None;
        };
        fields
            .iter()
            .any(|(name, _)| ty.field(name).is_some())
            .then_some(fields.as_slice())
    }

    /// One field's value; `None` leaves the field out.
    fn field(
        &self,
        node: &Node,
        shape: Option<&Shape>,
        keep: Keep,
        path: &str,
    ) -> Result<Option<Value>, ConvertError> {
        match node {
            Node::None => Ok(None),
            Node::Some(inner) => match inner.as_ref() {
                // Only `bytes` prints as a list inside an option.
                Node::List(bytes) => bytes_to_base64(bytes, path).map(Some),
                Node::Message { .. } => self.message(inner, struct_of(shape), path),
                scalar => {
                    let value = scalar_to_json(scalar, path)?;
                    let kept = match &value {
                        Value::String(s) => keep.empty || !s.is_empty(),
                        Value::Bool(b) => keep.zero || *b,
                        Value::Number(n) => keep.zero || n.as_f64() != Some(0.0),
                        _ => true,
                    };
                    Ok(kept.then_some(value))
                }
            },
            Node::List(items) if items.is_empty() => Ok(None),
            Node::List(items) => {
                let inner = element_shape(shape);
                let values = items
                    .iter()
                    .map(|item| self.element(item, inner, path))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Some(Value::Array(values)))
            }
            Node::Map(entries) if entries.is_empty() => Ok(None),
            Node::Map(entries) => {
                let inner = element_shape(shape);
                let mut out = Map::new();
                for (key, value) in entries {
                    let key = match key {
                        Node::Str(s) => s.clone(),
                        other => return Err(unexpected(path, &format!("map key {other:?}"))),
                    };
                    let value = self.element(value, inner, &format!("{path}[{key}]"))?;
                    out.insert(key, value);
                }
                Ok(Some(Value::Object(out)))
            }
            // Fields are always options, lists or maps in proto2; be lenient.
            scalar => scalar_to_json(scalar, path).map(Some),
        }
    }

    /// A list item or map value: kept even when zero (`apiGroups: [""]`).
    fn element(
        &self,
        node: &Node,
        shape: Option<&Shape>,
        path: &str,
    ) -> Result<Value, ConvertError> {
        match node {
            // Repeated or map `bytes` values print as lists of numbers.
            Node::List(bytes) => bytes_to_base64(bytes, path),
            Node::Message { .. } => Ok(self
                .message(node, struct_of(shape), path)?
                .unwrap_or(Value::Null)),
            Node::Some(inner) => self.element(inner, shape, path),
            Node::None => Ok(Value::Null),
            Node::Map(_) => Err(unexpected(path, "a map inside a list")),
            scalar => scalar_to_json(scalar, path),
        }
    }

    /// The message types whose JSON is not an object of their fields.
    fn special(
        &self,
        name: &str,
        fields: &[(String, Node)],
        path: &str,
    ) -> Result<Option<Option<Value>>, ConvertError> {
        let get = |field: &str| {
            fields
                .iter()
                .find(|(n, _)| n == field)
                .map(|(_, v)| v)
                .and_then(|v| match v {
                    Node::Some(inner) => Some(inner.as_ref()),
                    Node::None => None,
                    other => Some(other),
                })
        };
        let int = |field: &str| -> Result<Option<i64>, ConvertError> {
            match get(field) {
                Some(Node::Number(text)) => {
                    text.parse::<i64>()
                        .map(Some)
                        .map_err(|_| ConvertError::Number {
                            field: path.to_string(),
                            text: text.clone(),
                        })
                }
                Some(other) => Err(unexpected(path, &format!("{other:?}"))),
                None => Ok(None),
            }
        };
        let value = match name {
            "Quantity" | "QuantityValue" => match get("string") {
                Some(Node::Str(s)) => Some(Value::String(s.clone())),
                _ => None,
            },
            "IntOrString" => {
                if int("type")? == Some(1) {
                    match get("str_val") {
                        Some(Node::Str(s)) => Some(Value::String(s.clone())),
                        _ => Some(Value::String(String::new())),
                    }
                } else {
                    Some(Value::from(int("int_val")?.unwrap_or(0)))
                }
            }
            "Time" => match int("seconds")? {
                None | Some(GO_ZERO_TIME) => None,
                Some(seconds) => Some(Value::String(format_time(seconds, None, path)?)),
            },
            "MicroTime" => match int("seconds")? {
                None | Some(GO_ZERO_TIME) => None,
                Some(seconds) => {
                    let nanos = int("nanos")?.unwrap_or(0);
                    Some(Value::String(format_time(seconds, Some(nanos), path)?))
                }
            },
            "Duration" => int("duration")?.map(|ns| Value::String(go_duration(ns))),
            "RawExtension" | "Json" | "JSON" | "FieldsV1" => match get("raw") {
                Some(Node::List(bytes)) if !bytes.is_empty() => {
                    Some(self.embedded(&bytes_of(bytes, path)?, path)?)
                }
                _ => None,
            },
            "JsonSchemaPropsOrArray" | "JSONSchemaPropsOrArray" => match get("schema") {
                Some(schema) => self.message(schema, None, path)?,
                None => Some(self.list_of(get("j_son_schemas"), path)?),
            },
            "JsonSchemaPropsOrBool" | "JSONSchemaPropsOrBool" => match get("schema") {
                Some(schema) => self.message(schema, None, path)?,
                None => Some(Value::Bool(matches!(get("allows"), Some(Node::Bool(true))))),
            },
            "JsonSchemaPropsOrStringArray" | "JSONSchemaPropsOrStringArray" => {
                match get("schema") {
                    Some(schema) => self.message(schema, None, path)?,
                    None => Some(self.list_of(get("property"), path)?),
                }
            }
            // Named string lists (user extra info, verbs) are plain arrays in JSON.
            "ExtraValue" | "Verbs" => Some(self.list_of(get("items"), path)?),
            _ => return Ok(None),
        };
        Ok(Some(value))
    }

    fn list_of(&self, node: Option<&Node>, path: &str) -> Result<Value, ConvertError> {
        match node {
            Some(Node::List(items)) => Ok(Value::Array(
                items
                    .iter()
                    .map(|item| self.element(item, None, path))
                    .collect::<Result<_, _>>()?,
            )),
            None => Ok(Value::Array(Vec::new())),
            Some(other) => Err(unexpected(path, &format!("{other:?}"))),
        }
    }

    /// Embedded raw bytes: JSON, or a protobuf object with its own envelope.
    fn embedded(&self, bytes: &[u8], path: &str) -> Result<Value, ConvertError> {
        let error = |reason: String| ConvertError::Embedded {
            field: path.to_string(),
            reason,
        };
        if bytes.starts_with(super::envelope::MAGIC) {
            return (self.nested)(bytes).map_err(error);
        }
        serde_json::from_slice(bytes).map_err(|e| error(e.to_string()))
    }
}

/// The struct a field (or its list items / map values) holds.
fn struct_of(shape: Option<&Shape>) -> Option<usize> {
    match shape? {
        Shape::Struct(id) => Some(*id),
        _ => None,
    }
}

/// The shape of a list's items or a map's values.
fn element_shape(shape: Option<&Shape>) -> Option<&Shape> {
    match shape? {
        Shape::List(inner) | Shape::Map(inner) => Some(inner),
        other => Some(other),
    }
}

fn unexpected(path: &str, found: &str) -> ConvertError {
    ConvertError::Unexpected {
        field: path.to_string(),
        found: found.chars().take(80).collect(),
    }
}

fn scalar_to_json(node: &Node, path: &str) -> Result<Value, ConvertError> {
    match node {
        Node::Str(s) => Ok(Value::String(s.clone())),
        Node::Bool(b) => Ok(Value::Bool(*b)),
        Node::Number(text) => number(text).ok_or_else(|| ConvertError::Number {
            field: path.to_string(),
            text: text.clone(),
        }),
        other => Err(unexpected(path, &format!("{other:?}"))),
    }
}

fn number(text: &str) -> Option<Value> {
    if let Ok(i) = text.parse::<i64>() {
        return Some(Value::from(i));
    }
    if let Ok(u) = text.parse::<u64>() {
        return Some(Value::from(u));
    }
    let f = text.parse::<f64>().ok()?;
    // A float with an integral value prints like Go's JSON does (`5`, not `5.0`).
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        return Some(Value::from(f as i64));
    }
    Number::from_f64(f).map(Value::Number)
}

fn bytes_of(items: &[Node], path: &str) -> Result<Vec<u8>, ConvertError> {
    items
        .iter()
        .map(|item| match item {
            Node::Number(text) => text.parse::<u8>().ok(),
            _ => None,
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(|| unexpected(path, "a bytes value that is not a list of bytes"))
}

fn bytes_to_base64(items: &[Node], path: &str) -> Result<Value, ConvertError> {
    Ok(Value::String(STANDARD.encode(bytes_of(items, path)?)))
}

/// RFC 3339 in UTC: whole seconds for `Time`, microseconds for `MicroTime`.
fn format_time(seconds: i64, nanos: Option<i64>, path: &str) -> Result<String, ConvertError> {
    let out_of_range = || ConvertError::Time {
        field: path.to_string(),
        seconds,
    };
    let ts = jiff::Timestamp::from_second(seconds).map_err(|_| out_of_range())?;
    let base = ts.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    Ok(match nanos {
        None => format!("{base}Z"),
        Some(n) => format!("{base}.{:06}Z", n.clamp(0, 999_999_999) / 1000),
    })
}

/// The JSON name for a field the traced shapes do not know (a field newer
/// than k8s-openapi's API version): snake case back to lower camel case.
fn lower_camel(rust_name: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in rust_name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_like_go() {
        for (nanos, printed) in [
            (0, "0s"),
            (999, "999ns"),
            (1_500, "1.5µs"),
            (150_000_000, "150ms"),
            (1_500_000_000, "1.5s"),
            (90_000_000_000, "1m30s"),
            (3_600_000_000_000, "1h0m0s"),
            (-3_723_000_000_000, "-1h2m3s"),
        ] {
            assert_eq!(go_duration(nanos), printed, "{nanos} ns");
        }
    }

    #[test]
    fn times_print_to_the_second_or_microsecond() {
        assert_eq!(
            format_time(1_767_323_045, None, "t").unwrap(),
            "2026-01-02T03:04:05Z"
        );
        assert_eq!(
            format_time(1_767_323_045, Some(123_456_789), "t").unwrap(),
            "2026-01-02T03:04:05.123456Z"
        );
        assert!(format_time(i64::MAX, None, "t").is_err());
    }

    #[test]
    fn unknown_fields_fall_back_to_camel_case() {
        assert_eq!(lower_camel("new_shiny_field"), "newShinyField");
        assert_eq!(lower_camel("name"), "name");
    }

    #[test]
    fn numbers_keep_their_kind() {
        assert_eq!(number("-7"), Some(Value::from(-7)));
        assert_eq!(number("18446744073709551615"), Some(Value::from(u64::MAX)));
        assert_eq!(number("2.5"), Some(Value::from(2.5)));
        assert_eq!(number("3.0"), Some(Value::from(3)));
        assert_eq!(number("NaN"), None);
        assert_eq!(number("inf"), None);
    }
}
