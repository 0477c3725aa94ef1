//! Which fields of a built-in object are quantities, from the traced JSON
//! shapes, so that a write can be refused as upstream's decoder refuses it:
//! k8s-openapi reads a quantity as any string, upstream parses it.

use serde_json::Value;
use skiff_common::quantity::syntax::{self, SyntaxError};

use super::kinds::Kinds;
use super::schema::{Schemas, Shape};

/// For each traced type, whether a quantity can be reached from it; most
/// kinds (ConfigMaps, Secrets, RBAC) reach none and are not walked at all.
pub(super) fn reachable(schemas: &Schemas) -> Vec<bool> {
    let mut reaches = vec![false; schemas.types.len()];
    // Types refer to each other (and to themselves): repeat until stable.
    loop {
        let mut changed = false;
        for (id, ty) in schemas.types.iter().enumerate() {
            if !reaches[id] && ty.fields.iter().any(|f| shape_reaches(&f.shape, &reaches)) {
                reaches[id] = true;
                changed = true;
            }
        }
        if !changed {
            return reaches;
        }
    }
}

fn shape_reaches(shape: &Shape, reaches: &[bool]) -> bool {
    match shape {
        Shape::Quantity => true,
        Shape::Leaf => false,
        Shape::Struct(id) => reaches[*id],
        Shape::List(inner) | Shape::Map(inner) => shape_reaches(inner, reaches),
    }
}

/// The first quantity in `object` (of the built-in `kind` in `api_version`)
/// whose text upstream's decoder refuses; `None` for kinds it does not know.
pub(crate) fn first_refused(api_version: &str, kind: &str, object: &Value) -> Option<SyntaxError> {
    let kinds = Kinds::get();
    let root = kinds.entry(api_version, kind)?.root.clone().ok()?;
    Walk { kinds }.object(root, object)
}

struct Walk {
    kinds: &'static Kinds,
}

impl Walk {
    fn object(&self, ty: usize, value: &Value) -> Option<SyntaxError> {
        if !self.kinds.reaches_quantity[ty] {
            return None;
        }
        let schema = &self.kinds.schemas.types[ty];
        value
            .as_object()?
            .iter()
            .find_map(|(name, value)| self.value(&schema.field(name)?.shape, value))
    }

    fn value(&self, shape: &Shape, value: &Value) -> Option<SyntaxError> {
        match (shape, value) {
            // A JSON number is always a quantity's text; null is zero.
            (Shape::Quantity, Value::String(text)) => syntax::check(text).err(),
            (Shape::Struct(id), _) => self.object(*id, value),
            (Shape::List(inner), Value::Array(items)) => {
                items.iter().find_map(|item| self.value(inner, item))
            }
            (Shape::Map(inner), Value::Object(entries)) => {
                entries.values().find_map(|entry| self.value(inner, entry))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn finds_quantities_wherever_a_kind_holds_them() {
        let pod = json!({"spec": {
            "containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "64Mi"}}},
                           {"name": "b", "resources": {"requests": {"cpu": "abc"}}}],
            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Gi"}}]}});
        assert_eq!(first_refused("v1", "Pod", &pod), Some(SyntaxError::Format));
        let template = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"memory": "32MMi"}}}]}}}});
        assert_eq!(
            first_refused("apps/v1", "Deployment", &template),
            Some(SyntaxError::Suffix)
        );
        let claim = json!({"spec": {"resources": {"requests": {"storage": "ten"}}}});
        assert_eq!(
            first_refused("v1", "PersistentVolumeClaim", &claim),
            Some(SyntaxError::Format)
        );
        let quota = json!({"spec": {"hard": {"pods": "10", "requests.cpu": 4}}});
        assert_eq!(first_refused("v1", "ResourceQuota", &quota), None);
        // Strings that are not quantities elsewhere are no concern of this.
        let config = json!({"data": {"cpu": "abc"}});
        assert_eq!(first_refused("v1", "ConfigMap", &config), None);
        assert_eq!(first_refused("v1", "NoSuchKind", &pod), None);
    }

    #[test]
    fn most_kinds_hold_no_quantity() {
        let kinds = Kinds::get();
        let reaches = |api_version, kind| {
            let root = kinds
                .entry(api_version, kind)
                .unwrap()
                .root
                .clone()
                .unwrap();
            kinds.reaches_quantity[root]
        };
        assert!(reaches("v1", "Pod"));
        assert!(reaches("batch/v1", "CronJob"));
        assert!(reaches("v1", "LimitRange"));
        assert!(!reaches("v1", "ConfigMap"));
        assert!(!reaches("rbac.authorization.k8s.io/v1", "ClusterRole"));
    }
}
