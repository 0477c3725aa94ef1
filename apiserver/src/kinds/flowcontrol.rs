//! FlowSchemas and PriorityLevelConfigurations, delegating to
//! `flowcontrol::definition` for defaults and checks, with upstream's columns.

use super::defined::Defined;
use crate::flowcontrol::definition;
use crate::validation::NameRule;

/// `flowcontrol.apiserver.k8s.io/v1` flowschemas.
pub(crate) static FLOW_SCHEMAS: Defined = Defined {
    name_rule: NameRule::PathSegment,
    defaults: definition::default_flow_schema,
    validate: definition::validate_flow_schema,
};

/// `flowcontrol.apiserver.k8s.io/v1` prioritylevelconfigurations.
pub(crate) static PRIORITY_LEVEL_CONFIGURATIONS: Defined = Defined {
    name_rule: NameRule::PathSegment,
    defaults: definition::default_priority_level,
    validate: definition::validate_priority_level,
};
