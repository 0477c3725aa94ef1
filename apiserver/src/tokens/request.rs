//! `POST .../serviceaccounts/<name>/token`: a TokenRequest in, the same
//! request with its defaults filled and a signed token in `status` out.

use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use super::claims::{Claims, KubernetesClaim, ObjectRef};
use super::{
    DEFAULT_EXPIRATION_SECONDS, ISSUER, MIN_EXPIRATION_SECONDS, read_core, read_core_found,
};
use crate::authn::UserInfo;
use crate::object::{meta_str, now_rfc3339};
use crate::request_notes::RequestNotes;
use crate::server::Inner;
use crate::status::{ApiError, FieldError, json_response};

/// Longer lifetimes are refused (upstream caps them at 2^32 seconds).
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

const TOKEN_REQUEST: (&str, &str) = ("authentication.k8s.io/v1", "TokenRequest");

/// The handler behind the `token` subresource of service accounts.
pub(crate) async fn create_token(
    State(inner): State<Arc<Inner>>,
    Path((namespace, name)): Path<(String, String)>,
    Extension(user): Extension<UserInfo>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let notes = RequestNotes::default();
    let mut response = match issue(&inner, &user, &notes, &namespace, &name, &headers, body).await {
        Ok(object) => json_response(StatusCode::CREATED, &object),
        Err(e) => e.into_response(),
    };
    notes.write_to(&mut response);
    response
}

fn invalid(name: &str, causes: Vec<FieldError>) -> ApiError {
    ApiError::Invalid {
        kind: "TokenRequest".into(),
        group: "authentication.k8s.io".into(),
        name: name.to_string(),
        causes,
    }
}

async fn issue(
    inner: &Inner,
    user: &UserInfo,
    notes: &RequestNotes,
    namespace: &str,
    name: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<Value, ApiError> {
    let bytes = crate::body::read(headers, body).await?;
    let mut request = if bytes.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        crate::body::decode_object(headers, &bytes)?
    };
    crate::handlers::check_type(&mut request, TOKEN_REQUEST.0, TOKEN_REQUEST.1)?;
    let account = read_core_found(inner, "serviceaccounts", namespace, name)?;
    let accounts = inner
        .registry
        .get("", "v1", "serviceaccounts")
        .ok_or_else(|| ApiError::Internal("serviceaccounts are not registered".into()))?;
    // Nothing to hold: quota counts no subresource or delete.
    let _admitted = crate::admission_plugins::admit(
        inner,
        &crate::admission_plugins::WriteRequest {
            user,
            notes,
            operation: crate::admission_plugins::Operation::Create,
            info: &accounts,
            subresource: Some(crate::registry::Subresource::Token),
            old: Some(&account),
            new: Some(&request),
            dry_run: false,
        },
    )
    .await?;
    let spec = &request["spec"];

    let expiration = match &spec["expirationSeconds"] {
        Value::Null => DEFAULT_EXPIRATION_SECONDS,
        v => match v.as_i64() {
            Some(s) if (MIN_EXPIRATION_SECONDS..=MAX_EXPIRATION_SECONDS).contains(&s) => s,
            _ => {
                return Err(invalid(
                    name,
                    vec![FieldError::invalid(
                        "spec.expirationSeconds",
                        v.clone(),
                        "may not specify a duration less than 10 minutes",
                    )],
                ));
            }
        },
    };
    let audiences: Vec<String> = match spec["audiences"].as_array() {
        Some(list) if !list.is_empty() => list
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        _ => vec![ISSUER.to_string()],
    };

    let mut kubernetes = KubernetesClaim {
        namespace: namespace.to_string(),
        serviceaccount: ObjectRef {
            name: name.to_string(),
            uid: meta_str(&account, "uid").unwrap_or_default().to_string(),
        },
        node: None,
        pod: None,
        secret: None,
    };
    let bound = &spec["boundObjectRef"];
    if bound.is_object() {
        let kind = bound["kind"].as_str().unwrap_or_default();
        let resource = match kind {
            "Pod" => "pods",
            "Secret" => "secrets",
            "Node" => "nodes",
            other => {
                return Err(invalid(
                    name,
                    vec![FieldError::invalid(
                        "spec.boundObjectRef.kind",
                        other,
                        "supported values: \"Pod\", \"Node\", \"Secret\"",
                    )],
                ));
            }
        };
        let bound_name = bound["name"].as_str().unwrap_or_default();
        let object = read_core_found(inner, resource, namespace, bound_name)?;
        let uid = meta_str(&object, "uid").unwrap_or_default().to_string();
        if let Some(wanted) = bound["uid"].as_str().filter(|u| !u.is_empty())
            && wanted != uid
        {
            return Err(ApiError::Conflict {
                resource: resource.to_string(),
                group: String::new(),
                name: bound_name.to_string(),
                detail: format!(
                    "the UID in the bound object reference ({wanted}) does not match the UID in record ({uid})"
                ),
            });
        }
        let reference = Some(ObjectRef {
            name: bound_name.to_string(),
            uid,
        });
        match kind {
            "Pod" => {
                kubernetes.pod = reference;
                kubernetes.node = node_of(inner, namespace, &object);
            }
            "Node" => kubernetes.node = reference,
            _ => kubernetes.secret = reference,
        }
    }

    let now = jiff::Timestamp::now().as_second();
    let claims = Claims {
        iss: ISSUER.to_string(),
        sub: super::user_name(namespace, name),
        aud: audiences.clone(),
        exp: now + expiration,
        iat: now,
        nbf: now,
        jti: uuid::Uuid::new_v4().to_string(),
        kubernetes,
    };
    let token = inner
        .tokens
        .sign(&claims)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut spec = spec.clone();
    if !spec.is_object() {
        spec = json!({});
    }
    spec["audiences"] = json!(audiences);
    spec["expirationSeconds"] = json!(expiration);
    let expires = jiff::Timestamp::from_second(claims.exp)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json!({
        "kind": TOKEN_REQUEST.1,
        "apiVersion": TOKEN_REQUEST.0,
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": now_rfc3339()},
        "spec": spec,
        "status": {"token": token, "expirationTimestamp": expires},
    }))
}

/// The node a pod is bound to, as upstream names it in a pod-bound token;
/// `None` for a pod not yet scheduled or a node it cannot read (the token
/// is still issued, without node facts).
fn node_of(inner: &Inner, namespace: &str, pod: &Value) -> Option<ObjectRef> {
    let node_name = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty())?;
    let node = read_core(inner, "nodes", namespace, node_name).ok()??;
    Some(ObjectRef {
        name: node_name.to_string(),
        uid: meta_str(&node, "uid")?.to_string(),
    })
}
