//! RBAC objects (roles, cluster roles and their bindings): names are path
//! segments, as upstream allows `system:` names with colons; a binding's
//! User and Group subjects belong to the RBAC API group unless they say.

use serde_json::{Value, json};

use super::{KindStrategy, set_default};
use crate::object::items_mut;
use crate::registry::ResourceInfo;
use crate::validation::NameRule;

/// The API group of User and Group subjects.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Every resource of `rbac.authorization.k8s.io`.
#[derive(Debug)]
pub(crate) struct Rbac;

impl KindStrategy for Rbac {
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    /// Subjects of bindings: upstream gives User and Group the RBAC group
    /// (a ServiceAccount's core group is empty, which is never written).
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        for subject in items_mut(object, &["subjects"]) {
            if matches!(subject["kind"].as_str(), Some("User" | "Group")) {
                set_default(subject, "apiGroup", json!(RBAC_GROUP));
            }
        }
    }
}
