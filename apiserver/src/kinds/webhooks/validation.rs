//! Field checks of a webhook configuration, with upstream's paths and
//! wording: webhook names (fully qualified, unique in the configuration),
//! rules, policies, the 1–30 s timeout, the review versions, selectors and
//! where the webhook is reached (`clientConfig`: exactly one of an `https`
//! URL without user, query or fragment, or a Service reference).

use std::ops::RangeInclusive;

use serde_json::Value;

use super::WebhookKind;
use crate::object::str_items;
use crate::status::FieldError;
use crate::validation::{is_dns1123_label, is_dns1123_subdomain, one_of};

const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];
const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
const REINVOCATION_POLICIES: &[&str] = &["IfNeeded", "Never"];
/// What v1 accepts from a new webhook; `Some` and `Unknown` stay valid only
/// on configurations that already had them (written before v1).
const SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun"];
const REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];

/// Checks every webhook of a configuration (`old`: the stored one, on
/// updates).
pub(super) fn configuration(
    kind: WebhookKind,
    object: &Value,
    old: Option<&Value>,
    errors: &mut Vec<FieldError>,
) {
    let Some(webhooks) = object.get("webhooks").and_then(Value::as_array) else {
        return;
    };
    // Upstream lets an update keep side effects v1 no longer accepts when
    // the stored configuration already declared them.
    let legacy_side_effects = old
        .and_then(|o| o["webhooks"].as_array())
        .into_iter()
        .flatten()
        .any(|h| matches!(h["sideEffects"].as_str(), Some("Some" | "Unknown")));
    let mut seen = std::collections::HashSet::new();
    for (i, hook) in webhooks.iter().enumerate() {
        let path = format!("webhooks[{i}]");
        let name = hook["name"].as_str().unwrap_or("");
        if !name.is_empty() && !seen.insert(name) {
            errors.push(FieldError::duplicate(format!("{path}.name"), name));
        }
        webhook(kind, hook, &path, legacy_side_effects, errors);
    }
}

fn webhook(
    kind: WebhookKind,
    hook: &Value,
    path: &str,
    legacy_side_effects: bool,
    errors: &mut Vec<FieldError>,
) {
    let name = hook["name"].as_str().unwrap_or("");
    if name.is_empty() {
        errors.push(FieldError::required(format!("{path}.name"), ""));
    } else if name.split('.').count() < 3 {
        errors.push(FieldError::invalid(
            format!("{path}.name"),
            name,
            "should be a domain with at least three segments separated by dots",
        ));
    } else if !is_dns1123_subdomain(name) {
        errors.push(FieldError::invalid(
            format!("{path}.name"),
            name,
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        ));
    }
    for (i, rule) in hook["rules"].as_array().into_iter().flatten().enumerate() {
        self::rule(rule, &format!("{path}.rules[{i}]"), errors);
    }
    one_of(hook, "failurePolicy", FAILURE_POLICIES, path, errors);
    one_of(hook, "matchPolicy", MATCH_POLICIES, path, errors);
    if kind == WebhookKind::Mutating {
        one_of(
            hook,
            "reinvocationPolicy",
            REINVOCATION_POLICIES,
            path,
            errors,
        );
    }
    match hook["sideEffects"].as_str() {
        None => errors.push(FieldError::required(
            format!("{path}.sideEffects"),
            "must specify one of None, NoneOnDryRun",
        )),
        Some("Some" | "Unknown") if legacy_side_effects => {}
        Some(value) if !SIDE_EFFECTS.contains(&value) => errors.push(FieldError::not_supported(
            format!("{path}.sideEffects"),
            value,
            SIDE_EFFECTS,
        )),
        Some(_) => {}
    }
    within(
        hook,
        "timeoutSeconds",
        1..=30,
        "the timeout value must be between 1 and 30 seconds",
        path,
        errors,
    );
    review_versions(hook, path, errors);
    for selector in ["namespaceSelector", "objectSelector"] {
        if let Some(value) = hook.get(selector).filter(|v| !v.is_null())
            && let Err(e) = crate::selectors::LabelSelector::from_object(value)
        {
            errors.push(FieldError::invalid(
                format!("{path}.{selector}"),
                value.clone(),
                e.0,
            ));
        }
    }
    client_config(
        &hook["clientConfig"],
        &format!("{path}.clientConfig"),
        errors,
    );
}

