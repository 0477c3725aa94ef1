//! PUT and PATCH of objects and of their status/finalize/approval
//! subresources, with resourceVersion preconditions, retries for
//! unconditional writes, and the finalizer rule (an object being deleted
//! goes away when its last finalizer does).

use axum::body::Body;
use axum::response::Response;
use http::StatusCode;
use serde_json::{Value, json};
use skiff_store::Revision;

use super::create::{cannot_handle, create_object, invalid};
use super::storage::{self, MODIFIED, WriteError};
use super::{Ctx, check_type, respond};
use crate::admission::{WriteInfo, prepare_status_update, prepare_update};
use crate::managed_fields::{self, Scope};
use crate::object::{finalizers, is_terminating, meta_mut, meta_str, set_field};
use crate::patch::apply::{ApplyError, ApplyRequest, server_side_apply};
use crate::patch::{self, PATCH_MEDIA_TYPES, PatchType};
use crate::registry::{ResourceInfo, Subresource};
use crate::server::Inner;
use crate::status::ApiError;

/// Retries of an unconditional write that lost a race.
const RETRIES: usize = 8;

/// The resourceVersion a body asks to write over, if any.
pub(crate) fn precondition(object: &Value) -> Result<Option<Revision>, ApiError> {
    match meta_str(object, "resourceVersion").filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(rv) => rv.parse().map(Some).map_err(|_| {
            ApiError::BadRequest(format!("invalid resourceVersion {rv:?} in object metadata"))
        }),
    }
}

/// The stored form without volatile fields, to detect no-op writes
/// (managedFields count: a write that only changes ownership is stored).
fn comparable(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    copy
}

/// Whether an object marked for deletion has nothing left holding it.
fn ready_to_go(info: &ResourceInfo, object: &Value) -> bool {
    let ns_held = info.group.is_empty()
        && info.resource == "namespaces"
        && object["spec"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
    // A pod in its grace period stays until deleted again with grace 0.
    let in_grace = object["metadata"]["deletionGracePeriodSeconds"]
        .as_i64()
        .is_some_and(|g| g > 0);
    is_terminating(object) && finalizers(object).is_empty() && !ns_held && !in_grace
}

/// Validates and stores `new` over `old` (at `old_revision`). Returns the
/// object as now stored: unchanged `old` for a no-op, or the final state with
/// the deletion's resourceVersion when the last finalizer went.
pub(crate) async fn commit(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
    (old, old_revision): (&Value, Revision),
    mut new: Value,
    write: &WriteInfo,
    dry_run: bool,
) -> Result<Value, WriteError> {
    managed_fields::on_update(info, old, &mut new, write);
    if comparable(&new) == comparable(old) {
        return Ok(old.clone());
    }
    let errors = crate::validation::validate(info, &new, Some(old));
    if !errors.is_empty() {
        return Err(WriteError::Api(invalid(info, &new, errors)));
    }
    let mut new = info
        .roundtrip(&new)
        .map_err(|e| WriteError::Api(cannot_handle(info, &e)))?;
    crate::admission_plugins::admit(
        inner,
        &crate::admission_plugins::WriteRequest {
            user: &write.user,
            operation: crate::admission_plugins::Operation::Update,
            info,
            subresource: write.subresource,
            old: Some(old),
            new: Some(&new),
        },
    )
    .await?;
    if dry_run {
        return Ok(new);
    }
    if ready_to_go(info, &new) {
        return storage::delete(inner, info, key, new, old_revision).await;
    }
    // A Service that became NodePort (or lost its address) gets what it
    // lacks; the lock is held until the write is stored.
    let _allocating = if info.group.is_empty() && info.resource == "services" {
        let guard = inner.services.lock().await;
        let others = inner.cache(info)?.snapshot();
        inner
            .services
            .allocate(
                &mut new,
                others
                    .objects
                    .iter()
                    .filter(|(k, _)| k.as_str() != key)
                    .map(|(_, v)| &**v),
            )
            .map_err(|causes| WriteError::Api(invalid(info, &new, causes)))?;
        Some(guard)
    } else {
        None
    };
    storage::update(inner, info, key, new, old_revision).await
}

pub(super) async fn update(ctx: Ctx, body: Body) -> Result<Response, ApiError> {
    let bytes = crate::body::read(&ctx.headers, body).await?;
    let mut object = crate::body::decode_object(&ctx.headers, &bytes)?;
    let info = ctx.info().clone();
    let name = ctx.name()?.to_string();
    check_type(&mut object, &info.api_version(), info.kind)?;
    match meta_str(&object, "name") {
        Some(n) if n != name => {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        Some(_) => {}
        None => {
            meta_mut(&mut object).insert("name".into(), json!(name));
        }
    }
    if let (Some(path_ns), Some(body_ns)) = (ctx.namespace(), meta_str(&object, "namespace"))
        && !body_ns.is_empty()
        && path_ns != body_ns
    {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        ));
    }
    if let Some(ns) = ctx.namespace() {
        meta_mut(&mut object).insert("namespace".into(), json!(ns));
    }
    let wanted = precondition(&object)?;
    let sub = ctx.target.subresource;
    let write = ctx.write_info(sub);
    let key = ctx.key()?;
    let _serialised = ctx.inner.key_locks.lock(&key).await;
    for _ in 0..RETRIES {
        let Some((current, revision)) = storage::read(&ctx.inner, &info, &key).await? else {
            if info.create_on_update && sub.is_none() {
                let created = create_object(
                    &ctx.inner,
                    &info,
                    ctx.namespace(),
                    object,
                    &write,
                    ctx.params.dry_run,
                )
                .await?;
                return respond(StatusCode::CREATED, &created);
            }
            return Err(storage::not_found(&info, &name));
        };
        if wanted.is_some_and(|w| w != revision) {
            return Err(storage::conflict(&info, &name, MODIFIED));
        }
        let new = apply_to_current(&info, sub, &current, object.clone());
        match commit(
            &ctx.inner,
            &info,
            &key,
            (&current, revision),
            new,
            &write,
            ctx.params.dry_run,
        )
        .await
        {
            Ok(stored) => return respond(StatusCode::OK, &stored),
            Err(WriteError::Conflict) if wanted.is_none() => continue,
            Err(WriteError::Conflict) => return Err(storage::conflict(&info, &name, MODIFIED)),
            Err(WriteError::Api(e)) => return Err(e),
        }
    }
    Err(storage::conflict(&info, &name, MODIFIED))
}

