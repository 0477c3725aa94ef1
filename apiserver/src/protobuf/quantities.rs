//! Which fields of a built-in object are quantities, from the traced JSON
//! shapes, so that a write can be refused as upstream's decoder refuses it
//! and stored as upstream stores it: k8s-openapi reads a quantity as any
//! string, upstream parses it and writes it back in canonical form.

use serde_json::Value;
use skiff_common::quantity::canonical;
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

/// Checks each quantity of `object` (of the built-in `kind` in
/// `api_version`) as upstream's decoder parses it and writes it in the
/// canonical form upstream stores (`0.5` as `500m`); the first refused
/// fails it. Kinds it does not know pass untouched.
pub(crate) fn settle(api_version: &str, kind: &str, object: &mut Value) -> Result<(), SyntaxError> {
    let kinds = Kinds::get();
    let Some(root) = kinds
        .entry(api_version, kind)
        .and_then(|e| e.root.clone().ok())
    else {
        return Ok(());
    };
    Walk { kinds }.object(root, object)
}

struct Walk {
    kinds: &'static Kinds,
}

impl Walk {
    fn object(&self, ty: usize, value: &mut Value) -> Result<(), SyntaxError> {
        if !self.kinds.reaches_quantity[ty] {
            return Ok(());
        }
        let schema = &self.kinds.schemas.types[ty];
        let Some(fields) = value.as_object_mut() else {
            return Ok(());
        };
        for (name, value) in fields {
            if let Some(field) = schema.field(name) {
                self.value(&field.shape, value)?;
            }
        }
        Ok(())
    }

    fn value(&self, shape: &Shape, value: &mut Value) -> Result<(), SyntaxError> {
        match (shape, value) {
            // A JSON number's text is a quantity's too (null is zero).
            (Shape::Quantity, value) => {
                let text = match value {
                    Value::String(text) => text.clone(),
                    Value::Number(number) => number.to_string(),
                    _ => return Ok(()),
                };
                syntax::check(&text)?;
                if let Some(canonical) = canonical::canonical(&text) {
                    *value = Value::String(canonical);
                }
                Ok(())
            }
            (Shape::Struct(id), value) => self.object(*id, value),
            (Shape::List(inner), Value::Array(items)) => items
                .iter_mut()
                .try_for_each(|item| self.value(inner, item)),
            (Shape::Map(inner), Value::Object(entries)) => entries
                .values_mut()
                .try_for_each(|entry| self.value(inner, entry)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `settle` of `object`: the refusal, or the object as it would be stored.
    fn settled(api_version: &str, kind: &str, mut object: Value) -> Result<Value, SyntaxError> {
        settle(api_version, kind, &mut object).map(|()| object)
    }

    #[test]
    fn finds_quantities_wherever_a_kind_holds_them() {
        let pod = json!({"spec": {
            "containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "64Mi"}}},
                           {"name": "b", "resources": {"requests": {"cpu": "abc"}}}],
            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Gi"}}]}});
        assert_eq!(settled("v1", "Pod", pod), Err(SyntaxError::Format));
        let template = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"memory": "32MMi"}}}]}}}});
        assert_eq!(
            settled("apps/v1", "Deployment", template),
            Err(SyntaxError::Suffix)
        );
        let claim = json!({"spec": {"resources": {"requests": {"storage": "ten"}}}});
        assert_eq!(
            settled("v1", "PersistentVolumeClaim", claim),
            Err(SyntaxError::Format)
        );
        // Strings that are not quantities elsewhere are no concern of this.
        let config = json!({"data": {"cpu": "abc"}});
        assert_eq!(settled("v1", "ConfigMap", config.clone()), Ok(config));
        assert!(settled("v1", "NoSuchKind", json!({"spec": 1})).is_ok());
    }

    #[test]
    fn quantities_are_stored_in_canonical_form() {
        let quota = json!({"spec": {"hard": {"pods": "10", "requests.cpu": "0.5", "limits.memory": "1.5Gi"}}});
        assert_eq!(
            settled("v1", "ResourceQuota", quota),
            Ok(
                json!({"spec": {"hard": {"pods": "10", "requests.cpu": "500m", "limits.memory": "1536Mi"}}})
            )
        );
        let pod = json!({"metadata": {"name": "0.5"}, "spec": {"containers": [
            {"name": "a", "image": "0.5", "resources": {"requests": {"memory": "1e8", "cpu": 2}}}]}});
        assert_eq!(
            settled("v1", "Pod", pod),
            Ok(json!({"metadata": {"name": "0.5"}, "spec": {"containers": [
                {"name": "a", "image": "0.5", "resources": {"requests": {"memory": "100e6", "cpu": "2"}}}]}}))
        );
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
