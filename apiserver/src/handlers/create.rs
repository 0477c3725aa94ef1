//! POST to a collection: create an object.

use axum::body::Body;
use axum::response::Response;
use http::StatusCode;
use serde_json::{Value, json};

use super::storage::{self, WriteError};
use super::{Ctx, check_type, respond_stored};
use crate::admission::{WriteInfo, generate_name, prepare_create};
use crate::object::{is_terminating, meta_mut, meta_str};
use crate::registry::ResourceInfo;
use crate::server::Inner;
use crate::status::ApiError;

/// How many generated names are tried before giving up.
const GENERATE_NAME_ATTEMPTS: usize = 8;

pub(super) async fn create(mut ctx: Ctx, body: Body) -> Result<Response, ApiError> {
    let object = ctx.object(body).await?;
    ctx.notes.note_object(&object);
    let write = ctx.write_info(None);
    let created = create_object(
        &ctx.inner,
        ctx.info(),
        ctx.namespace(),
        object,
        &write,
        ctx.params.dry_run,
    )
    .await?;
    respond_stored(&ctx, StatusCode::CREATED, &created)
}

/// Fails unless the namespace exists and is not terminating.
pub(crate) async fn check_namespace(
    inner: &Inner,
    info: &ResourceInfo,
    namespace: &str,
    name: &str,
) -> Result<(), ApiError> {
    let ns_info = inner
        .registry
        .get("", "v1", "namespaces")
        .ok_or(ApiError::PathNotFound)?;
    // As upstream's NamespaceLifecycle admission: the cache answers, and a
    // namespace it does not hold yet is looked up in the store.
    let ns = storage::lookup(inner, &ns_info, &ns_info.key(None, namespace))
        .await?
        .ok_or_else(|| storage::not_found(&ns_info, namespace))?;
    if is_terminating(&ns) || ns["status"]["phase"] == "Terminating" {
        return Err(ApiError::Forbidden {
            resource: info.qualified(),
            group: info.group.to_string(),
            name: name.to_string(),
            detail: format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            ),
            causes: vec![(
                "NamespaceTerminating".into(),
                format!("namespace {namespace} is being terminated"),
                "metadata.namespace".into(),
            )],
        });
    }
    Ok(())
}

/// Admission (metadata, defaults, mutating admission — the built-in step,
/// then the webhooks — and validation) for a new object.
pub(crate) async fn admit_new(
    inner: &Inner,
    info: &ResourceInfo,
    object: &mut Value,
    write: &WriteInfo,
    dry_run: bool,
) -> Result<Value, ApiError> {
    // As decoded upstream: quantities in canonical form (`cpu: 2` as "2"),
    // which is what admission and validation read. (One that does not
    // parse is refused with the body's decode error below.)
    let _ = crate::protobuf::settle_quantities(&info.api_version(), info.kind, object);
    crate::object::omit_empty_metadata(object);
    prepare_create(info, object, write);
    crate::admission_plugins::mutate_create(inner, info, object);
    let attributes = write.webhook_attributes(
        info,
        crate::admission_plugins::Operation::Create,
        None,
        dry_run,
    );
    crate::admission_plugins::webhook::mutate(inner, &attributes, object).await?;
    info.strategy.finish_create(object);
    validated(info, object, None, None, &write.notes)
}

/// The typed form of `object` once it passes validation (against `old` on
/// an update). A field of the wrong type is the 400 of an undecodable body
/// even where a rule also fails on it: upstream decodes before it validates,
/// so `"containerPort": "80"` is a type error, not an out-of-range port.
/// What passes may still get the kind's warnings, noted in `notes`.
pub(crate) fn validated(
    info: &ResourceInfo,
    object: &Value,
    old: Option<&Value>,
    subresource: Option<crate::registry::Subresource>,
    notes: &crate::request_notes::RequestNotes,
) -> Result<Value, ApiError> {
    let errors = crate::validation::validate(info, object, old, subresource);
    let typed = info
        .roundtrip(object)
        .map_err(|e| cannot_handle(info, &e))?;
    if !errors.is_empty() {
        return Err(invalid(info, object, errors));
    }
    for warning in crate::validation::warnings(info, object, old, subresource) {
        notes.warn(warning);
    }
    Ok(typed)
}

