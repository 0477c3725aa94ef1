//! Entry points for the fuzz targets in `fuzz/` (hidden from the docs, not an API):
//! each hands untrusted bytes to the code a request reaches, with the handlers'
//! own error mapping, so a target finds what a client could trigger.

use std::sync::{Arc, OnceLock};

use http::{HeaderMap, HeaderValue};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::flowcontrol::v1::FlowSchema;
use serde_json::Value;

use crate::admission::WriteInfo;
use crate::kinds::GroupResource;
use crate::managed_fields::set::FieldSet;
use crate::managed_fields::{self, Operation, Scope, Writer};
use crate::patch::apply::{ApplyRequest, server_side_apply};
use crate::registry::{Registry, ResourceInfo, Subresource};
use crate::status::ApiError;

/// Decodes a create/update body sent with `content_type` (JSON, YAML,
/// protobuf or anything else), as `handlers` do before admission.
pub fn decode_body(content_type: Option<&str>, bytes: &[u8]) -> Result<Value, ApiError> {
    let mut headers = HeaderMap::new();
    if let Some(value) = content_type.and_then(|c| HeaderValue::from_str(c).ok()) {
        headers.insert(http::header::CONTENT_TYPE, value);
    }
    crate::body::decode_object(&headers, bytes)
}

/// The resources the field-manager targets write to: a built-in kind with
/// list keys (Deployment), one without status (ConfigMap), and a group the
/// built-in schema does not know (the deduced schema of custom resources).
fn resource(which: u8) -> Arc<ResourceInfo> {
    builtin(match which % 3 {
        0 => GroupResource::of::<Deployment>(),
        1 => GroupResource::of::<ConfigMap>(),
        _ => GroupResource::of::<FlowSchema>(),
    })
}

/// A built-in `v1` resource's registry entry.
fn builtin(resource: GroupResource) -> Arc<ResourceInfo> {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY
        .get_or_init(Registry::builtin)
        .get(resource.group, "v1", resource.resource)
        .expect("built-in resource present in the registry")
}

/// The field labels a `fieldSelector` on pods may name, as the registry
/// lists them (the selectors target parses against the server's own list).
pub fn pod_field_labels() -> &'static [&'static str] {
    builtin(GroupResource::of::<Pod>()).field_labels
}

/// Server-side apply of `config` (already parsed from the apply body) onto
/// `live` by `manager`, as `PATCH` with `application/apply-patch+yaml` does:
/// `which` picks the resource, `status` the status subresource.
pub fn apply(
    which: u8,
    status: bool,
    manager: &str,
    force: bool,
    live: &Value,
    config: &Value,
) -> Result<Value, ApiError> {
    let info = resource(which);
    let subresource = (status && info.has(Subresource::Status)).then_some(Subresource::Status);
    let writer = Writer {
        manager: manager.to_string(),
        operation: Operation::Apply,
        api_version: info.api_version(),
        subresource: subresource.map(|s| s.name().to_string()),
    };
    let request = ApplyRequest {
        schema: managed_fields::for_group(info.group),
        scope: Scope::of(&info, subresource),
        writer: &writer,
        force,
    };
    server_side_apply(&request, live, config).map_err(crate::handlers::apply_error)
}

/// Records an update from `old` to `new` (whose body may carry its own
/// `managedFields`) by `manager`, as every non-apply write does; returns `new`
/// with the entries stored.
pub fn track_update(which: u8, manager: &str, old: &Value, new: &Value) -> Value {
    let info = resource(which);
    let write = WriteInfo {
        manager: manager.to_string(),
        subresource: None,
        apply: false,
        user: crate::authn::UserInfo::default(),
        notes: crate::request_notes::RequestNotes::default(),
    };
    let mut new = new.clone();
    managed_fields::on_update(&info, old, &mut new, &write);
    new
}

/// A FieldsV1 document read and written back in canonical form, or why it
/// is not one.
pub fn fields_v1_canonical(value: &Value) -> Result<Value, String> {
    FieldSet::from_fields_v1(value)
        .map(|set| set.to_fields_v1())
        .map_err(|e| e.to_string())
}