fn review_versions(hook: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let field = format!("{path}.admissionReviewVersions");
    let versions = strings(hook, "admissionReviewVersions");
    if versions.is_empty() {
        errors.push(FieldError::required(
            field,
            "must specify one of v1, v1beta1",
        ));
        return;
    }
    let mut seen = std::collections::HashSet::new();
    for (i, version) in versions.iter().enumerate() {
        if !seen.insert(*version) {
            errors.push(FieldError::invalid(
                format!("{field}[{i}]"),
                *version,
                "duplicate version",
            ));
        }
    }
    if !versions.iter().any(|v| REVIEW_VERSIONS.contains(v)) {
        errors.push(FieldError::invalid(
            field,
            Value::from(versions.clone()),
            "must include at least one of v1, v1beta1",
        ));
    }
}

fn rule(rule: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let operations = strings(rule, "operations");
    wildcard_list(&operations, "operations", "operations", path, errors);
    for (i, operation) in operations.iter().enumerate() {
        if !OPERATIONS.contains(operation) {
            errors.push(FieldError::not_supported(
                format!("{path}.operations[{i}]"),
                *operation,
                OPERATIONS,
            ));
        }
    }
    for (field, what) in [("apiGroups", "API groups"), ("apiVersions", "API versions")] {
        let values = strings(rule, field);
        wildcard_list(&values, field, what, path, errors);
        if field == "apiVersions" {
            for (i, version) in values.iter().enumerate() {
                if version.is_empty() {
                    errors.push(FieldError::required(format!("{path}.{field}[{i}]"), ""));
                }
            }
        }
    }
    let resources = strings(rule, "resources");
    if resources.is_empty() {
        errors.push(FieldError::required(format!("{path}.resources"), ""));
    }
    for (i, resource) in resources.iter().enumerate() {
        let (main, sub) = resource.split_once('/').unwrap_or((resource, ""));
        if main.is_empty() || (resource.contains('/') && sub.is_empty()) {
            errors.push(FieldError::required(format!("{path}.resources[{i}]"), ""));
        }
        if main != "*" && sub == "*" && resources.contains(&"*/*") {
            errors.push(FieldError::invalid(
                format!("{path}.resources[{i}]"),
                *resource,
                "if '*/*' is present, must not specify other resources",
            ));
        }
    }
    one_of(rule, "scope", SCOPES, path, errors);
}

/// A rule's list at `field`: required, and `*` stands alone in it (`what`
/// names its entries, as upstream's message does).
fn wildcard_list(
    values: &[&str],
    field: &str,
    what: &str,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    if values.is_empty() {
        errors.push(FieldError::required(format!("{path}.{field}"), ""));
    }
    if values.len() > 1 && values.contains(&"*") {
        errors.push(FieldError::invalid(
            format!("{path}.{field}"),
            Value::from(values),
            format!("if '*' is present, must not specify other {what}"),
        ));
    }
}

fn client_config(config: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let url = config.get("url").filter(|v| !v.is_null());
    let service = config.get("service").filter(|v| !v.is_null());
    match (url, service) {
        (Some(_), Some(_)) | (None, None) => errors.push(FieldError::required(
            path.to_string(),
            "exactly one of url or service is required",
        )),
        (Some(url), None) => self::url(url.as_str().unwrap_or(""), &format!("{path}.url"), errors),
        (None, Some(service)) => self::service(service, &format!("{path}.service"), errors),
    }
}