pub(crate) fn invalid(
    info: &ResourceInfo,
    object: &Value,
    causes: Vec<crate::status::FieldError>,
) -> ApiError {
    let name = meta_str(object, "name")
        .or_else(|| meta_str(object, "generateName"))
        .unwrap_or("");
    ApiError::Invalid {
        kind: info.kind.to_string(),
        group: info.group.to_string(),
        name: name.to_string(),
        causes,
    }
}

/// The 400 upstream returns when a body does not decode into the type.
pub(crate) fn cannot_handle(info: &ResourceInfo, error: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "{kind} in version \"{v}\" cannot be handled as a {kind}: {error}",
        kind = info.kind,
        v = info.version
    ))
}

/// Creates `object` (in `info`'s version) under `namespace` from the path;
/// returns the created object with its resourceVersion (none on dry run).
pub(crate) async fn create_object(
    inner: &Inner,
    info: &ResourceInfo,
    namespace: Option<&str>,
    mut object: Value,
    write: &WriteInfo,
    dry_run: bool,
) -> Result<Value, ApiError> {
    check_type(&mut object, &info.api_version(), info.kind)?;
    if info.namespaced {
        match (
            namespace,
            meta_str(&object, "namespace").filter(|s| !s.is_empty()),
        ) {
            (Some(path_ns), Some(body_ns)) if path_ns != body_ns => {
                return Err(ApiError::BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request".into(),
                ));
            }
            (Some(path_ns), _) => {
                meta_mut(&mut object).insert("namespace".into(), json!(path_ns));
            }
            _ => {}
        }
    }
    let generate = meta_str(&object, "name").is_none_or(str::is_empty)
        && meta_str(&object, "generateName").is_some_and(|g| !g.is_empty());
    if info.namespaced
        && let Some(ns) = meta_str(&object, "namespace").filter(|s| !s.is_empty())
    {
        let name = meta_str(&object, "name").unwrap_or("");
        check_namespace(inner, info, ns, name).await?;
    }
    info.strategy.admit_create(inner, info, &mut object).await?;
    // Before anything can store or echo it: the node password leaves the
    // request here (see the plugin).
    crate::admission_plugins::node_password::admit(inner, info, &write.user, &mut object, dry_run)
        .await?;
    let attempts = if generate { GENERATE_NAME_ATTEMPTS } else { 1 };
    for _ in 0..attempts {
        // Only a generated name can be tried again, so only then is the
        // request's object kept for the next attempt.
        let mut candidate = if generate {
            object.clone()
        } else {
            std::mem::take(&mut object)
        };
        if generate {
            let prefix = meta_str(&candidate, "generateName")
                .unwrap_or("")
                .to_string();
            meta_mut(&mut candidate).insert("name".into(), json!(generate_name(&prefix)));
        }
        let mut admitted = admit_new(inner, info, &mut candidate, write, dry_run).await?;
        // Held until the object is stored: a quota's next check counts this
        // write until its cache shows it; a write that fails charges nothing.
        let mut counted = crate::admission_plugins::admit(
            inner,
            &write.write_request(
                info,
                crate::admission_plugins::Operation::Create,
                None,
                Some(&admitted),
                dry_run,
            ),
        )
        .await?;
        let name = meta_str(&admitted, "name").unwrap_or("").to_string();
        let ns = meta_str(&admitted, "namespace").map(String::from);
        let key = info.key(ns.as_deref(), &name);
        // Held until the object is stored, so no two get the same address.
        let mut allocating = info
            .strategy
            .allocate(inner, info, &key, &mut admitted)
            .await?;
        if dry_run {
            if storage::read(inner, info, &key).await?.is_some() {
                return Err(already_exists(info, &name));
            }
            return Ok(admitted);
        }
        match storage::create(inner, info, &key, admitted).await {
            Ok(created) => {
                counted.stored(&created);
                if let Some(allocation) = allocating.as_mut() {
                    allocation.stored();
                }
                return Ok(created);
            }
            Err(WriteError::Conflict) if generate => continue,
            Err(WriteError::Conflict) => return Err(already_exists(info, &name)),
            Err(WriteError::Api(e)) => return Err(e),
        }
    }
    Err(ApiError::ServiceUnavailable(format!(
        "failed to find an unused name for generateName {:?}",
        meta_str(&object, "generateName").unwrap_or("")
    )))
}

fn already_exists(info: &ResourceInfo, name: &str) -> ApiError {
    ApiError::AlreadyExists {
        resource: info.qualified(),
        group: info.group.to_string(),
        name: name.to_string(),
    }
}
