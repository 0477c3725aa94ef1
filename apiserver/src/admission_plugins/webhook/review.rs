//! The `admission.k8s.io/v1` AdmissionReview on the wire: the request a
//! webhook is sent (upstream's fields: uid, kind and resource as the hook
//! sees them, requestKind/requestResource as the client sent them, name,
//! namespace, operation, userInfo, object, oldObject, dryRun, options) and
//! the checks an answer must pass before it counts, with upstream's
//! wording for the ones it fails.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;
use serde_json::{Value, json};

use super::Attributes;
use crate::admission_plugins::Operation;
use crate::registry::ResourceInfo;

/// The request half of a review, as sent.
pub(super) struct ReviewRequest {
    pub uid: String,
    pub body: Value,
}

fn group_version_kind(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

fn group_version_resource(info: &ResourceInfo) -> Value {
    json!({"group": info.group, "version": info.version, "resource": info.resource})
}

/// The kind a request through `info` (and its subresource) speaks.
fn kind_of(attributes: &Attributes<'_>, info: &ResourceInfo) -> Value {
    match attributes.request.subresource.and_then(|s| s.kind()) {
        Some((group, version, kind)) => group_version_kind(group, version, kind),
        None => group_version_kind(info.group, info.version, info.kind),
    }
}

/// The options object upstream sends for the operation.
fn options(attributes: &Attributes<'_>) -> Value {
    let kind = match attributes.request.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
    };
    let mut options = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
    if attributes.request.dry_run {
        options["dryRun"] = json!(["All"]);
    }
    if let Some(manager) = attributes.field_manager.filter(|_| kind != "DeleteOptions") {
        options["fieldManager"] = json!(manager);
    }
    options
}

/// Builds the review of one write for one webhook: `sent` is the resource
/// version the hook is told about, `object`/`old` already in that version.
pub(super) fn request(
    attributes: &Attributes<'_>,
    sent: &ResourceInfo,
    object: Option<&Value>,
    old: Option<&Value>,
) -> ReviewRequest {
    let uid = uuid::Uuid::new_v4().to_string();
    let subject = object.or(old);
    let name = subject
        .and_then(|o| o["metadata"]["name"].as_str())
        .unwrap_or("");
    let mut request = json!({
        "uid": uid,
        "kind": kind_of(attributes, sent),
        "resource": group_version_resource(sent),
        "requestKind": kind_of(attributes, attributes.request.info),
        "requestResource": group_version_resource(attributes.request.info),
        "name": name,
        "operation": attributes.request.operation.name(),
        "userInfo": user_info(attributes.request.user),
        "object": object.cloned().unwrap_or(Value::Null),
        "oldObject": old.cloned().unwrap_or(Value::Null),
        "dryRun": attributes.request.dry_run,
        "options": options(attributes),
    });
    if let Some(sub) = attributes.request.subresource {
        request["subResource"] = json!(sub.name());
        request["requestSubResource"] = json!(sub.name());
    }
    // A Namespace's own requests name it here too, as upstream's do.
    let namespace = attributes.namespace(subject);
    if !namespace.is_empty() {
        request["namespace"] = json!(namespace);
    }
    ReviewRequest {
        uid: uid.clone(),
        body: json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": request,
        }),
    }
}

fn user_info(user: &crate::authn::UserInfo) -> Value {
    let mut info = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        info["uid"] = json!(user.uid);
    }
    if !user.extra.is_empty() {
        info["extra"] = json!(user.extra);
    }
    info
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    response: Option<Response>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    allowed: bool,
    status: Option<Value>,
    patch: Option<String>,
    patch_type: Option<String>,
    #[serde(default)]
    audit_annotations: BTreeMap<String, String>,
    #[serde(default)]
    warnings: Vec<String>,
}

/// An answer that passed the checks.
#[derive(Debug, Default)]
pub(super) struct Verdict {
    pub allowed: bool,
    /// The refusal's Status (code, reason, message, details), if given.
    pub status: Option<Value>,
    /// A mutating webhook's JSON patch, decoded.
    pub patch: Option<Vec<u8>>,
    pub audit_annotations: BTreeMap<String, String>,
    pub warnings: Vec<String>,
}

