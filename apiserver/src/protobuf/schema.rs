//! The JSON shape of the built-in types, read from k8s-openapi's own
//! `Deserialize` impls.
//!
//! k8s-pb names fields in snake case (`clusterIPs` becomes `cluster_i_ps`), so
//! the real JSON names must come from somewhere else. k8s-openapi's generated
//! deserializers announce every struct's JSON field names to the deserializer
//! (`deserialize_struct(name, FIELDS, ..)`) and then ask for each field's value
//! by type. A tracing deserializer that answers with placeholder values learns
//! each type's field names and which struct, list or map each field holds —
//! without a schema file or an extra dependency. (Whether a field is required
//! cannot be seen this way: the generated code reads every field as an
//! `Option` and checks for missing ones afterwards.)

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

use serde::de::value::StrDeserializer;
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor,
};

/// What a field holds, as far as naming and zero values care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Shape {
    /// A string, number, bool, or something without named fields.
    Leaf,
    /// A resource quantity (`250m`, `1Gi`): a string or number whose text
    /// upstream's decoder parses.
    Quantity,
    /// A struct with named fields: an index into [`Schemas::types`].
    Struct(usize),
    /// A list of the inner shape.
    List(Box<Shape>),
    /// A string-keyed map of the inner shape.
    Map(Box<Shape>),
}

/// One field of a struct as JSON sees it.
#[derive(Debug, Clone)]
pub(super) struct FieldSchema {
    /// The property name in JSON (`clusterIPs`).
    pub json_name: &'static str,
    /// What the field holds.
    pub shape: Shape,
}

/// The fields of one struct type.
#[derive(Debug, Clone)]
pub(super) struct TypeSchema {
    /// The Go type name (`ServiceSpec`).
    pub name: &'static str,
    /// Fields in declaration order.
    pub fields: Vec<FieldSchema>,
    /// Index into `fields` by [`normalize`]d name.
    by_normalized: HashMap<String, usize>,
}

impl TypeSchema {
    /// The field whose JSON name normalizes like `name` (see [`normalize`]).
    pub(super) fn field(&self, name: &str) -> Option<&FieldSchema> {
        self.by_normalized
            .get(&normalize(name))
            .map(|&i| &self.fields[i])
    }

    fn push(&mut self, field: FieldSchema) {
        self.by_normalized
            .insert(normalize(field.json_name), self.fields.len());
        self.fields.push(field);
    }
}

/// Every struct type reached from the traced roots.
#[derive(Debug, Default)]
pub(super) struct Schemas {
    /// The types, indexed by [`Shape::Struct`].
    pub types: Vec<TypeSchema>,
    index: HashMap<(&'static str, &'static [&'static str]), usize>,
}

impl Schemas {
    /// Traces `T` (and everything it contains) and returns its type index.
    pub(super) fn trace<T: DeserializeOwned>(&mut self) -> Result<usize, TraceError> {
        let registry = Rc::new(RefCell::new(std::mem::take(self)));
        let slot = Rc::new(RefCell::new(Slot::default()));
        let result = T::deserialize(Tracer {
            registry: registry.clone(),
            slot: slot.clone(),
            mute: false,
            timestamp: false,
        });
        *self = registry.take();
        result.map_err(|e| TraceError(format!("{} ({e})", std::any::type_name::<T>())))?;
        match slot.take().shape {
            Shape::Struct(id) => Ok(id),
            other => Err(TraceError(format!(
                "{} is not a struct but {other:?}",
                std::any::type_name::<T>()
            ))),
        }
    }

    /// The first traced type whose Go name normalizes like `name`; used where
    /// the parent gives no hint (the contents of special wrappers).
    pub(super) fn by_name(&self, name: &str) -> Option<usize> {
        let wanted = normalize(name);
        self.types.iter().position(|t| normalize(t.name) == wanted)
    }
}

/// Folds a name for matching across naming conventions: k8s-pb's snake case
/// (`cluster_i_ps`, `x_kubernetes_list_type`, `r#ref`) and the JSON names
/// (`clusterIPs`, `x-kubernetes-list-type`, `$ref`) become the same string.
pub(super) fn normalize(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// A type could not be traced (a k8s-openapi deserializer refused the
/// placeholder values).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot trace the JSON shape of {0}")]
pub struct TraceError(String);

#[derive(Debug)]
struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

/// What one deserialize call learned about the value it was asked for.
#[derive(Debug)]
struct Slot {
    shape: Shape,
}

impl Default for Slot {
    fn default() -> Self {
        Slot { shape: Shape::Leaf }
    }
}

/// Answers a k8s-openapi deserializer with placeholder values and records
/// what it was asked for in `slot`.
struct Tracer {
    registry: Rc<RefCell<Schemas>>,
    slot: Rc<RefCell<Slot>>,
    /// Inside a type already traced: produce the smallest valid value
    /// (no options, empty lists) so recursive types terminate.
    mute: bool,
    /// The string asked for is a timestamp (inside `Time`/`MicroTime`).
    timestamp: bool,
}

impl Tracer {
    fn child(&self, slot: Rc<RefCell<Slot>>) -> Tracer {
        Tracer {
            registry: self.registry.clone(),
            slot,
            mute: self.mute,
            timestamp: false,
        }
    }

    /// Traces a list or map: `visit` runs with the tracer of its one element
    /// (none when muted), and the slot records `shape` of what it found.
    fn container<T>(
        self,
        shape: fn(Box<Shape>) -> Shape,
        visit: impl FnOnce(Option<Tracer>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let element = Rc::new(RefCell::new(Slot::default()));
        let next = (!self.mute).then(|| self.child(element.clone()));
        let value = visit(next)?;
        let inner = element.take().shape;
        self.slot.borrow_mut().shape = shape(Box::new(inner));
        Ok(value)
    }

    fn placeholder_str(&self) -> &'static str {
        if self.timestamp {
            "1970-01-01T00:00:00Z"
        } else {
            ""
        }
    }
}

const TIMESTAMP_TYPES: &[&str] = &["Time", "MicroTime"];

/// The newtype k8s-openapi deserializes quantities through.
const QUANTITY_TYPE: &str = "Quantity";

/// Deserializer methods that answer with a fixed placeholder value.
macro_rules! placeholders {
    ($($method:ident => $visit:ident($($value:expr)?),)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
                visitor.$visit($($value)?)
            }
        )*
    };
}

impl<'de> Deserializer<'de> for Tracer {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        // The few untyped values are told apart by what their visitor expects.
        let expecting = format!("{}", &visitor as &dyn de::Expected);
        if expecting.contains("JSONSchemaPropsOrBool") {
            visitor.visit_bool(false)
        } else if expecting.contains("JSONSchemaProps") {
            visitor.visit_seq(Items { next: None })
        } else {
            visitor.visit_str(self.placeholder_str())
        }
    }

