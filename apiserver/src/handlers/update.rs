//! PUT and PATCH of objects and of their status/finalize/approval
//! subresources, with resourceVersion preconditions, retries for
//! unconditional writes, and the finalizer rule (an object being deleted
//! goes away when its last finalizer does).

use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::Body;
use axum::response::Response;
use http::StatusCode;
use serde_json::{Value, json};
use skiff_store::Revision;

use super::create::{create_object, validated};
use super::storage::{self, FirstRead, Next, check_precondition, guaranteed_update};
use super::{Ctx, check_type, respond_stored};
use crate::admission::{WriteInfo, prepare_status_update, prepare_update};
use crate::managed_fields::{self, Scope};
use crate::object::{finalizers, is_terminating, meta_mut, meta_str, set_section_field};
use crate::patch::apply::{ApplyError, ApplyRequest, server_side_apply};
use crate::patch::{self, PatchType};
use crate::registry::{ResourceInfo, Subresource};
use crate::server::Inner;
use crate::status::ApiError;

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
    // A pod in its grace period stays until deleted again with grace 0.
    let in_grace = object["metadata"]["deletionGracePeriodSeconds"]
        .as_i64()
        .is_some_and(|g| g > 0);
    is_terminating(object)
        && finalizers(object).is_empty()
        && !info.strategy.held(object)
        && !in_grace
}

/// Validates and admits `new` over `old` and says what to write: nothing for
/// a no-op (the answer is unchanged `old`) or a dry run, the object's removal
/// when its last finalizer went, else `new` in its place (with the
/// allocation lock held, for kinds that allocate, and the quota charge, when a
/// quota counts the change).
pub(crate) async fn admit_update<'a>(
    inner: &'a Inner,
    info: &ResourceInfo,
    key: &str,
    old: &Value,
    mut new: Value,
    write: &WriteInfo,
    dry_run: bool,
) -> Result<Next<'a>, ApiError> {
    crate::object::omit_empty_metadata(&mut new);
    managed_fields::on_update(info, old, &mut new, write);
    // Clients cannot touch the deletion marks (they are carried from the
    // stored object), so a write that changes them is a delete's own step,
    // already admitted as that delete, as upstream admits it once.
    let deletion_step = ["deletionTimestamp", "deletionGracePeriodSeconds"]
        .iter()
        .any(|field| old["metadata"][field] != new["metadata"][field]);
    // Mutating webhooks see every update but a delete's own step and a
    // Scale write (whose object is the parent's; not sent to them here).
    if !deletion_step && write.subresource != Some(crate::registry::Subresource::Scale) {
        let attributes = write.webhook_attributes(
            info,
            crate::admission_plugins::Operation::Update,
            Some(old),
            dry_run,
        );
        crate::admission_plugins::webhook::mutate(inner, &attributes, &mut new).await?;
    }
    // Compared as upstream compares, after decoding: a quantity written
    // `0.5` (here by a mutating webhook) is the `500m` stored, and no
    // change. (A quantity that does not parse is refused by `validated`.)
    let _ = crate::protobuf::settle_quantities(&info.api_version(), info.kind, &mut new);
    if comparable(&new) == comparable(old) {
        return Ok(Next::Done(old.clone()));
    }
    let mut new = validated(info, &new, Some(old), write.subresource, &write.notes)?;
    let admitted = if deletion_step {
        crate::admission_plugins::Admitted::default()
    } else {
        crate::admission_plugins::admit(
            inner,
            &write.write_request(
                info,
                crate::admission_plugins::Operation::Update,
                Some(old),
                Some(&new),
                dry_run,
            ),
        )
        .await?
    };
    if dry_run {
        return Ok(Next::Done(new));
    }
    if ready_to_go(info, &new) {
        return Ok(Next::Remove {
            object: new,
            pinned: false,
        });
    }
    // A Service that became NodePort (or lost its address) gets what it
    // lacks; the lock is held until the write is stored.
    let allocation = info.strategy.allocate(inner, info, key, &mut new).await?;
    Ok(Next::Replace {
        object: new,
        held: storage::Held::new(allocation, admitted),
        pinned: false,
    })
}

