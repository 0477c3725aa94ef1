//! How a watch cache holds one object. Kinds the server itself reads on hot
//! paths (pods for the node authorizer, RBAC objects, webhooks, …) stay
//! decoded. Bulk data kinds (ConfigMaps, Secrets, Events) are held as the
//! JSON they are served as, decoded only when something asks for the value:
//! a decoded `serde_json::Value` costs about five times its JSON in B-tree
//! nodes, and a list or a watch without selectors only copies the bytes.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;
use skiff_store::Revision;

use crate::wire_order::Ordered;

/// The form a cache holds its objects in, chosen per kind by its strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum CacheForm {
    /// As a decoded value, shared with every reader.
    #[default]
    Decoded,
    /// As served JSON, decoded on demand.
    Encoded,
}

/// One cached object (cheap to clone: both forms are shared).
#[derive(Debug, Clone)]
pub(crate) enum Cached {
    Decoded(Arc<Value>),
    Encoded(EncodedObject),
}

/// An object's JSON in upstream's key order (`kind` and `apiVersion`
/// first), and where the rest begins so a typed list's item, which leaves
/// them out, is a copy of the tail.
#[derive(Debug, Clone)]
pub(crate) struct EncodedObject {
    json: Bytes,
    /// Offset of the first byte after `{"kind":…,"apiVersion":…,` (1 when
    /// the object has neither).
    rest: u32,
    /// Its `metadata.resourceVersion`, read without decoding the JSON.
    revision: Option<Revision>,
}

impl Cached {
    /// Holds `value` in `form`. An object whose encoding does not start
    /// with its type keys as expected stays decoded.
    pub(crate) fn hold(value: Value, form: CacheForm) -> Self {
        match form {
            CacheForm::Decoded => Cached::Decoded(Arc::new(value)),
            CacheForm::Encoded => match EncodedObject::encode(&value) {
                Some(encoded) => Cached::Encoded(encoded),
                None => Cached::Decoded(Arc::new(value)),
            },
        }
    }

    /// The object's value, decoded now when it is held encoded.
    pub(crate) fn value(&self) -> Arc<Value> {
        match self {
            Cached::Decoded(value) => value.clone(),
            Cached::Encoded(encoded) => Arc::new(encoded.decode()),
        }
    }

    /// What label selectors and name field selectors read: the object
    /// itself when it is held decoded; for an encoded one only its
    /// `metadata.name`, `.namespace` and `.labels`, decoded while the rest
    /// of the JSON is skipped over, not built.
    pub(crate) fn selection_view(&self) -> Arc<Value> {
        match self {
            Cached::Decoded(value) => value.clone(),
            Cached::Encoded(encoded) => Arc::new(encoded.decode_selection()),
        }
    }

    /// An owned copy of the object's value.
    pub(crate) fn to_value(&self) -> Value {
        match self {
            Cached::Decoded(value) => (**value).clone(),
            Cached::Encoded(encoded) => encoded.decode(),
        }
    }

    /// The object's `metadata.resourceVersion`.
    pub(crate) fn resource_version(&self) -> Option<Revision> {
        match self {
            Cached::Decoded(value) => crate::object::resource_version(value),
            Cached::Encoded(encoded) => encoded.revision,
        }
    }

    /// Appends the object as a list item: without `kind` and `apiVersion`
    /// unless `with_type`, as typed lists write their items.
    pub(crate) fn write_item(
        &self,
        out: &mut Vec<u8>,
        with_type: bool,
    ) -> Result<(), serde_json::Error> {
        match self {
            Cached::Decoded(value) => serde_json::to_writer(out, &Ordered::item(value, with_type)),
            Cached::Encoded(encoded) if with_type => {
                out.extend_from_slice(&encoded.json);
                Ok(())
            }
            Cached::Encoded(encoded) => {
                out.push(b'{');
                out.extend_from_slice(&encoded.json[encoded.rest as usize..]);
                Ok(())
            }
        }
    }

    /// The object as a whole JSON document, when it is held encoded.
    pub(crate) fn encoded_json(&self) -> Option<&Bytes> {
        match self {
            Cached::Decoded(_) => None,
            Cached::Encoded(encoded) => Some(&encoded.json),
        }
    }
}

impl From<Arc<Value>> for Cached {
    fn from(value: Arc<Value>) -> Self {
        Cached::Decoded(value)
    }
}

/// Equal when they hold the same object: shared copies compare by pointer,
/// so comparing two snapshots (as the quota tally does) costs little for
/// what did not change.
impl PartialEq for Cached {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Cached::Decoded(a), Cached::Decoded(b)) => Arc::ptr_eq(a, b) || a == b,
            (Cached::Encoded(a), Cached::Encoded(b)) => a.json == b.json,
            _ => *self.value() == *other.value(),
        }
    }
}

