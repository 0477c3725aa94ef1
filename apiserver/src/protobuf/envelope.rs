//! The outer layer of a Kubernetes protobuf body: the `k8s\0` magic and a
//! `runtime.Unknown` message carrying the type meta and the object's bytes.

use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;

use super::ProtobufError;

/// The four bytes every Kubernetes protobuf body starts with.
pub const MAGIC: &[u8] = b"k8s\0";

/// The unwrapped envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// `apiVersion` of the object (`apps/v1`).
    pub api_version: String,
    /// `kind` of the object (`Deployment`).
    pub kind: String,
    /// The object's own protobuf message.
    pub raw: Vec<u8>,
}

impl Envelope {
    /// Checks the magic and decodes the `runtime.Unknown` that follows it.
    pub fn parse(body: &[u8]) -> Result<Envelope, ProtobufError> {
        let rest = body.strip_prefix(MAGIC).ok_or(ProtobufError::NoMagic)?;
        let unknown = Unknown::decode(rest).map_err(ProtobufError::Envelope)?;
        if let Some(encoding) = unknown.content_encoding.filter(|e| !e.is_empty()) {
            return Err(ProtobufError::ContentEncoding(encoding));
        }
        let type_meta = unknown.type_meta.unwrap_or_default();
        let api_version = type_meta.api_version.unwrap_or_default();
        let kind = type_meta.kind.unwrap_or_default();
        if api_version.is_empty() || kind.is_empty() {
            return Err(ProtobufError::MissingTypeMeta);
        }
        Ok(Envelope {
            api_version,
            kind,
            raw: unknown.raw.unwrap_or_default(),
        })
    }

    /// Encodes an envelope (the inverse of [`Envelope::parse`]); used by tests
    /// and by anything that needs to hand a protobuf object on.
    pub fn encode(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        use k8s_pb::apimachinery::pkg::runtime::TypeMeta;
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(api_version.to_string()),
                kind: Some(kind.to_string()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut out = MAGIC.to_vec();
        out.extend(unknown.encode_to_vec());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_bad_envelopes() {
        let body = Envelope::encode("apps/v1", "Deployment", vec![1, 2, 3]);
        let envelope = Envelope::parse(&body).unwrap();
        assert_eq!(envelope.api_version, "apps/v1");
        assert_eq!(envelope.kind, "Deployment");
        assert_eq!(envelope.raw, vec![1, 2, 3]);

        assert!(matches!(
            Envelope::parse(b"{\"a\":1}"),
            Err(ProtobufError::NoMagic)
        ));
        assert!(matches!(
            Envelope::parse(b"k8s\0\x0a\xff"),
            Err(ProtobufError::Envelope(_))
        ));
        let untyped = [MAGIC, &[0x12, 0x00][..]].concat();
        assert!(matches!(
            Envelope::parse(&untyped),
            Err(ProtobufError::MissingTypeMeta)
        ));
    }

    #[test]
    fn reads_the_bytes_kubectl_sends() {
        // `kubectl create configmap c --from-literal=a=b` (kubectl 1.33, -v=9).
        let body = b"k8s\0\x0a\x0f\x0a\x02v1\x12\x09ConfigMap\x12\x1b\x0a\x11\x0a\x01c\x12\x00\x1a\x00\x22\x00\x2a\x00\x32\x00\x38\x00\x42\x00\x12\x06\x0a\x01a\x12\x01b\x1a\x00\x22\x00";
        let envelope = Envelope::parse(body).unwrap();
        assert_eq!(
            (envelope.api_version.as_str(), envelope.kind.as_str()),
            ("v1", "ConfigMap")
        );
        assert_eq!(envelope.raw.len(), 0x1b);
    }
}