/// The answer to an update or apply that may have created its object
/// instead (`created`): 201 then, 200 otherwise.
fn respond_written(ctx: &Ctx, created: &AtomicBool, stored: &Value) -> Result<Response, ApiError> {
    let code = if created.load(Ordering::Relaxed) {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    respond_stored(ctx, code, stored)
}

pub(super) async fn update(mut ctx: Ctx, body: Body) -> Result<Response, ApiError> {
    let mut object = ctx.object(body).await?;
    let info = ctx.info().clone();
    let name = ctx.name()?.to_string();
    check_type(&mut object, &info.api_version(), info.kind)?;
    name_as_on_url(&mut object, &name)?;
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
    let inner = &*ctx.inner;
    let dry_run = ctx.params.dry_run;
    let created = &AtomicBool::new(false);
    let (info, name, key, object, write) = (&info, &name, &key, &object, &write);
    let namespace = ctx.namespace();
    let stored = guaranteed_update(inner, info, key, name, FirstRead::Store, move |current| {
        Box::pin(async move {
            let Some(current) = current else {
                if info.create_on_update && sub.is_none() {
                    let object =
                        create_object(inner, info, namespace, object.clone(), write, dry_run)
                            .await?;
                    created.store(true, Ordering::Relaxed);
                    return Ok(Next::Done(object));
                }
                return Err(storage::not_found(info, name));
            };
            check_precondition(info, name, wanted, current.revision)?;
            let new = apply_to_current(info, sub, &current.object, object.clone());
            let next = admit_update(inner, info, key, &current.object, new, write, dry_run).await?;
            Ok(next.pinned(wanted.is_some()))
        })
    })
    .await?;
    respond_written(&ctx, created, &stored)
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
    let (key, object) = (&key, &object);
    guaranteed_update(inner, info, key, &name, FirstRead::Store, move |current| {
        Box::pin(async move {
            let Some(current) = current else {
                return match create_object(inner, info, None, object.clone(), write, false).await {
                    Err(ApiError::AlreadyExists { .. }) => Ok(Next::Retry),
                    other => other.map(Next::Done),
                };
            };
            let mut next = object.clone();
            prepare_update(info, &current.object, &mut next);
            admit_update(inner, info, key, &current.object, next, write, false).await
        })
    })
    .await
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
        Some(Subresource::Finalize) => with_field(
            current,
            "spec",
            "finalizers",
            spec_list(&incoming, "finalizers"),
        ),
        Some(Subresource::Approval) => {
            let conditions = incoming["status"]["conditions"].clone();
            with_field(current, "status", "conditions", conditions)
        }
        // Only the ephemeral containers change; the pod's validation judges
        // what changed in them.
        Some(Subresource::EphemeralContainers) => {
            let containers = spec_list(&incoming, "ephemeralContainers");
            let mut next = with_field(current, "spec", "ephemeralContainers", containers);
            // New containers are defaulted as any container is.
            info.strategy.apply_defaults(info, &mut next);
            next
        }
        // Only the containers' resources change (upstream drops whatever
        // else a resize sends); the pod's resize rules judge them.
        Some(Subresource::Resize) => {
            let mut next = current.clone();
            for list in ["containers", "initContainers"] {
                for container in crate::object::items_mut(&mut next, &["spec", list]) {
                    let name = &container["name"];
                    let sent = incoming["spec"][list]
                        .as_array()
                        .and_then(|sent| sent.iter().find(|c| &c["name"] == name));
                    if let (Some(sent), Some(fields)) = (sent, container.as_object_mut()) {
                        fields.insert("resources".into(), sent["resources"].clone());
                    }
                }
            }
            info.strategy.apply_defaults(info, &mut next);
            next
        }
        _ => {
            prepare_update(info, current, &mut incoming);
            incoming
        }
    }
}

/// The list `spec.<field>` of a subresource write, empty when it sent none
/// (a subresource write replaces the list it owns).
fn spec_list(incoming: &Value, field: &str) -> Value {
    match &incoming["spec"][field] {
        Value::Null => json!([]),
        list => list.clone(),
    }
}

/// A PatchOptions the patch cannot be made with.
/// A patched object that does not decode is upstream's 422 on the field
/// `patch`, not the 400 of a body that does not decode. The value shown is
/// the patched object for JSON and merge patches, and the patch itself as
/// Go prints a map for strategic merge patches, as upstream shows them.
fn undecodable_patch(kind: PatchType, bytes: &[u8], patched: &Value, error: &str) -> ApiError {
    let shown = match kind {
        PatchType::StrategicMerge => serde_json::from_slice::<Value>(bytes)
            .map(|patch| crate::go_format::go_value(&patch))
            .unwrap_or_default(),
        _ => patched.to_string(),
    };
    ApiError::Invalid {
        kind: String::new(),
        group: String::new(),
        name: String::new(),
        causes: vec![crate::status::FieldError::invalid("patch", shown, error)],
    }
}

fn invalid_patch_options(cause: crate::status::FieldError) -> ApiError {
    ApiError::Invalid {
        kind: "PatchOptions".into(),
        group: "meta.k8s.io".into(),
        name: String::new(),
        causes: vec![cause],
    }
}

/// `current` with `section.field` set to `value` and all else kept: what a
/// finalize (`spec.finalizers`) or approval (`status.conditions`) write
/// changes.
fn with_field(current: &Value, section: &str, field: &str, value: Value) -> Value {
    let mut next = current.clone();
    set_section_field(&mut next, section, field, value);
    next
}

/// Names `object` as the URL does when it carries no name; refuses one
/// that names another object.
fn name_as_on_url(object: &mut Value, name: &str) -> Result<(), ApiError> {
    match meta_str(object, "name") {
        Some(n) if n != name => Err(ApiError::BadRequest(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        ))),
        Some(_) => Ok(()),
        None => {
            meta_mut(object).insert("name".into(), json!(name));
            Ok(())
        }
    }
}