impl EncodedObject {
    fn encode(value: &Value) -> Option<Self> {
        let mut json = serde_json::to_vec(&Ordered::new(value)).ok()?;
        json.shrink_to_fit();
        let rest = type_keys_end(value, &json)?;
        Some(Self {
            revision: crate::object::resource_version(value),
            json: Bytes::from(json),
            rest: u32::try_from(rest).ok()?,
        })
    }

    fn decode_selection(&self) -> Value {
        match serde_json::from_slice::<SelectionView>(&self.json) {
            Ok(view) => serde_json::json!({ "metadata": view.metadata }),
            Err(_) => self.decode(),
        }
    }

    fn decode(&self) -> Value {
        // The bytes were encoded from a value here; should they not parse
        // back (nesting past serde_json's limit), readers see an empty
        // object rather than a panic, and the log says which.
        serde_json::from_slice(&self.json).unwrap_or_else(|e| {
            tracing::error!(error = %e, "a cached object did not decode");
            Value::Object(Default::default())
        })
    }
}

/// The part of an object selectors read (see [`Cached::selection_view`]);
/// serde skips every other field without building it.
#[derive(serde::Deserialize)]
struct SelectionView {
    #[serde(default)]
    metadata: SelectionMeta,
}

#[derive(serde::Deserialize, serde::Serialize, Default)]
struct SelectionMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    labels: Option<serde_json::Map<String, Value>>,
}

/// Where the bytes after the leading `kind` and `apiVersion` entries of
/// `json` begin (the ordered writer puts them first), or `None` when they
/// are not where expected.
fn type_keys_end(value: &Value, json: &[u8]) -> Option<usize> {
    let mut head = b"{".to_vec();
    for key in ["kind", "apiVersion"] {
        if let Some(v) = value.get(key) {
            if head.len() > 1 {
                head.push(b',');
            }
            serde_json::to_writer(&mut head, key).ok()?;
            head.push(b':');
            serde_json::to_writer(&mut head, v).ok()?;
        }
    }
    if !json.starts_with(&head) {
        return None;
    }
    match json.get(head.len()) {
        _ if head.len() == 1 => Some(1),
        Some(b',') => Some(head.len() + 1),
        Some(b'}') => Some(head.len()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item(cached: &Cached, with_type: bool) -> Value {
        let mut out = Vec::new();
        cached.write_item(&mut out, with_type).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn an_encoded_object_reads_back_as_the_value_it_was_made_from() {
        let value = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "d", "resourceVersion": "7"},
            "data": {"k": "v", "n": "1.5e300"}
        });
        let cached = Cached::hold(value.clone(), CacheForm::Encoded);
        assert!(cached.encoded_json().is_some());
        assert_eq!(*cached.value(), value);
        assert_eq!(cached.resource_version(), Some(7));
        assert_eq!(item(&cached, true), value);
        let mut untyped = value.clone();
        untyped.as_object_mut().unwrap().remove("kind");
        untyped.as_object_mut().unwrap().remove("apiVersion");
        assert_eq!(item(&cached, false), untyped);
    }

    #[test]
    fn an_encoded_objects_selection_view_holds_its_names_and_labels_only() {
        let value = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "d", "labels": {"app": "web"},
                         "annotations": {"big": "x"}, "resourceVersion": "7"},
            "data": {"k": "v"}
        });
        let view = Cached::hold(value.clone(), CacheForm::Encoded).selection_view();
        assert_eq!(
            *view,
            json!({"metadata": {"name": "a", "namespace": "d", "labels": {"app": "web"}}})
        );
        // A decoded object is its own view.
        let decoded = Cached::hold(value.clone(), CacheForm::Decoded);
        assert_eq!(*decoded.selection_view(), value);
        // Without labels or a namespace, the view has none either.
        let bare = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}});
        let view = Cached::hold(bare, CacheForm::Encoded).selection_view();
        assert_eq!(*view, json!({"metadata": {"name": "n"}}));
    }

    #[test]
    fn objects_with_only_or_without_type_keys_keep_valid_items() {
        for value in [
            json!({"kind": "ConfigMap", "apiVersion": "v1"}),
            json!({"metadata": {"name": "a"}}),
            json!({"apiVersion": "v1", "metadata": {}}),
            json!({}),
        ] {
            let cached = Cached::hold(value.clone(), CacheForm::Encoded);
            assert_eq!(*cached.value(), value);
            let mut untyped = value.clone();
            untyped.as_object_mut().unwrap().remove("kind");
            untyped.as_object_mut().unwrap().remove("apiVersion");
            assert_eq!(item(&cached, false), untyped, "{value}");
            assert_eq!(item(&cached, true), value, "{value}");
        }
    }
}
