//! The FlowSchemas' `Dangling` condition, as upstream's priority-and-fairness
//! configuration consumer keeps it: `False` (reason `Found`) while the
//! PriorityLevelConfiguration a schema names exists, `True` (`NotFound`)
//! when it does not — what `kubectl get flowschemas` prints as MISSINGPL.
//! Written through the API, like any controller's status.

use std::sync::Arc;

use k8s_openapi::api::flowcontrol::v1::FlowSchema;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::kinds::GroupResource;
use crate::server::Inner;

const GROUP: &str = "flowcontrol.apiserver.k8s.io";

/// The condition `schema` should carry, given the levels that exist:
/// `(status, reason, message)`.
fn dangling(schema: &Value, levels: &[String]) -> (&'static str, &'static str, String) {
    let level = schema["spec"]["priorityLevelConfiguration"]["name"]
        .as_str()
        .unwrap_or_default();
    if levels.iter().any(|l| l == level) {
        (
            "False",
            "Found",
            format!(
                "This FlowSchema references the PriorityLevelConfiguration object named {level:?} and it exists"
            ),
        )
    } else {
        (
            "True",
            "NotFound",
            format!(
                "This FlowSchema references the PriorityLevelConfiguration object named {level:?} but there is no such object"
            ),
        )
    }
}

/// The status patch that sets `schema`'s Dangling condition, keeping its
/// other conditions; `None` when it already says so.
fn patch_for(schema: &Value, levels: &[String]) -> Option<Value> {
    let (status, reason, message) = dangling(schema, levels);
    let condition = crate::object::condition_update(
        &schema["status"]["conditions"],
        "Dangling",
        (status, reason, &message),
    )?;
    let mut conditions: Vec<Value> = schema["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["type"] != "Dangling")
        .cloned()
        .collect();
    conditions.push(condition);
    Some(json!({"status": {"conditions": conditions}}))
}

/// One round: every schema whose condition is not what it should be is
/// patched; returns whether all writes went through. The server runs the
/// first round before it serves, so its start-up writes are done by then.
pub(crate) async fn sync(inner: &Inner, client: &kube::Client) -> bool {
    let levels: Vec<String> = inner
        .cached_objects(GROUP, "v1", "prioritylevelconfigurations")
        .iter()
        .filter_map(|l| l["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    let api: Api<FlowSchema> = Api::all(client.clone());
    let writes = inner
        .cached_objects(GROUP, "v1", "flowschemas")
        .into_iter()
        .filter_map(|schema| {
            let name = schema["metadata"]["name"].as_str()?.to_string();
            let patch = patch_for(&schema, &levels)?;
            let api = api.clone();
            Some(async move {
                let result = api
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                match result {
                    Ok(_) => true,
                    // Deleted meanwhile: nothing to keep.
                    Err(kube::Error::Api(s)) if s.code == 404 => true,
                    Err(error) => {
                        tracing::warn!(flowschema = %name, %error, "updating the Dangling condition");
                        false
                    }
                }
            })
        })
        .collect::<Vec<_>>();
    futures::future::join_all(writes)
        .await
        .into_iter()
        .all(|ok| ok)
}

/// Keeps every FlowSchema's Dangling condition current until the server
/// shuts down, on any change of schemas or levels (after the first round,
/// [`sync`] before serving; `synced` says whether it went through).
pub(crate) async fn run(inner: Arc<Inner>, client: kube::Client, synced: bool) {
    let followed = [
        GroupResource::new(GROUP, "flowschemas"),
        GroupResource::new(GROUP, "prioritylevelconfigurations"),
    ];
    crate::server::follow_caches(&inner, synced, None, &followed, || sync(&inner, &client)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_is_dangling_only_while_its_level_is_missing() {
        let schema = |conditions: Value| {
            json!({"metadata": {"name": "fs"},
                   "spec": {"priorityLevelConfiguration": {"name": "pl"}},
                   "status": {"conditions": conditions}})
        };
        let levels = vec!["pl".to_string()];
        let found = patch_for(&schema(json!([])), &levels).unwrap();
        let condition = &found["status"]["conditions"][0];
        assert_eq!(
            (
                condition["type"].as_str(),
                condition["status"].as_str(),
                condition["reason"].as_str()
            ),
            (Some("Dangling"), Some("False"), Some("Found"))
        );
        assert_eq!(
            condition["message"],
            "This FlowSchema references the PriorityLevelConfiguration object named \"pl\" and it exists"
        );
        // Already current: no write.
        assert_eq!(
            patch_for(&schema(found["status"]["conditions"].clone()), &levels),
            None
        );
        // The level gone: dangling, other conditions kept.
        let other = json!({"type": "Other", "status": "True"});
        let missing = patch_for(&schema(json!([other.clone(), condition.clone()])), &[]).unwrap();
        let conditions = missing["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions[0], other);
        assert_eq!(conditions[1]["status"], "True");
        assert_eq!(conditions[1]["reason"], "NotFound");
    }
}
