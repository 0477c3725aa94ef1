//! ValidatingAdmissionPolicies and their bindings, delegating to
//! `admission_plugins::validating_policy::definition` for defaults and
//! checks (a policy whose CEL does not compile is refused here), with
//! upstream's columns.

use serde_json::Value;

use super::KindStrategy;
use crate::admission_plugins::validating_policy::definition;
use crate::registry::ResourceInfo;
use crate::status::FieldError;
use crate::table::Printer;

/// `admissionregistration.k8s.io/v1` validatingadmissionpolicies.
#[derive(Debug)]
pub(crate) struct ValidatingAdmissionPolicies;

impl KindStrategy for ValidatingAdmissionPolicies {
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        definition::default_policy(object);
    }

    fn validate(
        &self,
        _info: &ResourceInfo,
        object: &Value,
        _old: Option<&Value>,
        errors: &mut Vec<FieldError>,
    ) {
        definition::validate_policy(object, errors);
    }

    fn printer(&self) -> &'static Printer {
        &crate::table::admission::VALIDATING_ADMISSION_POLICIES
    }
}

/// `admissionregistration.k8s.io/v1` validatingadmissionpolicybindings.
#[derive(Debug)]
pub(crate) struct ValidatingAdmissionPolicyBindings;

impl KindStrategy for ValidatingAdmissionPolicyBindings {
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        definition::default_binding(object);
    }

    fn validate(
        &self,
        _info: &ResourceInfo,
        object: &Value,
        _old: Option<&Value>,
        errors: &mut Vec<FieldError>,
    ) {
        definition::validate_binding(object, errors);
    }

    fn printer(&self) -> &'static Printer {
        &crate::table::admission::VALIDATING_ADMISSION_POLICY_BINDINGS
    }
}