    placeholders! {
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_i64(0),
        deserialize_i16 => visit_i64(0),
        deserialize_i32 => visit_i64(0),
        deserialize_i64 => visit_i64(0),
        deserialize_u8 => visit_u64(0),
        deserialize_u16 => visit_u64(0),
        deserialize_u32 => visit_u64(0),
        deserialize_u64 => visit_u64(0),
        deserialize_f32 => visit_f64(0.0),
        deserialize_f64 => visit_f64(0.0),
        deserialize_char => visit_char(' '),
        deserialize_bytes => visit_bytes(&[]),
        deserialize_byte_buf => visit_bytes(&[]),
        deserialize_unit => visit_unit(),
        deserialize_identifier => visit_str(""),
        deserialize_ignored_any => visit_unit(),
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_str(self.placeholder_str())
    }
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_str(self.placeholder_str())
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.mute {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        if name == QUANTITY_TYPE {
            self.slot.borrow_mut().shape = Shape::Quantity;
        }
        let mut inner = self.child(Rc::new(RefCell::new(Slot::default())));
        inner.timestamp = TIMESTAMP_TYPES.contains(&name);
        visitor.visit_newtype_struct(inner)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.container(Shape::List, |next| visitor.visit_seq(Items { next }))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.container(Shape::Map, |next| visitor.visit_map(Entry { next }))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let known = self.registry.borrow().index.get(&(name, fields)).copied();
        let (id, mute) = match known {
            // Seen before (or being traced further up): fill it minimally.
            Some(id) => (id, true),
            None => {
                let mut registry = self.registry.borrow_mut();
                let id = registry.types.len();
                registry.types.push(TypeSchema {
                    name,
                    fields: Vec::new(),
                    by_normalized: HashMap::new(),
                });
                registry.index.insert((name, fields), id);
                (id, self.mute)
            }
        };
        self.slot.borrow_mut().shape = Shape::Struct(id);
        let record = known.is_none().then_some(id);
        visitor.visit_map(Fields {
            registry: self.registry.clone(),
            record,
            fields,
            next: 0,
            mute,
            // A resource (nested ones too, like a StatefulSet's claim
            // templates) checks its own apiVersion/kind: leave them out.
            skip_type_meta: ["apiVersion", "kind", "metadata"]
                .iter()
                .all(|f| fields.contains(f)),
            pending: None,
        })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        _variants: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Error> {
        Err(Error(format!("enum {name} cannot be traced")))
    }
}

/// A list of at most one traced element.
struct Items {
    next: Option<Tracer>,
}

impl<'de> SeqAccess<'de> for Items {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        match self.next.take() {
            Some(tracer) => seed.deserialize(tracer).map(Some),
            None => Ok(None),
        }
    }
}

