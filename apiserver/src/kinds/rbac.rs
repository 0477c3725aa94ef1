//! RBAC objects (roles, cluster roles and their bindings): names are path
//! segments, as upstream allows `system:` names with colons.

use super::KindStrategy;
use crate::validation::NameRule;

/// Every resource of `rbac.authorization.k8s.io`.
#[derive(Debug)]
pub(crate) struct Rbac;

impl KindStrategy for Rbac {
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }
}
