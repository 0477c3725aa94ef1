//! DELETE of one object or a collection: graceful pod deletion, finalizers
//! and deletionTimestamp, propagation policies, namespaces that terminate
//! instead of vanishing.

use axum::body::Body;
use axum::response::Response;
use http::StatusCode;
use serde_json::{Value, json};
use skiff_store::Revision;

use super::storage::{self, FirstRead, Next, guaranteed_update};
use super::update::admit_update;
use super::{Ctx, respond};
use crate::admission::WriteInfo;
use crate::object::{finalizers, is_terminating, meta_mut, meta_str, now_rfc3339, rfc3339_in};
use crate::registry::ResourceInfo;
use crate::server::Inner;
use crate::status::ApiError;

/// DeleteOptions from the body and the query string (the body wins).
#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    pub dry_run: bool,
}

impl DeleteOptions {
    pub(super) fn from_request(ctx: &Ctx, body: &[u8]) -> Result<Self, ApiError> {
        let mut options = DeleteOptions {
            grace_period_seconds: ctx.params.grace_period_seconds,
            propagation_policy: ctx.params.propagation_policy.clone(),
            dry_run: ctx.params.dry_run,
            ..Default::default()
        };
        if let Some(orphan) = ctx.params.orphan_dependents {
            options
                .propagation_policy
                .get_or_insert(if orphan { "Orphan" } else { "Background" }.into());
        }
        if !body.iter().all(u8::is_ascii_whitespace) {
            let value = crate::body::decode_object(&ctx.headers, body)?;
            options.merge_body(&value)?;
        }
        Ok(options)
    }

    /// Applies the fields of a DeleteOptions object.
    pub(super) fn merge_body(&mut self, value: &Value) -> Result<(), ApiError> {
        if let Some(g) = value.get("gracePeriodSeconds").filter(|v| !v.is_null()) {
            self.grace_period_seconds = Some(g.as_i64().ok_or_else(|| {
                ApiError::BadRequest("gracePeriodSeconds must be an integer".into())
            })?);
        }
        if let Some(p) = value.get("propagationPolicy").and_then(Value::as_str) {
            self.propagation_policy = Some(p.to_string());
        }
        if let Some(orphan) = value.get("orphanDependents").and_then(Value::as_bool) {
            self.propagation_policy
                .get_or_insert(if orphan { "Orphan" } else { "Background" }.into());
        }
        if let Some(uid) = value["preconditions"]["uid"].as_str() {
            self.precondition_uid = Some(uid.to_string());
        }
        if let Some(rv) = value["preconditions"]["resourceVersion"].as_str() {
            self.precondition_rv = Some(rv.to_string());
        }
        if value["dryRun"]
            .as_array()
            .is_some_and(|d| d.iter().any(|v| v == "All"))
        {
            self.dry_run = true;
        }
        if let Some(p) = &self.propagation_policy
            && !["Orphan", "Background", "Foreground"].contains(&p.as_str())
        {
            return Err(ApiError::BadRequest(format!(
                "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
            )));
        }
        Ok(())
    }
}

pub(super) async fn delete(ctx: Ctx, body: Body) -> Result<Response, ApiError> {
    let bytes = crate::body::read(&ctx.headers, body).await?;
    let options = DeleteOptions::from_request(&ctx, &bytes)?;
    let write = ctx.write_info(None);
    let deleted = delete_object(
        &ctx.inner,
        ctx.info(),
        &ctx.key()?,
        ctx.name()?,
        &options,
        &write,
    )
    .await?;
    respond(StatusCode::OK, &deleted)
}

/// Deletes (or starts deleting) one object; returns its state afterwards.
pub(crate) async fn delete_object(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
    name: &str,
    options: &DeleteOptions,
    write: &WriteInfo,
) -> Result<Value, ApiError> {
    info.strategy.check_delete(info, name)?;
    let pinned = options.precondition_rv.is_some();
    guaranteed_update(inner, info, key, name, FirstRead::Store, move |current| {
        Box::pin(async move {
            let current = current.ok_or_else(|| storage::not_found(info, name))?;
            check_preconditions(info, name, &current.object, current.revision, options)?;
            // Nothing to hold: quota counts no delete.
            let _admitted = crate::admission_plugins::admit(
                inner,
                &crate::admission_plugins::WriteRequest {
                    user: &write.user,
                    notes: &write.notes,
                    operation: crate::admission_plugins::Operation::Delete,
                    info,
                    subresource: None,
                    old: Some(&current.object),
                    new: None,
                    dry_run: options.dry_run,
                },
            )
            .await?;
            Ok(match plan(info, &current.object, options) {
                Plan::Remove if options.dry_run => Next::Done(current.object),
                Plan::Remove => Next::Remove {
                    object: current.object,
                    pinned,
                },
                Plan::Keep => Next::Done(current.object),
                Plan::Mark(next) => admit_update(
                    inner,
                    info,
                    key,
                    &current.object,
                    next,
                    write,
                    options.dry_run,
                )
                .await?
                .pinned(pinned),
            })
        })
    })
    .await
}