/// A map of at most one entry with an empty key and a traced value.
struct Entry {
    next: Option<Tracer>,
}

impl<'de> MapAccess<'de> for Entry {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        if self.next.is_none() {
            return Ok(None);
        }
        seed.deserialize(StrDeserializer::<Error>::new(""))
            .map(Some)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, Error> {
        match self.next.take() {
            Some(tracer) => seed.deserialize(tracer),
            None => Err(Error("map value asked twice".into())),
        }
    }
}

/// Feeds a struct every one of its fields and records what each holds.
struct Fields {
    registry: Rc<RefCell<Schemas>>,
    /// The type to record fields into; `None` when it was traced already.
    record: Option<usize>,
    fields: &'static [&'static str],
    next: usize,
    mute: bool,
    /// A resource checks its own apiVersion/kind: leave them out.
    skip_type_meta: bool,
    pending: Option<&'static str>,
}

impl<'de> MapAccess<'de> for Fields {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        while let Some(&name) = self.fields.get(self.next) {
            self.next += 1;
            if self.skip_type_meta && matches!(name, "apiVersion" | "kind") {
                continue;
            }
            self.pending = Some(name);
            return seed
                .deserialize(StrDeserializer::<Error>::new(name))
                .map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, Error> {
        let name = self
            .pending
            .take()
            .ok_or_else(|| Error("value asked before its key".into()))?;
        let slot = Rc::new(RefCell::new(Slot::default()));
        let value = seed.deserialize(Tracer {
            registry: self.registry.clone(),
            slot: slot.clone(),
            mute: self.mute,
            timestamp: false,
        })?;
        if let Some(id) = self.record {
            let Slot { shape } = slot.take();
            self.registry.borrow_mut().types[id].push(FieldSchema {
                json_name: name,
                shape,
            });
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

    fn field<'a>(schemas: &'a Schemas, ty: usize, json: &str) -> &'a FieldSchema {
        schemas.types[ty]
            .fields
            .iter()
            .find(|f| f.json_name == json)
            .unwrap_or_else(|| panic!("{json} not in {:?}", schemas.types[ty]))
    }

    fn struct_of(shape: &Shape) -> usize {
        match shape {
            Shape::Struct(id) => *id,
            Shape::List(inner) | Shape::Map(inner) => struct_of(inner),
            Shape::Leaf | Shape::Quantity => panic!("not a struct"),
        }
    }

    #[test]
    fn learns_names_and_nesting() {
        let mut schemas = Schemas::default();
        let svc = schemas.trace::<Service>().unwrap();
        assert_eq!(schemas.types[svc].name, "Service");
        assert!(schemas.types[svc].field("apiVersion").is_none());
        let spec = struct_of(&field(&schemas, svc, "spec").shape);
        let ips = field(&schemas, spec, "clusterIPs");
        assert_eq!(ips.shape, Shape::List(Box::new(Shape::Leaf)));
        assert_eq!(
            schemas.types[spec].field("cluster_i_ps").unwrap().json_name,
            "clusterIPs"
        );
        let port = struct_of(&field(&schemas, spec, "ports").shape);
        assert_eq!(
            schemas.types[port].field("target_port").unwrap().json_name,
            "targetPort"
        );
        assert_eq!(
            field(&schemas, spec, "selector").shape,
            Shape::Map(Box::new(Shape::Leaf))
        );
    }

    #[test]
    fn traces_shared_and_recursive_types_once() {
        let mut schemas = Schemas::default();
        let deploy = schemas.trace::<Deployment>().unwrap();
        let before = schemas.types.len();
        let meta = struct_of(&field(&schemas, deploy, "metadata").shape);
        // Tracing a second root reuses ObjectMeta instead of adding a copy.
        let svc = schemas.trace::<Service>().unwrap();
        assert_eq!(struct_of(&field(&schemas, svc, "metadata").shape), meta);
        assert!(schemas.types.len() > before);

        let crd = schemas.trace::<CustomResourceDefinition>().unwrap();
        let props = schemas.by_name("JSONSchemaProps").unwrap();
        let props_field = field(&schemas, props, "properties");
        assert_eq!(
            props_field.shape,
            Shape::Map(Box::new(Shape::Struct(props)))
        );
        assert_eq!(
            schemas.types[props]
                .field("x_kubernetes_preserve_unknown_fields")
                .unwrap()
                .json_name,
            "x-kubernetes-preserve-unknown-fields"
        );
        assert_eq!(schemas.types[props].field("ref").unwrap().json_name, "$ref");
        assert!(crd < schemas.types.len());
    }
}
