//! `labelSelector` and `fieldSelector` query parameters, and label selector
//! objects (`matchLabels`/`matchExpressions`) as workloads carry them.

use crate::options;
use serde_json::{Value, json};
use skiff_apiserver::fuzzing;
use skiff_apiserver::selectors::{FieldSelector, LabelSelector};

/// Checks one input; panics where skiff answers it wrongly.
pub fn run(data: &[u8]) {
    let Some((choice, rest)) = options(data) else {
        return;
    };
    let object = json!({
        "metadata": {"name": "web-0", "namespace": "prod", "labels": {"app": "web", "tier": "front", "v": "2"}},
        "spec": {"nodeName": "node-1", "hostNetwork": false},
        "status": {"phase": "Running"}
    });
    match choice % 3 {
        0 => {
            let Ok(text) = std::str::from_utf8(rest) else {
                return;
            };
            if let Ok(selector) = LabelSelector::parse(text) {
                let _ = selector.matches(&object);
                // The scale subresource publishes a selector as text; read
                // back, it must select the same.
                let query = selector.to_query();
                let again = LabelSelector::parse(&query)
                    .unwrap_or_else(|e| panic!("{text:?} printed as {query:?}, refused: {}", e.0));
                assert_eq!(again, selector, "{text:?} printed as {query:?}");
            }
        }
        1 => {
            let Ok(text) = std::str::from_utf8(rest) else {
                return;
            };
            if let Ok(selector) = FieldSelector::parse(text, fuzzing::pod_field_labels()) {
                let _ = selector.matches(&object);
                let _ = selector.exact("metadata.name");
            }
        }
        _ => {
            let Ok(value) = serde_json::from_slice::<Value>(rest) else {
                return;
            };
            if let Ok(selector) = LabelSelector::from_object(&value) {
                let _ = selector.matches(&object);
                let _ = selector.to_query();
            }
        }
    }
}