/// Creates `object` or replaces what is stored under its name (system
/// objects the server maintains itself, such as the `kubernetes` endpoints).
pub(crate) async fn upsert(
    inner: &Inner,
    info: &ResourceInfo,
    object: Value,
    write: &WriteInfo,
) -> Result<Value, ApiError> {
    let name = meta_str(&object, "name").unwrap_or("").to_string();
    let key = info.key(meta_str(&object, "namespace"), &name);
    for _ in 0..RETRIES {
        let Some((current, revision)) = storage::read(inner, info, &key).await? else {
            match create_object(inner, info, None, object.clone(), write, false).await {
                Err(ApiError::AlreadyExists { .. }) => continue,
                other => return other,
            }
        };
        let mut next = object.clone();
        prepare_update(info, &current, &mut next);
        match commit(inner, info, &key, (&current, revision), next, write, false).await {
            Ok(stored) => return Ok(stored),
            Err(WriteError::Conflict) => continue,
            Err(WriteError::Api(e)) => return Err(e),
        }
    }
    Err(storage::conflict(info, &name, MODIFIED))
}

/// What a write through `sub` (or the main resource) makes of `current`.
/// managedFields the body carries are kept for `commit` to judge (upstream
/// honours them on main-resource updates; apply sends its computed ones).
fn apply_to_current(
    info: &ResourceInfo,
    sub: Option<Subresource>,
    current: &Value,
    incoming: Value,
) -> Value {
    let provided = incoming.pointer("/metadata/managedFields").cloned();
    let mut next = written_object(info, sub, current, incoming);
    if let Some(entries) = provided {
        meta_mut(&mut next).insert("managedFields".into(), entries);
    }
    next
}

fn written_object(
    info: &ResourceInfo,
    sub: Option<Subresource>,
    current: &Value,
    mut incoming: Value,
) -> Value {
    match sub {
        Some(Subresource::Status) => prepare_status_update(current, &incoming),
        Some(Subresource::Finalize) => {
            let mut next = current.clone();
            let finalizers = incoming["spec"]["finalizers"].clone();
            let mut spec = next
                .get("spec")
                .filter(|s| s.is_object())
                .cloned()
                .unwrap_or_else(|| json!({}));
            set_field(
                &mut spec,
                "finalizers",
                if finalizers.is_null() {
                    json!([])
                } else {
                    finalizers
                },
            );
            set_field(&mut next, "spec", spec);
            next
        }
        Some(Subresource::Approval) => {
            let mut next = current.clone();
            let conditions = incoming["status"]["conditions"].clone();
            let mut status = next
                .get("status")
                .filter(|s| s.is_object())
                .cloned()
                .unwrap_or_else(|| json!({}));
            set_field(&mut status, "conditions", conditions);
            set_field(&mut next, "status", status);
            next
        }
        _ => {
            prepare_update(info, current, &mut incoming);
            incoming
        }
    }
}

