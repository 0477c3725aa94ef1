//! Protobuf message bytes to JSON, driven by the schema table, with the
//! Kubernetes types whose JSON form is not their message shape (times,
//! quantities, int-or-string, raw JSON, durations, schema unions).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use super::ProtobufError;
use super::schema::{FieldSpec, Kind, Schema};
use super::wire::{Field, Reader, malformed};

const META: &str = "apimachinery.pkg.apis.meta.v1";
const APIEXT: &str = "apiextensions_apiserver.pkg.apis.apiextensions.v1";

/// Decodes one message; `None` when it encodes "unset" (an empty time).
pub fn message(schema: &Schema, name: &str, bytes: &[u8]) -> Result<Option<Value>, ProtobufError> {
    if let Some(special) = special(schema, name, bytes)? {
        return Ok(special);
    }
    let fields = schema
        .message(name)
        .ok_or_else(|| malformed(&format!("no schema for message {name}")))?;
    let mut out = Map::new();
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.next_field()? {
        let Some(spec) = fields.get(&number) else {
            continue;
        };
        apply(schema, spec, value, &mut out)?;
    }
    Ok(Some(Value::Object(out)))
}

fn apply(
    schema: &Schema,
    spec: &FieldSpec,
    value: Field<'_>,
    out: &mut Map<String, Value>,
) -> Result<(), ProtobufError> {
    let Some(json_name) = &spec.json else {
        // An embedded struct: merge its fields into this object.
        if let (Kind::Message(inner), Field::Bytes(bytes)) = (&spec.kind, value)
            && let Some(Value::Object(fields)) = message(schema, inner, bytes)?
        {
            out.extend(fields);
        }
        return Ok(());
    };
    if let Kind::Map(value_kind) = &spec.kind {
        let Field::Bytes(entry) = value else {
            return Err(malformed("map entry is not a message"));
        };
        let (key, val) = map_entry(schema, value_kind, entry)?;
        let map = out.entry(json_name.clone()).or_insert_with(|| json!({}));
        if let Some(m) = map.as_object_mut() {
            m.insert(key, val.unwrap_or(Value::Null));
        }
        return Ok(());
    }
    if spec.repeated {
        let items = out.entry(json_name.clone()).or_insert_with(|| json!([]));
        let Some(list) = items.as_array_mut() else {
            return Ok(());
        };
        match (&spec.kind, value) {
            // Packed numeric lists (not what Kubernetes sends, but valid protobuf).
            (Kind::Int32 | Kind::Int64, Field::Bytes(packed)) => {
                let mut reader = PackedVarints { data: packed };
                while let Some(v) = reader.next()? {
                    list.push(number(&spec.kind, v));
                }
            }
            (kind, value) => {
                if let Some(v) = scalar_or_message(schema, kind, value)? {
                    list.push(v);
                }
            }
        }
        return Ok(());
    }
    match scalar_or_message(schema, &spec.kind, value)? {
        // Go's zero strings are "unset" for the JSON the server works on.
        Some(Value::String(s)) if s.is_empty() && spec.kind == Kind::String => {}
        Some(v) => {
            out.insert(json_name.clone(), v);
        }
        None => {}
    }
    Ok(())
}

fn number(kind: &Kind, raw: u64) -> Value {
    match kind {
        Kind::Int32 => json!(raw as i64 as i32),
        _ => json!(raw as i64),
    }
}

fn scalar_or_message(
    schema: &Schema,
    kind: &Kind,
    value: Field<'_>,
) -> Result<Option<Value>, ProtobufError> {
    Ok(Some(match (kind, value) {
        (Kind::String, Field::Bytes(b)) => Value::String(
            String::from_utf8(b.to_vec()).map_err(|_| malformed("string is not UTF-8"))?,
        ),
        (Kind::Bytes, Field::Bytes(b)) => Value::String(STANDARD.encode(b)),
        (Kind::Bool, Field::Varint(v)) => Value::Bool(v != 0),
        (Kind::Int32 | Kind::Int64, Field::Varint(v)) => number(kind, v),
        (Kind::Double, Field::Fixed64(v)) => json!(f64::from_bits(v)),
        (Kind::Message(name), Field::Bytes(b)) => return message(schema, name, b),
        _ => return Err(malformed("field has an unexpected wire type")),
    }))
}

fn map_entry(
    schema: &Schema,
    value_kind: &Kind,
    entry: &[u8],
) -> Result<(String, Option<Value>), ProtobufError> {
    let mut key = String::new();
    let mut value = match value_kind {
        Kind::String | Kind::Bytes => Some(json!("")),
        _ => None,
    };
    let mut reader = Reader::new(entry);
    while let Some((number, field)) = reader.next_field()? {
        match (number, field) {
            (1, Field::Bytes(k)) => {
                key =
                    String::from_utf8(k.to_vec()).map_err(|_| malformed("map key is not UTF-8"))?
            }
            (2, field) => value = scalar_or_message(schema, value_kind, field)?,
            _ => {}
        }
    }
    Ok((key, value))
}

struct PackedVarints<'a> {
    data: &'a [u8],
}

impl PackedVarints<'_> {
    fn next(&mut self) -> Result<Option<u64>, ProtobufError> {
        if self.data.is_empty() {
            return Ok(None);
        }
        let mut value = 0u64;
        for (i, byte) in self.data.iter().enumerate().take(10) {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.data = &self.data[i + 1..];
                return Ok(Some(value));
            }
        }
        Err(malformed("truncated packed varint"))
    }
}

