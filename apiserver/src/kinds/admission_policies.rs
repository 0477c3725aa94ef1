//! ValidatingAdmissionPolicies and their bindings, delegating to
//! `admission_plugins::validating_policy::definition` for defaults and
//! checks (a policy whose CEL does not compile is refused here).

use super::defined::Defined;
use crate::admission_plugins::validating_policy::definition;
use crate::validation::NameRule;

/// `admissionregistration.k8s.io/v1` validatingadmissionpolicies.
pub(crate) static VALIDATING_ADMISSION_POLICIES: Defined = Defined {
    name_rule: NameRule::Subdomain,
    defaults: definition::default_policy,
    validate: definition::validate_policy,
};

/// `admissionregistration.k8s.io/v1` validatingadmissionpolicybindings.
pub(crate) static VALIDATING_ADMISSION_POLICY_BINDINGS: Defined = Defined {
    name_rule: NameRule::Subdomain,
    defaults: definition::default_binding,
    validate: definition::validate_binding,
};
