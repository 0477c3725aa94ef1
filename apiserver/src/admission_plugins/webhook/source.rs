//! The webhooks the stored configurations declare, read from the API
//! server's own watch caches of the two configuration kinds and parsed
//! once per change of their content (not once per request), in the order
//! upstream calls them: configurations by name, then each configuration's
//! webhooks as listed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use parking_lot::Mutex;
use serde_json::Value;
use skiff_store::Revision;

use crate::object::strings;
use crate::selectors::LabelSelector;
use crate::server::Inner;

const GROUP: &str = "admissionregistration.k8s.io";

/// One rule of a webhook (defaults already applied when it was stored).
#[derive(Debug, Clone, Default)]
pub(super) struct Rule {
    pub operations: Vec<String>,
    pub api_groups: Vec<String>,
    pub api_versions: Vec<String>,
    pub resources: Vec<String>,
    pub scope: String,
}

/// Where a webhook is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Endpoint {
    Url(String),
    Service {
        namespace: String,
        name: String,
        path: String,
        port: u16,
    },
}

/// One webhook of a stored configuration.
#[derive(Debug, Clone)]
pub(super) struct Hook {
    /// The configuration's name.
    pub configuration: String,
    pub name: String,
    pub rules: Vec<Rule>,
    /// `failurePolicy: Ignore`.
    pub ignore_failures: bool,
    /// `matchPolicy: Exact`.
    pub exact: bool,
    /// `None` when the stored selector does not parse (then every call
    /// fails as a call error, subject to the failure policy).
    pub namespace_selector: Option<LabelSelector>,
    pub object_selector: Option<LabelSelector>,
    pub side_effects: String,
    pub timeout: Duration,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks only).
    pub reinvoke_if_needed: bool,
    pub review_versions: Vec<String>,
    pub endpoint: Option<Endpoint>,
    /// PEM certificates the webhook's serving certificate must chain to;
    /// `None`: the system roots and the cluster CA.
    pub ca_bundle: Option<Vec<u8>>,
}

impl Hook {
    /// Whether the webhook has no side effects a dry run could cause.
    pub(super) fn dry_run_safe(&self) -> bool {
        matches!(self.side_effects.as_str(), "None" | "NoneOnDryRun")
    }
}

/// The parsed hooks of one configuration kind, remembered with the cache
/// revision they were read at.
#[derive(Default)]
struct Parsed {
    at: Option<Revision>,
    hooks: Arc<Vec<Hook>>,
}

/// The webhooks currently configured, per kind.
#[derive(Default)]
pub(crate) struct WebhookSource {
    /// Off while the server writes its own start-up objects, so a webhook
    /// that is down cannot keep the server from starting (upstream's
    /// bootstrap retries in the background instead).
    active: AtomicBool,
    mutating: Mutex<Parsed>,
    validating: Mutex<Parsed>,
}

impl WebhookSource {
    /// Starts calling webhooks (once the start-up objects are written).
    pub(crate) fn activate(&self) {
        self.active.store(true, Ordering::Release);
    }

    /// The mutating webhooks, in calling order.
    pub(super) fn mutating(&self, inner: &Inner) -> Arc<Vec<Hook>> {
        if !self.active.load(Ordering::Acquire) {
            return Arc::default();
        }
        current(inner, "mutatingwebhookconfigurations", &self.mutating)
    }

    /// The validating webhooks, in calling order.
    pub(super) fn validating(&self, inner: &Inner) -> Arc<Vec<Hook>> {
        if !self.active.load(Ordering::Acquire) {
            return Arc::default();
        }
        current(inner, "validatingwebhookconfigurations", &self.validating)
    }
}

fn current(inner: &Inner, resource: &str, parsed: &Mutex<Parsed>) -> Arc<Vec<Hook>> {
    let Some(info) = inner.registry.get(GROUP, "v1", resource) else {
        return Arc::default();
    };
    let Ok(cache) = inner.cache(&info) else {
        return Arc::default();
    };
    let snapshot = cache.snapshot();
    let mut parsed = parsed.lock();
    if parsed.at != Some(snapshot.revision) {
        // The snapshot is ordered by key, and so by configuration name.
        let hooks = snapshot
            .objects
            .values()
            .flat_map(|configuration| hooks_of(&configuration.value()))
            .collect();
        *parsed = Parsed {
            at: Some(snapshot.revision),
            hooks: Arc::new(hooks),
        };
    }
    parsed.hooks.clone()
}

