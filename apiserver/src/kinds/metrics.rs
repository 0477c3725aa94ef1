//! `metrics.k8s.io/v1beta1` NodeMetrics and PodMetrics: read-only, so only
//! their columns differ from the plain kind (served by
//! [`crate::resource_metrics`]).

use serde_json::Value;

use super::defined::Defined;
use crate::table::metrics;
use crate::validation::NameRule;

fn nothing(_: &mut Value) {}

fn no_checks(_: &Value, _: &mut Vec<crate::status::FieldError>) {}

/// NodeMetrics.
pub(crate) static NODE_METRICS: Defined = Defined {
    name_rule: NameRule::Subdomain,
    defaults: nothing,
    validate: no_checks,
    printer: &metrics::NODE_METRICS,
};

/// PodMetrics.
pub(crate) static POD_METRICS: Defined = Defined {
    name_rule: NameRule::Subdomain,
    defaults: nothing,
    validate: no_checks,
    printer: &metrics::POD_METRICS,
};