fn check_preconditions(
    info: &ResourceInfo,
    name: &str,
    current: &Value,
    revision: Revision,
    options: &DeleteOptions,
) -> Result<(), ApiError> {
    if let Some(uid) = &options.precondition_uid {
        let actual = meta_str(current, "uid").unwrap_or("");
        if uid != actual {
            return Err(storage::conflict(
                info,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                ),
            ));
        }
    }
    if let Some(rv) = &options.precondition_rv
        && *rv != revision.to_string()
    {
        return Err(storage::conflict(
            info,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {revision}"
            ),
        ));
    }
    Ok(())
}

/// What a delete does to an object.
enum Plan {
    /// Gone from the store now.
    Remove,
    /// Already terminating and nothing to change.
    Keep,
    /// Stays, marked (deletionTimestamp, finalizers); stored via update.
    Mark(Value),
}

fn plan(info: &ResourceInfo, current: &Value, options: &DeleteOptions) -> Plan {
    let mut next = current.clone();
    let mut wanted = finalizers(current);
    match options.propagation_policy.as_deref() {
        Some("Orphan") => add_unique(&mut wanted, "orphan"),
        Some("Foreground") => add_unique(&mut wanted, "foregroundDeletion"),
        _ => {}
    }
    // Kinds without graceful deletion have none: zero, and never shorter.
    let graceful = info
        .strategy
        .deletion_grace(current, options.grace_period_seconds);
    let grace = graceful.unwrap_or(0);
    let held = info.strategy.held(current);
    if is_terminating(current) {
        let shorter = graceful.is_some_and(|g| {
            g < current["metadata"]["deletionGracePeriodSeconds"]
                .as_i64()
                .unwrap_or(0)
        });
        if finalizers(current).is_empty() && !held && (grace == 0 || graceful.is_none()) {
            return Plan::Remove;
        }
        if !shorter {
            return Plan::Keep;
        }
    } else if wanted.is_empty() && grace == 0 && !held {
        return Plan::Remove;
    }
    let meta = meta_mut(&mut next);
    if !wanted.is_empty() {
        meta.insert("finalizers".into(), json!(wanted));
    }
    meta.insert(
        "deletionTimestamp".into(),
        json!(if grace > 0 {
            rfc3339_in(grace)
        } else {
            now_rfc3339()
        }),
    );
    meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
    if info.tracks_generation {
        let generation = current["metadata"]["generation"].as_i64().unwrap_or(0);
        meta.insert("generation".into(), json!(generation + 1));
    }
    info.strategy.mark_deleting(&mut next);
    Plan::Mark(next)
}

fn add_unique(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|f| f == item) {
        list.push(item.to_string());
    }
}

pub(super) async fn delete_collection(ctx: Ctx, body: Body) -> Result<Response, ApiError> {
    let bytes = crate::body::read(&ctx.headers, body).await?;
    let options = DeleteOptions::from_request(&ctx, &bytes)?;
    let info = ctx.info().clone();
    let (labels, fields) = ctx.collection_selectors()?;
    let snapshot = ctx.inner.cache(&info)?.snapshot();
    let prefix = info.collection_prefix(ctx.namespace());
    let write = ctx.write_info(None);
    let mut items = Vec::new();
    for (key, object) in snapshot.under(&prefix) {
        let object = info.from_storage(object.to_value());
        if !labels.matches(&object) || !fields.matches(&object) {
            continue;
        }
        let name = meta_str(&object, "name").unwrap_or("").to_string();
        match delete_object(&ctx.inner, &info, key, &name, &options, &write).await {
            Ok(deleted) => items.push(deleted),
            Err(ApiError::NotFound { .. }) | Err(ApiError::Forbidden { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let list = json!({
        "kind": info.list_kind(),
        "apiVersion": info.api_version(),
        "metadata": { "resourceVersion": ctx.inner.cache(&info)?.revision().to_string() },
        "items": items,
    });
    respond(StatusCode::OK, &list)
}