/// Checks an answer as upstream does; the error is the text after
/// `received invalid webhook response: `.
pub(super) fn verify(uid: &str, mutating: bool, body: &[u8]) -> Result<Verdict, String> {
    let envelope: Envelope = serde_json::from_slice(body)
        .map_err(|e| format!("could not decode the AdmissionReview: {e}"))?;
    if envelope.api_version != "admission.k8s.io/v1" || envelope.kind != "AdmissionReview" {
        return Err(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}, Kind={}",
            envelope.api_version, envelope.kind
        ));
    }
    let response = envelope
        .response
        .ok_or_else(|| "response was absent".to_string())?;
    if response.uid != uid {
        return Err(format!(
            "expected response.uid=\"{uid}\", got \"{}\"",
            response.uid
        ));
    }
    let patch = match (&response.patch, &response.patch_type) {
        (Some(_), _) if !mutating => return Err("unsupported fields in response: patch".into()),
        (_, Some(_)) if !mutating => {
            return Err("unsupported fields in response: patchType".into());
        }
        (Some(patch), None) if !patch.is_empty() => {
            return Err("webhook returned response.patch but not response.patchType".into());
        }
        (Some(patch), Some(kind)) if !patch.is_empty() => {
            if kind != "JSONPatch" {
                return Err(format!(
                    "webhook returned invalid response.patchType of \"{kind}\""
                ));
            }
            Some(
                BASE64
                    .decode(patch)
                    .map_err(|e| format!("response.patch is not base64: {e}"))?,
            )
        }
        _ => None,
    };
    Ok(Verdict {
        allowed: response.allowed,
        status: response.status,
        patch,
        audit_annotations: response.audit_annotations,
        warnings: response.warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(response: Value) -> Vec<u8> {
        serde_json::to_vec(
            &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": response}),
        )
        .unwrap()
    }

    #[test]
    fn an_answer_must_carry_the_requests_uid() {
        let body = answer(json!({"uid": "other", "allowed": true}));
        assert_eq!(
            verify("mine", false, &body).unwrap_err(),
            "expected response.uid=\"mine\", got \"other\""
        );
        assert!(verify("other", false, &body).unwrap().allowed);
    }

    #[test]
    fn only_a_v1_admission_review_counts() {
        let body = serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1beta1",
            "kind": "AdmissionReview", "response": {"uid": "u", "allowed": true}}))
        .unwrap();
        assert_eq!(
            verify("u", false, &body).unwrap_err(),
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got admission.k8s.io/v1beta1, Kind=AdmissionReview"
        );
        assert!(verify("u", false, b"not json").is_err());
    }

    #[test]
    fn patches_are_for_mutating_webhooks_only_and_must_be_json_patches() {
        let patch = BASE64.encode(br#"[{"op":"add","path":"/x","value":1}]"#);
        let body =
            answer(json!({"uid": "u", "allowed": true, "patch": patch, "patchType": "JSONPatch"}));
        assert_eq!(
            verify("u", false, &body).unwrap_err(),
            "unsupported fields in response: patch"
        );
        let verdict = verify("u", true, &body).unwrap();
        assert_eq!(
            verdict.patch.as_deref(),
            Some(&br#"[{"op":"add","path":"/x","value":1}]"#[..])
        );
        let untyped = answer(json!({"uid": "u", "allowed": true, "patch": patch}));
        assert_eq!(
            verify("u", true, &untyped).unwrap_err(),
            "webhook returned response.patch but not response.patchType"
        );
        let merge =
            answer(json!({"uid": "u", "allowed": true, "patch": patch, "patchType": "Merge"}));
        assert_eq!(
            verify("u", true, &merge).unwrap_err(),
            "webhook returned invalid response.patchType of \"Merge\""
        );
    }
}
