//! ValidatingAdmissionPolicies, their bindings and the webhook
//! configurations, with upstream's columns.

use serde_json::Value;

use super::columns::{
    Column, Printer, joined, list, name_age_printer, one_column_printer, text, text_cell,
};

pub(crate) static VALIDATING_ADMISSION_POLICIES: Printer = name_age_printer!(
    [
        Column::integer(
            "Validations",
            "Validations indicates the number of validation rules defined in this configuration",
        ),
        Column::string(
            "ParamKind",
            "ParamKind specifies the kind of resources used to parameterize this policy",
        ),
    ],
    |policy, _| {
        let param_kind = joined(policy, "spec/paramKind/apiVersion", "spec/paramKind/kind")
            .unwrap_or_else(|| "<unset>".to_string());
        vec![
            Value::from(list(policy, "spec/validations").len()),
            Value::from(param_kind),
        ]
    },
);

pub(crate) static VALIDATING_ADMISSION_POLICY_BINDINGS: Printer = name_age_printer!(
    [
        Column::string(
            "PolicyName",
            "PolicyName indicates the policy definition which the policy binding binded to",
        ),
        Column::string(
            "ParamRef",
            "ParamRef indicates the param resource which sets the configration param",
        ),
    ],
    |binding, _| {
        let param_ref = match (
            text(binding, "spec/paramRef/namespace").filter(|s| !s.is_empty()),
            text(binding, "spec/paramRef/name").filter(|s| !s.is_empty()),
        ) {
            (Some(namespace), Some(name)) => format!("{namespace}/{name}"),
            (None, Some(name)) => name.to_string(),
            (Some(namespace), None) => format!("{namespace}/*"),
            (None, None) if binding["spec"]["paramRef"].is_object() => "*".to_string(),
            (None, None) => "<unset>".to_string(),
        };
        vec![
            text_cell(binding, "spec/policyName", ""),
            Value::from(param_ref),
        ]
    },
);

/// Mutating and validating webhook configurations: NAME, WEBHOOKS, AGE.
pub(crate) static WEBHOOK_CONFIGURATIONS: Printer = one_column_printer!(
    Column::integer(
        "Webhooks",
        "Webhooks indicates the number of webhooks in the configuration.",
    ),
    |object| Value::from(list(object, "webhooks").len()),
);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_table_counts_webhooks() {
        let object =
            json!({"metadata": {"name": "cfg"}, "webhooks": [{"name": "a"}, {"name": "b"}]});
        let now = k8s_openapi::jiff::Timestamp::now();
        let cells = (WEBHOOK_CONFIGURATIONS.cells)(&object, now);
        assert_eq!(cells[0], "cfg");
        assert_eq!(cells[1], 2);
    }
}