/// The configuration of a server-side apply: a YAML or JSON object of the
/// endpoint's kind, named as the URL names it.
fn applied_config(info: &ResourceInfo, name: &str, bytes: &[u8]) -> Result<Value, ApiError> {
    let mut config =
        patch::parse_applied(bytes).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    check_type(&mut config, &info.api_version(), info.kind)?;
    name_as_on_url(&mut config, name)?;
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
    server_side_apply(&request, live, config).map_err(apply_error)
}

/// The Status a failed server-side apply answers: 409 with a cause per
/// conflicting field, 400 for a configuration that cannot be applied.
pub(crate) fn apply_error(e: ApplyError) -> ApiError {
    match e {
        ApplyError::Conflicts(_) => ApiError::ApplyConflict {
            message: e.to_string(),
            causes: e.causes(),
        },
        ApplyError::Invalid(walk) => {
            ApiError::BadRequest(format!("failed to create typed patch object: {walk}"))
        }
        ApplyError::ManagedFieldsSet => ApiError::BadRequest(e.to_string()),
    }
}

/// Server-side apply to a missing object creates it from the applied body.
async fn apply_create(
    ctx: &Ctx,
    info: &ResourceInfo,
    config: &Value,
    write: &WriteInfo,
) -> Result<Value, ApiError> {
    let object = apply_config(ctx, info, write, &json!({}), config)?;
    create_object(
        &ctx.inner,
        info,
        ctx.namespace(),
        object,
        write,
        ctx.params.dry_run,
    )
    .await
}

pub(super) async fn patch(ctx: Ctx, body: Body) -> Result<Response, ApiError> {
    let kind = ctx.patch_type()?;
    let bytes = crate::body::read(&ctx.headers, body).await?;
    let info = ctx.info().clone();
    let name = ctx.name()?.to_string();
    let key = ctx.key()?;
    let sub = ctx.target.subresource;
    let mut write = ctx.write_info(sub);
    if kind == PatchType::Apply {
        if ctx.params.field_manager.is_none() {
            return Err(invalid_patch_options(crate::status::FieldError::required(
                "fieldManager",
                "is required for apply patch",
            )));
        }
        write.apply = true;
    } else if ctx.params.force.is_some() {
        return Err(invalid_patch_options(crate::status::FieldError::forbidden(
            "force",
            "may not be specified for non-apply patch",
        )));
    }
    let config = match kind {
        PatchType::Apply => Some(applied_config(&info, &name, &bytes)?),
        _ => None,
    };
    let inner = &*ctx.inner;
    let created = &AtomicBool::new(false);
    let (ctx, info, name, key, config, write, bytes) =
        (&ctx, &info, &name, &key, &config, &write, &bytes);
    let stored = guaranteed_update(inner, info, key, name, FirstRead::Store, move |current| {
        Box::pin(async move {
            let Some(current) = current else {
                if let Some(config) = config.as_ref().filter(|_| sub.is_none()) {
                    let object = apply_create(ctx, info, config, write).await?;
                    created.store(true, Ordering::Relaxed);
                    return Ok(Next::Done(object));
                }
                return Err(storage::not_found(info, name));
            };
            // Patches apply to the whole object, resourceVersion included,
            // so a JSON patch may test or set it; an applied configuration
            // names it only to ask for it as a precondition.
            let mut base = current.object.clone();
            let patched = match &config {
                Some(config) => {
                    meta_mut(&mut base).remove("resourceVersion");
                    Some(apply_config(ctx, info, write, &base, config)?)
                }
                None => None,
            };
            let mut patched = match patched {
                Some(applied) => Ok(applied),
                None => patch::apply(kind, &base, bytes),
            }
            .map_err(|e| match e {
                patch::PatchError::Malformed(m) => ApiError::BadRequest(m),
                // Upstream answers a JSON patch that cannot be applied
                // with its generic 422, the operation's error its cause.
                patch::PatchError::Apply(why) if kind == PatchType::Json => {
                    ApiError::PatchNotApplied(why)
                }
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
            check_precondition(info, name, wanted, current.revision)?;
            // A patch that names the resourceVersion is pinned to it: a lost
            // race is the client's 409, not a silent retry on newer data.
            let wanted =
                wanted.filter(|_| config.is_some() || patch::names_resource_version(kind, bytes));
            if meta_str(&patched, "name") != Some(name.as_str()) {
                return Err(ApiError::BadRequest(format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    meta_str(&patched, "name").unwrap_or("")
                )));
            }
            check_type(&mut patched, &info.api_version(), info.kind)?;
            if kind != PatchType::Apply
                && let Err(error) = info.roundtrip(&patched)
            {
                return Err(undecodable_patch(kind, bytes, &patched, &error));
            }
            let new = apply_to_current(info, sub, &current.object, patched);
            let next = admit_update(
                inner,
                info,
                key,
                &current.object,
                new,
                write,
                ctx.params.dry_run,
            )
            .await?;
            Ok(next.pinned(wanted.is_some()))
        })
    })
    .await?;
    respond_written(ctx, created, &stored)
}
