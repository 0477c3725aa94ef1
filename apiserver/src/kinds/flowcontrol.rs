//! FlowSchemas and PriorityLevelConfigurations, delegating to
//! `flowcontrol::definition` for defaults and checks, with upstream's columns.

use serde_json::Value;

use super::KindStrategy;
use crate::flowcontrol::definition;
use crate::registry::ResourceInfo;
use crate::status::FieldError;
use crate::table::Printer;
use crate::validation::NameRule;

/// `flowcontrol.apiserver.k8s.io/v1` flowschemas.
#[derive(Debug)]
pub(crate) struct FlowSchemas;

impl KindStrategy for FlowSchemas {
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        definition::default_flow_schema(object);
    }

    fn validate(
        &self,
        _info: &ResourceInfo,
        object: &Value,
        _old: Option<&Value>,
        errors: &mut Vec<FieldError>,
    ) {
        definition::validate_flow_schema(object, errors);
    }

    fn printer(&self) -> &'static Printer {
        &crate::table::flowcontrol::FLOW_SCHEMAS
    }
}

/// `flowcontrol.apiserver.k8s.io/v1` prioritylevelconfigurations.
#[derive(Debug)]
pub(crate) struct PriorityLevelConfigurations;

impl KindStrategy for PriorityLevelConfigurations {
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        definition::default_priority_level(object);
    }

    fn validate(
        &self,
        _info: &ResourceInfo,
        object: &Value,
        _old: Option<&Value>,
        errors: &mut Vec<FieldError>,
    ) {
        definition::validate_priority_level(object, errors);
    }

    fn printer(&self) -> &'static Printer {
        &crate::table::flowcontrol::PRIORITY_LEVELS
    }
}