/// The webhooks of one stored configuration.
pub(super) fn hooks_of(configuration: &Value) -> Vec<Hook> {
    let config_name = configuration["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    configuration["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|hook| parse_hook(&config_name, hook))
        .collect()
}

fn selector(value: &Value) -> Option<LabelSelector> {
    if value.is_null() {
        return Some(LabelSelector::default());
    }
    LabelSelector::from_object(value).ok()
}

fn parse_hook(configuration: &str, hook: &Value) -> Hook {
    let rules = hook["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|rule| Rule {
            operations: strings(&rule["operations"]),
            api_groups: strings(&rule["apiGroups"]),
            api_versions: strings(&rule["apiVersions"]),
            resources: strings(&rule["resources"]),
            scope: rule["scope"].as_str().unwrap_or("*").to_string(),
        })
        .collect();
    let client = &hook["clientConfig"];
    let endpoint = if let Some(url) = client["url"].as_str() {
        Some(Endpoint::Url(url.to_string()))
    } else if client["service"].is_object() {
        let service = &client["service"];
        Some(Endpoint::Service {
            namespace: service["namespace"].as_str().unwrap_or("").to_string(),
            name: service["name"].as_str().unwrap_or("").to_string(),
            path: service["path"].as_str().unwrap_or("").to_string(),
            port: service["port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(443),
        })
    } else {
        None
    };
    let ca_bundle = client["caBundle"]
        .as_str()
        .filter(|b| !b.is_empty())
        .map(|b| BASE64.decode(b).unwrap_or_default());
    Hook {
        configuration: configuration.to_string(),
        name: hook["name"].as_str().unwrap_or("").to_string(),
        rules,
        ignore_failures: hook["failurePolicy"] == "Ignore",
        exact: hook["matchPolicy"] == "Exact",
        namespace_selector: selector(&hook["namespaceSelector"]),
        object_selector: selector(&hook["objectSelector"]),
        side_effects: hook["sideEffects"]
            .as_str()
            .unwrap_or("Unknown")
            .to_string(),
        timeout: Duration::from_secs(hook["timeoutSeconds"].as_u64().unwrap_or(10).clamp(1, 30)),
        reinvoke_if_needed: hook["reinvocationPolicy"] == "IfNeeded",
        review_versions: strings(&hook["admissionReviewVersions"]),
        endpoint,
        ca_bundle,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stored_webhook_parses_with_its_policies() {
        let configuration = json!({"metadata": {"name": "cfg"}, "webhooks": [
            {"name": "a.example.com", "failurePolicy": "Ignore", "matchPolicy": "Exact",
             "sideEffects": "NoneOnDryRun", "timeoutSeconds": 3, "reinvocationPolicy": "IfNeeded",
             "admissionReviewVersions": ["v1"],
             "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
             "clientConfig": {"service": {"namespace": "ns", "name": "svc", "path": "/m"}, "caBundle": "QUJD"}},
            {"name": "b.example.com", "sideEffects": "Some", "clientConfig": {"url": "https://h:1/x"}}]});
        let hooks = hooks_of(&configuration);
        assert_eq!(hooks.len(), 2);
        let a = &hooks[0];
        assert_eq!(a.configuration, "cfg");
        assert!(a.ignore_failures && a.exact && a.reinvoke_if_needed && a.dry_run_safe());
        assert_eq!(a.timeout, Duration::from_secs(3));
        assert_eq!(a.rules[0].scope, "*");
        assert_eq!(a.ca_bundle.as_deref(), Some(&b"ABC"[..]));
        assert_eq!(
            a.endpoint,
            Some(Endpoint::Service {
                namespace: "ns".into(),
                name: "svc".into(),
                path: "/m".into(),
                port: 443
            })
        );
        let b = &hooks[1];
        assert!(!b.ignore_failures && !b.exact && !b.dry_run_safe());
        assert_eq!(b.endpoint, Some(Endpoint::Url("https://h:1/x".into())));
    }
}