/// Field values of a small message as (number → field).
fn fields_of(bytes: &[u8]) -> Result<Vec<(u64, Field<'_>)>, ProtobufError> {
    let mut reader = Reader::new(bytes);
    let mut out = Vec::new();
    while let Some(f) = reader.next_field()? {
        out.push(f);
    }
    Ok(out)
}

fn varint_of(fields: &[(u64, Field<'_>)], number: u64) -> Option<u64> {
    fields.iter().find_map(|(n, f)| match f {
        Field::Varint(v) if *n == number => Some(*v),
        _ => None,
    })
}

fn bytes_of<'a>(fields: &[(u64, Field<'a>)], number: u64) -> Option<&'a [u8]> {
    fields.iter().find_map(|(n, f)| match f {
        Field::Bytes(b) if *n == number => Some(*b),
        _ => None,
    })
}

/// Types whose JSON is not an object of their fields. `Ok(None)`: not special.
#[allow(clippy::type_complexity)]
fn special(
    schema: &Schema,
    name: &str,
    bytes: &[u8],
) -> Result<Option<Option<Value>>, ProtobufError> {
    let Some((package, short)) = name.rsplit_once('.') else {
        return Ok(None);
    };
    let value = match (package, short) {
        (META, "Time" | "MicroTime") => {
            let f = fields_of(bytes)?;
            let seconds = varint_of(&f, 1).map(|v| v as i64);
            let nanos = varint_of(&f, 2).unwrap_or(0) as i64 as i32;
            match seconds {
                None if nanos == 0 => None,
                _ => {
                    let ts = jiff::Timestamp::new(seconds.unwrap_or(0), nanos)
                        .map_err(|e| malformed(&format!("time out of range: {e}")))?;
                    let format = if short == "Time" {
                        "%Y-%m-%dT%H:%M:%SZ"
                    } else {
                        "%Y-%m-%dT%H:%M:%S%.6fZ"
                    };
                    Some(json!(ts.strftime(format).to_string()))
                }
            }
        }
        (META, "Duration") => {
            let nanos = varint_of(&fields_of(bytes)?, 1).unwrap_or(0) as i64;
            Some(json!(go_duration(nanos)))
        }
        ("apimachinery.pkg.api.resource", "Quantity") => {
            let f = fields_of(bytes)?;
            Some(json!(String::from_utf8_lossy(
                bytes_of(&f, 1).unwrap_or_default()
            )))
        }
        ("apimachinery.pkg.util.intstr", "IntOrString") => {
            let f = fields_of(bytes)?;
            if varint_of(&f, 1).unwrap_or(0) == 1 {
                Some(json!(String::from_utf8_lossy(
                    bytes_of(&f, 3).unwrap_or_default()
                )))
            } else {
                Some(json!(varint_of(&f, 2).unwrap_or(0) as i64 as i32))
            }
        }
        ("apimachinery.pkg.runtime", "RawExtension") | (META, "FieldsV1") | (APIEXT, "JSON") => {
            let f = fields_of(bytes)?;
            let raw = bytes_of(&f, 1).unwrap_or_default();
            if raw.is_empty() {
                None
            } else {
                Some(
                    serde_json::from_slice(raw)
                        .map_err(|e| malformed(&format!("embedded JSON: {e}")))?,
                )
            }
        }
        (
            APIEXT,
            "JSONSchemaPropsOrArray" | "JSONSchemaPropsOrBool" | "JSONSchemaPropsOrStringArray",
        ) => {
            let props = format!("{APIEXT}.JSONSchemaProps");
            let f = fields_of(bytes)?;
            let schema_field = if short == "JSONSchemaPropsOrBool" {
                2
            } else {
                1
            };
            match bytes_of(&f, schema_field) {
                Some(b) => message(schema, &props, b)?,
                None => match short {
                    "JSONSchemaPropsOrBool" => Some(json!(varint_of(&f, 1).unwrap_or(0) != 0)),
                    "JSONSchemaPropsOrArray" => {
                        let mut items = Vec::new();
                        for (n, field) in &f {
                            if let (2, Field::Bytes(b)) = (n, field)
                                && let Some(v) = message(schema, &props, b)?
                            {
                                items.push(v);
                            }
                        }
                        Some(Value::Array(items))
                    }
                    _ => Some(Value::Array(
                        f.iter()
                            .filter_map(|(n, field)| match (n, field) {
                                (2, Field::Bytes(b)) => Some(json!(String::from_utf8_lossy(b))),
                                _ => None,
                            })
                            .collect(),
                    )),
                },
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(value))
}

/// Go's `time.Duration.String()` form, e.g. `1h2m3s`, `1.5s`, `0s`.
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let total = nanos.unsigned_abs();
    let (hours, rest) = (total / 3_600_000_000_000, total % 3_600_000_000_000);
    let (minutes, rest) = (rest / 60_000_000_000, rest % 60_000_000_000);
    let seconds = rest as f64 / 1e9;
    let mut out = String::from(sign);
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&format!("{seconds}s"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_like_go() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
        assert_eq!(go_duration(3_723_000_000_000), "1h2m3s");
        assert_eq!(go_duration(60_000_000_000), "1m0s");
    }
}