/// The configuration of a server-side apply: a YAML or JSON object of the
/// endpoint's kind, named as the URL names it.
fn applied_config(info: &ResourceInfo, name: &str, bytes: &[u8]) -> Result<Value, ApiError> {
    let mut config =
        patch::parse_applied(bytes).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    check_type(&mut config, &info.api_version(), info.kind)?;
    match meta_str(&config, "name") {
        Some(n) if n != name => {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        Some(_) => {}
        None => {
            meta_mut(&mut config).insert("name".into(), json!(name));
        }
    }
    Ok(config)
}

/// Server-side apply of `config` onto `live` (`{}` when creating), with
/// upstream's conflict Status when other managers own what would change.
fn apply_config(
    ctx: &Ctx,
    info: &ResourceInfo,
    write: &WriteInfo,
    live: &Value,
    config: &Value,
) -> Result<Value, ApiError> {
    let writer = managed_fields::writer(info, write);
    let request = ApplyRequest {
        schema: managed_fields::for_group(info.group),
        scope: Scope::of(info, write.subresource),
        writer: &writer,
        force: ctx.params.force.unwrap_or(false),
    };
    server_side_apply(&request, live, config).map_err(|e| match e {
        ApplyError::Conflicts(_) => ApiError::ApplyConflict {
            message: e.to_string(),
            causes: e.causes(),
        },
        ApplyError::Invalid(walk) => {
            ApiError::BadRequest(format!("failed to create typed patch object: {walk}"))
        }
        ApplyError::ManagedFieldsSet => ApiError::BadRequest(e.to_string()),
    })
}

/// Server-side apply to a missing object creates it from the applied body.
async fn apply_create(
    ctx: &Ctx,
    info: &ResourceInfo,
    config: &Value,
    write: &WriteInfo,
) -> Result<Response, ApiError> {
    let object = apply_config(ctx, info, write, &json!({}), config)?;
    let created = create_object(
        &ctx.inner,
        info,
        ctx.namespace(),
        object,
        write,
        ctx.params.dry_run,
    )
    .await?;
    respond(StatusCode::CREATED, &created)
}

pub(super) async fn patch(ctx: Ctx, body: Body) -> Result<Response, ApiError> {
    let content_type = crate::body::content_type(&ctx.headers).unwrap_or_default();
    let kind = PatchType::from_content_type(&content_type)
        .ok_or_else(|| ApiError::UnsupportedMediaType(PATCH_MEDIA_TYPES.into()))?;
    let bytes = crate::body::read(&ctx.headers, body).await?;
    let info = ctx.info().clone();
    let name = ctx.name()?.to_string();
    let key = ctx.key()?;
    let sub = ctx.target.subresource;
    let mut write = ctx.write_info(sub);
    if kind == PatchType::Apply {
        if ctx.params.field_manager.is_none() {
            return Err(ApiError::Invalid {
                kind: "PatchOptions".into(),
                group: "meta.k8s.io".into(),
                name: String::new(),
                causes: vec![crate::status::FieldError::required(
                    "fieldManager",
                    "is required for apply patch",
                )],
            });
        }
        write.apply = true;
    } else if ctx.params.force.is_some() {
        return Err(ApiError::Invalid {
            kind: "PatchOptions".into(),
            group: "meta.k8s.io".into(),
            name: String::new(),
            causes: vec![crate::status::FieldError::forbidden(
                "force",
                "may not be specified for non-apply patch",
            )],
        });
    }
    let config = match kind {
        PatchType::Apply => Some(applied_config(&info, &name, &bytes)?),
        _ => None,
    };
    let _serialised = ctx.inner.key_locks.lock(&key).await;
    for _ in 0..RETRIES {
        let Some((current, revision)) = storage::read(&ctx.inner, &info, &key).await? else {
            if let Some(config) = config.as_ref().filter(|_| sub.is_none()) {
                return apply_create(&ctx, &info, config, &write).await;
            }
            return Err(storage::not_found(&info, &name));
        };
        let mut base = current.clone();
        meta_mut(&mut base).remove("resourceVersion");
        let patched = match &config {
            Some(config) => Some(apply_config(&ctx, &info, &write, &base, config)?),
            None => None,
        };
        let mut patched = match patched {
            Some(applied) => Ok(applied),
            None => patch::apply(kind, &base, &bytes),
        }
        .map_err(|e| match e {
            patch::PatchError::Malformed(m) => ApiError::BadRequest(m),
            patch::PatchError::Apply(m) => ApiError::Invalid {
                kind: info.kind.to_string(),
                group: info.group.to_string(),
                name: name.clone(),
                causes: vec![crate::status::FieldError::invalid("", Value::Null, m)],
            },
        })?;
        if !patched.is_object() {
            return Err(ApiError::BadRequest(
                "the patch produced something other than an object".into(),
            ));
        }
        let wanted = precondition(&patched)?;
        if wanted.is_some_and(|w| w != revision) {
            return Err(storage::conflict(&info, &name, MODIFIED));
        }
        if meta_str(&patched, "name") != Some(name.as_str()) {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta_str(&patched, "name").unwrap_or("")
            )));
        }
        check_type(&mut patched, &info.api_version(), info.kind)?;
        let new = apply_to_current(&info, sub, &current, patched);
        match commit(
            &ctx.inner,
            &info,
            &key,
            (&current, revision),
            new,
            &write,
            ctx.params.dry_run,
        )
        .await
        {
            Ok(stored) => return respond(StatusCode::OK, &stored),
            Err(WriteError::Conflict) if wanted.is_none() => continue,
            Err(WriteError::Conflict) => return Err(storage::conflict(&info, &name, MODIFIED)),
            Err(WriteError::Api(e)) => return Err(e),
        }
    }
    Err(storage::conflict(&info, &name, MODIFIED))
}