/// Why a webhook URL is not acceptable, in upstream's words (`None`: it is).
pub(crate) fn url_problem(url: &str) -> Option<&'static str> {
    if url.contains('#') {
        return Some("fragments are not permitted in the URL");
    }
    let Ok(uri) = url.parse::<http::Uri>() else {
        return Some("must be a valid URL");
    };
    if uri.scheme_str() != Some("https") {
        return Some("'https' is the only allowed URL scheme");
    }
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or("");
    if authority.contains('@') {
        return Some("user information is not permitted in the URL");
    }
    if uri.host().is_none_or(str::is_empty) {
        return Some("host must be specified");
    }
    if uri.query().is_some() {
        return Some("query parameters are not allowed");
    }
    None
}

fn url(url: &str, path: &str, errors: &mut Vec<FieldError>) {
    if url.is_empty() {
        errors.push(FieldError::required(path.to_string(), ""));
    } else if let Some(problem) = url_problem(url) {
        errors.push(FieldError::invalid(path.to_string(), url, problem));
    }
}

fn service(service: &Value, path: &str, errors: &mut Vec<FieldError>) {
    // Both name the Service as DNS labels do.
    for field in ["name", "namespace"] {
        let value = service[field].as_str().unwrap_or("");
        if value.is_empty() {
            errors.push(FieldError::required(
                format!("{path}.{field}"),
                format!("service {field} is required"),
            ));
        } else if !is_dns1123_label(value) {
            errors.push(FieldError::invalid(
                format!("{path}.{field}"),
                value,
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            ));
        }
    }
    if let Some(webhook_path) = service["path"].as_str().filter(|p| !p.is_empty()) {
        if !webhook_path.starts_with('/') {
            errors.push(FieldError::invalid(
                format!("{path}.path"),
                webhook_path,
                "must start with a '/'",
            ));
        } else if webhook_path.contains('?') || webhook_path.contains('#') {
            errors.push(FieldError::invalid(
                format!("{path}.path"),
                webhook_path,
                "must be a path without query or fragment",
            ));
        }
    }
    within(
        service,
        "port",
        1..=65535,
        "port is not valid: must be between 1 and 65535, inclusive",
        path,
        errors,
    );
}

/// `field` of `object`, when set, is an integer within `range`; `problem`
/// says otherwise.
fn within(
    object: &Value,
    field: &str,
    range: RangeInclusive<i64>,
    problem: &str,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    if let Some(value) = object.get(field).filter(|v| !v.is_null())
        && !value.as_i64().is_some_and(|v| range.contains(&v))
    {
        errors.push(FieldError::invalid(
            format!("{path}.{field}"),
            value.clone(),
            problem,
        ));
    }
}

