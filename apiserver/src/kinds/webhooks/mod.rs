//! MutatingWebhookConfiguration and ValidatingWebhookConfiguration
//! (`admissionregistration.k8s.io/v1`): upstream's v1 defaults for every
//! webhook they list and their field checks (`validation.rs`). Calling the
//! webhooks is admission's business (`admission_plugins::webhook`); this
//! module only says what a well-formed configuration is.

mod validation;

use serde_json::{Value, json};

use super::{KindStrategy, set_default};
use crate::kinds::Written;
use crate::object::items_mut;
use crate::registry::ResourceInfo;
use crate::status::FieldError;

/// Which of the two configuration kinds a strategy serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WebhookKind {
    Mutating,
    Validating,
}

/// The strategy of `mutatingwebhookconfigurations`.
pub(crate) static MUTATING_WEBHOOKS: WebhookConfigurations =
    WebhookConfigurations(WebhookKind::Mutating);
/// The strategy of `validatingwebhookconfigurations`.
pub(crate) static VALIDATING_WEBHOOKS: WebhookConfigurations =
    WebhookConfigurations(WebhookKind::Validating);

/// One of the two webhook configuration kinds.
#[derive(Debug)]
pub(crate) struct WebhookConfigurations(pub WebhookKind);

impl KindStrategy for WebhookConfigurations {
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        for hook in items_mut(object, &["webhooks"]) {
            default_webhook(self.0, hook);
        }
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written { object, old, .. } = *written;
        validation::configuration(self.0, object, old, errors);
    }
}

/// Upstream's v1 defaults of one webhook (sideEffects and
/// admissionReviewVersions have none in v1: they are required).
fn default_webhook(kind: WebhookKind, hook: &mut Value) {
    if !hook.is_object() {
        return;
    }
    set_default(hook, "failurePolicy", json!("Fail"));
    set_default(hook, "matchPolicy", json!("Equivalent"));
    set_default(hook, "namespaceSelector", json!({}));
    set_default(hook, "objectSelector", json!({}));
    set_default(hook, "timeoutSeconds", json!(10));
    if kind == WebhookKind::Mutating {
        set_default(hook, "reinvocationPolicy", json!("Never"));
    }
    for rule in items_mut(hook, &["rules"]) {
        set_default(rule, "scope", json!("*"));
    }
    if let Some(service) = hook
        .get_mut("clientConfig")
        .and_then(|c| c.get_mut("service"))
        .filter(|s| s.is_object())
    {
        set_default(service, "port", json!(443));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhooks_get_upstreams_v1_defaults() {
        let mut hook = json!({"name": "a.b.c", "rules": [{"operations": ["CREATE"]}],
            "clientConfig": {"service": {"namespace": "x", "name": "y"}}});
        default_webhook(WebhookKind::Mutating, &mut hook);
        assert_eq!(hook["failurePolicy"], "Fail");
        assert_eq!(hook["matchPolicy"], "Equivalent");
        assert_eq!(hook["namespaceSelector"], json!({}));
        assert_eq!(hook["objectSelector"], json!({}));
        assert_eq!(hook["timeoutSeconds"], 10);
        assert_eq!(hook["reinvocationPolicy"], "Never");
        assert_eq!(hook["rules"][0]["scope"], "*");
        assert_eq!(hook["clientConfig"]["service"]["port"], 443);
        assert!(hook.get("sideEffects").is_none());
        assert!(hook.get("admissionReviewVersions").is_none());

        let mut validating =
            json!({"name": "a.b.c", "timeoutSeconds": 3, "failurePolicy": "Ignore"});
        default_webhook(WebhookKind::Validating, &mut validating);
        assert_eq!(validating["timeoutSeconds"], 3);
        assert_eq!(validating["failurePolicy"], "Ignore");
        assert!(validating.get("reinvocationPolicy").is_none());
    }
}
