//! Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`)
//! decoded into the JSON the handlers work on. kubectl's typed generators
//! (`create namespace|configmap|secret|deployment|service|job|cronjob|role|
//! ...`, `autoscale`) send protobuf, as do client-go's typed clients; the
//! server answers in JSON, which every client accepts.
//!
//! The bytes are decoded by prost into the k8s-pb message for the envelope's
//! apiVersion/kind; the message is walked through its derived `Debug` output
//! (k8s-pb has no serde or reflection) and named with the JSON field names
//! traced from k8s-openapi's deserializers. No schema is written by hand or
//! copied: both crates are ordinary dependencies.
//!
//! The traced shapes also say which fields are quantities
//! ([`settle_quantities`]): every write of a built-in kind has their text
//! checked as upstream's decoder checks it, and stored in upstream's
//! canonical form, whatever format the body came in.

mod debug_tree;
mod envelope;
mod kinds;
mod quantities;
mod schema;
mod to_json;

use serde_json::Value;

pub use envelope::{Envelope, MAGIC};
pub(crate) use quantities::settle as settle_quantities;

/// The media type of Kubernetes protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// A protobuf body that could not be turned into JSON.
#[derive(Debug, thiserror::Error)]
pub enum ProtobufError {
    /// The body does not start with `k8s\0`.
    #[error(
        "provided data does not appear to be a protobuf message, expected prefix {:?}",
        MAGIC
    )]
    NoMagic,
    /// The `runtime.Unknown` envelope is not valid protobuf.
    #[error("invalid protobuf envelope: {0}")]
    Envelope(prost::DecodeError),
    /// The envelope is compressed or otherwise encoded.
    #[error("unsupported protobuf content encoding {0:?}")]
    ContentEncoding(String),
    /// The envelope names no apiVersion or kind.
    #[error("protobuf envelope has no apiVersion or kind")]
    MissingTypeMeta,
    /// No decoder for this apiVersion/kind.
    #[error("no kind {kind:?} is registered for protobuf in version {api_version:?}")]
    UnknownKind {
        /// The envelope's apiVersion.
        api_version: String,
        /// The envelope's kind.
        kind: String,
    },
    /// The object's bytes are not a valid message of its kind.
    #[error("invalid protobuf {kind}: {source}")]
    Message {
        /// The object's kind.
        kind: String,
        /// The decoder's error.
        source: prost::DecodeError,
    },
    /// The kind's JSON shape could not be learned.
    #[error(transparent)]
    Schema(#[from] schema::TraceError),
    /// The decoded message could not be walked.
    #[error(transparent)]
    Dump(#[from] debug_tree::ParseError),
    /// Embedded objects nest deeper than [`MAX_NESTING`].
    #[error("embedded objects nested more than {MAX_NESTING} deep")]
    TooDeep,
    /// A decoded value has no JSON form.
    #[error("invalid protobuf {kind}: {source}")]
    Convert {
        /// The object's kind.
        kind: String,
        /// The conversion's error.
        source: to_json::ConvertError,
    },
}

/// Decodes a protobuf body into the object's JSON, with `apiVersion` and
/// `kind` taken from the envelope.
pub fn decode_object(body: &[u8]) -> Result<Value, ProtobufError> {
    decode_nested(body, 0)
}

/// How deep objects embedded in objects (`RawExtension` holding another
/// envelope) are decoded. Kubernetes nests one (a ControllerRevision's
/// data); every level holds its decoded form while the next is decoded, so
/// without a bound a 200 KB body of 4000 levels took gigabytes (found by the
/// `protobuf` fuzz target).
pub const MAX_NESTING: usize = 4;

fn decode_nested(body: &[u8], depth: usize) -> Result<Value, ProtobufError> {
    if depth > MAX_NESTING {
        return Err(ProtobufError::TooDeep);
    }
    let envelope = Envelope::parse(body)?;
    let kinds = kinds::Kinds::get();
    let entry = kinds
        .entry(&envelope.api_version, &envelope.kind)
        .ok_or_else(|| ProtobufError::UnknownKind {
            api_version: envelope.api_version.clone(),
            kind: envelope.kind.clone(),
        })?;
    let root = entry.root.clone()?;
    let dump = (entry.dump)(&envelope.raw).map_err(|source| ProtobufError::Message {
        kind: envelope.kind.clone(),
        source,
    })?;
    let tree = debug_tree::parse(&dump)?;
    let nested = |bytes: &[u8]| decode_nested(bytes, depth + 1).map_err(|e| e.to_string());
    let converter = to_json::Converter::new(&kinds.schemas, &nested);
    let fields = converter
        .object(&tree, root)
        .map_err(|source| ProtobufError::Convert {
            kind: envelope.kind.clone(),
            source,
        })?;
    let mut object = serde_json::Map::new();
    object.insert("apiVersion".into(), Value::String(envelope.api_version));
    object.insert("kind".into(), Value::String(envelope.kind));
    object.extend(fields);
    Ok(Value::Object(object))
}

#[cfg(test)]
mod tests;