/// The strings of the list at `field` (none when it is not one).
fn strings<'a>(object: &'a Value, field: &str) -> Vec<&'a str> {
    str_items(&object[field]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hook() -> Value {
        json!({"name": "deny.example.com", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "timeoutSeconds": 10,
            "failurePolicy": "Fail", "matchPolicy": "Equivalent", "reinvocationPolicy": "Never",
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["configmaps"], "scope": "*"}],
            "clientConfig": {"url": "https://127.0.0.1:8443/deny"}})
    }

    fn check(hooks: Vec<Value>) -> Vec<String> {
        let mut errors = Vec::new();
        configuration(
            WebhookKind::Mutating,
            &json!({"webhooks": hooks}),
            None,
            &mut errors,
        );
        errors.iter().map(FieldError::render).collect()
    }

    fn with(field: &str, value: Value) -> Value {
        let mut h = hook();
        h[field] = value;
        h
    }

    #[test]
    fn a_well_formed_webhook_passes() {
        assert!(check(vec![hook()]).is_empty());
    }

    #[test]
    fn timeouts_outside_one_to_thirty_seconds_are_refused() {
        assert_eq!(
            check(vec![with("timeoutSeconds", json!(31))]),
            [
                "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds"
            ]
        );
        assert_eq!(check(vec![with("timeoutSeconds", json!(0))]).len(), 1);
        assert!(check(vec![with("timeoutSeconds", json!(30))]).is_empty());
    }

    #[test]
    fn names_are_unique_and_qualified() {
        assert_eq!(
            check(vec![hook(), hook()]),
            ["webhooks[1].name: Duplicate value: \"deny.example.com\""]
        );
        assert_eq!(
            check(vec![with("name", json!("deny"))]),
            [
                "webhooks[0].name: Invalid value: \"deny\": should be a domain with at least three segments separated by dots"
            ]
        );
    }

    #[test]
    fn side_effects_and_review_versions_are_required() {
        let mut h = hook();
        h.as_object_mut().unwrap().remove("sideEffects");
        h.as_object_mut().unwrap().remove("admissionReviewVersions");
        assert_eq!(
            check(vec![h]),
            [
                "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
                "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1"
            ]
        );
        assert_eq!(
            check(vec![with("sideEffects", json!("Some"))]),
            [
                "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\""
            ]
        );
    }

    #[test]
    fn a_stored_legacy_side_effect_may_stay() {
        let legacy = with("sideEffects", json!("Unknown"));
        let old = json!({"webhooks": [legacy.clone()]});
        let mut errors = Vec::new();
        configuration(
            WebhookKind::Validating,
            &json!({"webhooks": [legacy]}),
            Some(&old),
            &mut errors,
        );
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn client_config_needs_exactly_one_https_target() {
        let both = with(
            "clientConfig",
            json!({"url": "https://a.example/x", "service": {"namespace": "n", "name": "s"}}),
        );
        assert_eq!(
            check(vec![both]),
            ["webhooks[0].clientConfig: Required value: exactly one of url or service is required"]
        );
        assert_eq!(check(vec![with("clientConfig", json!({}))]).len(), 1);
        for (url, problem) in [
            (
                "http://a.example/x",
                "'https' is the only allowed URL scheme",
            ),
            (
                "https://u:p@a.example/x",
                "user information is not permitted in the URL",
            ),
            (
                "https://a.example/x?q=1",
                "query parameters are not allowed",
            ),
            (
                "https://a.example/x#frag",
                "fragments are not permitted in the URL",
            ),
        ] {
            assert_eq!(
                check(vec![with("clientConfig", json!({"url": url}))]),
                [format!(
                    "webhooks[0].clientConfig.url: Invalid value: \"{url}\": {problem}"
                )]
            );
        }
        let service = with(
            "clientConfig",
            json!({"service": {"namespace": "n", "name": "s", "path": "x", "port": 70000}}),
        );
        assert_eq!(
            check(vec![service]),
            [
                "webhooks[0].clientConfig.service.path: Invalid value: \"x\": must start with a '/'",
                "webhooks[0].clientConfig.service.port: Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive"
            ]
        );
    }

    #[test]
    fn a_wildcard_stands_alone_in_a_rule() {
        let mut h = hook();
        h["rules"] = json!([{"operations": ["*", "CREATE"], "apiGroups": ["*", "apps"],
            "apiVersions": ["v1"], "resources": ["pods"]}]);
        let errors = check(vec![h]);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].starts_with("webhooks[0].rules[0].operations: Invalid value: "));
        assert!(errors[0].ends_with(": if '*' is present, must not specify other operations"));
        assert!(errors[1].starts_with("webhooks[0].rules[0].apiGroups: Invalid value: "));
        assert!(errors[1].ends_with(": if '*' is present, must not specify other API groups"));
    }

    #[test]
    fn rules_and_policies_take_upstreams_values() {
        let mut h = hook();
        h["rules"] = json!([{"operations": ["PATCH"], "apiGroups": [], "apiVersions": ["v1"],
            "resources": ["pods"], "scope": "Everywhere"}]);
        h["failurePolicy"] = json!("Maybe");
        let errors = check(vec![h]);
        assert_eq!(
            errors,
            [
                "webhooks[0].rules[0].operations[0]: Unsupported value: \"PATCH\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"",
                "webhooks[0].rules[0].apiGroups: Required value",
                "webhooks[0].rules[0].scope: Unsupported value: \"Everywhere\": supported values: \"*\", \"Cluster\", \"Namespaced\"",
                "webhooks[0].failurePolicy: Unsupported value: \"Maybe\": supported values: \"Fail\", \"Ignore\""
            ]
        );
    }
}
