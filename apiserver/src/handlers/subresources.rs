//! The scale, binding and eviction subresources.

use axum::body::Body;
use axum::response::Response;
use http::StatusCode;
use serde_json::{Value, json};

use super::delete::{DeleteOptions, delete_object};
use super::storage::{self, FirstRead, Next, check_precondition, guaranteed_update};
use super::update::{admit_update, precondition};
use super::{Ctx, check_type, respond};
use crate::admission::prepare_update;
use crate::object::{condition_true, meta_str, set_field};
use crate::patch;
use crate::registry::ResourceInfo;
use crate::registry::Subresource;
use crate::selectors::LabelSelector;
use crate::status::{ApiError, FieldError, success_status};

/// The autoscaling/v1 Scale view of a workload, as its kind shapes it.
fn scale_of(info: &ResourceInfo, object: &Value) -> Value {
    info.strategy.scale(info, object)
}

pub(super) async fn get_scale(ctx: Ctx) -> Result<Response, ApiError> {
    let (object, _) =
        storage::read_existing(&ctx.inner, ctx.info(), &ctx.key()?, ctx.name()?).await?;
    respond(StatusCode::OK, &scale_of(ctx.info(), &object))
}

pub(super) async fn update_scale(ctx: Ctx, body: Body) -> Result<Response, ApiError> {
    let bytes = crate::body::read(&ctx.headers, body).await?;
    let scale = crate::body::decode_object(&ctx.headers, &bytes)?;
    write_scale(ctx, |_| Ok(scale.clone())).await
}

pub(super) async fn patch_scale(ctx: Ctx, body: Body) -> Result<Response, ApiError> {
    let kind = ctx.patch_type()?;
    let bytes = crate::body::read(&ctx.headers, body).await?;
    write_scale(ctx, move |current| {
        let mut base = current.clone();
        if let Some(m) = base["metadata"].as_object_mut() {
            m.remove("resourceVersion");
        }
        patch::apply(kind, &base, &bytes).map_err(|e| ApiError::BadRequest(e.to_string()))
    })
    .await
}

/// Sets `spec.replicas` of the parent from the Scale `make_scale` returns
/// (given the current Scale), honouring its resourceVersion.
async fn write_scale(
    ctx: Ctx,
    make_scale: impl Fn(&Value) -> Result<Value, ApiError> + Sync,
) -> Result<Response, ApiError> {
    let info = ctx.info().clone();
    let name = ctx.name()?.to_string();
    let key = ctx.key()?;
    let write = ctx.write_info(ctx.target.subresource);
    let inner = &*ctx.inner;
    let dry_run = ctx.params.dry_run;
    let (info, name, key, write, make_scale) = (&info, &name, &key, &write, &make_scale);
    let stored = guaranteed_update(inner, info, key, name, FirstRead::Store, move |current| {
        Box::pin(async move {
            let current = current.ok_or_else(|| storage::not_found(info, name))?;
            let mut scale = make_scale(&scale_of(info, &current.object))?;
            check_type(&mut scale, "autoscaling/v1", "Scale")?;
            let wanted = precondition(&scale)?;
            check_precondition(info, name, wanted, current.revision)?;
            let replicas = match scale["spec"]["replicas"].as_i64() {
                Some(r) if r >= 0 => r,
                other => {
                    return Err(ApiError::Invalid {
                        kind: "Scale".into(),
                        group: "autoscaling".into(),
                        name: name.clone(),
                        causes: vec![FieldError::invalid(
                            "spec.replicas",
                            other.map(Value::from).unwrap_or(Value::Null),
                            "must be greater than or equal to 0",
                        )],
                    });
                }
            };
            let mut next = current.object.clone();
            info.strategy.set_replicas(info, &mut next, replicas);
            prepare_update(info, &current.object, &mut next);
            let next =
                admit_update(inner, info, key, &current.object, next, write, dry_run).await?;
            Ok(next.pinned(wanted.is_some()))
        })
    })
    .await?;
    respond(StatusCode::OK, &scale_of(info, &stored))
}

/// POST to the legacy `bindings` collection: binds the pod the Binding's
/// own name names, as `pods/<name>/binding` would (upstream serves both).
pub(super) async fn bind_named_in_body(mut ctx: Ctx, body: Body) -> Result<Response, ApiError> {
    let binding = ctx.object(body).await?;
    let name = meta_str(&binding, "name").unwrap_or("").to_string();
    if name.is_empty() {
        return Err(ApiError::BadRequest(
            "resource name may not be empty".into(),
        ));
    }
    let pods = ctx
        .inner
        .registry
        .get("", "v1", "pods")
        .ok_or_else(|| ApiError::Internal("pods are not served".into()))?;
    ctx.target.info = pods;
    ctx.target.name = Some(name);
    ctx.target.subresource = Some(Subresource::Binding);
    bind(ctx, binding).await
}

/// POST pods/<name>/binding: assigns the pod to `target.name`, once.
pub(super) async fn bind(ctx: Ctx, mut binding: Value) -> Result<Response, ApiError> {
    check_type(&mut binding, "v1", "Binding")?;
    let info = ctx.info().clone();
    let name = ctx.name()?.to_string();
    if meta_str(&binding, "name").is_some_and(|n| n != name) {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            meta_str(&binding, "name").unwrap_or("")
        )));
    }
    let node = binding["target"]["name"].as_str().unwrap_or("").to_string();
    if node.is_empty() {
        return Err(ApiError::Invalid {
            kind: "Binding".into(),
            group: String::new(),
            name,
            causes: vec![FieldError::required("target.name", "")],
        });
    }
    let key = ctx.key()?;
    let binding_conflict = |detail: String| ApiError::Conflict {
        resource: "pods/binding".into(),
        group: String::new(),
        name: name.clone(),
        detail,
    };
    let dry_run = ctx.params.dry_run;
    let (info, name, key, node, binding_conflict) = (&info, &name, &key, &node, &binding_conflict);
    // As upstream's binding, this is a storage-level update of two fields: no
    // admission, validation or managed-fields entry. The first attempt starts
    // from the watch cache; a refusal is only given on the store's copy (the
    // cache's may be an older pod of the same name), so it retries from there.
    guaranteed_update(
        &ctx.inner,
        info,
        key,
        name,
        FirstRead::Cache,
        move |current| {
            Box::pin(async move {
                let current = current.ok_or_else(|| storage::not_found(info, name))?;
                if let Some(bound) = current.object["spec"]["nodeName"]
                    .as_str()
                    .filter(|n| !n.is_empty())
                {
                    if current.cached {
                        return Ok(Next::Retry);
                    }
                    return Err(binding_conflict(format!(
                        "pod {name} is already assigned to node \"{bound}\""
                    )));
                }
                if crate::object::is_terminating(&current.object) {
                    if current.cached {
                        return Ok(Next::Retry);
                    }
                    return Err(binding_conflict(format!(
                        "pod {name} is being deleted, cannot be assigned to a host"
                    )));
                }
                let mut next = current.object;
                if let Some(spec) = next.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.insert("nodeName".into(), json!(node));
                } else {
                    set_field(&mut next, "spec", json!({ "nodeName": node }));
                }
                mark_scheduled(&mut next);
                if dry_run {
                    return Ok(Next::Done(Value::Null));
                }
                Ok(Next::ReplaceUnanswered(next))
            })
        },
    )
    .await?;
    respond(StatusCode::CREATED, &success_status(201))
}

/// Adds the PodScheduled=True condition, as upstream's binding does (in
/// place: the pod was copied for this write already).
fn mark_scheduled(pod: &mut Value) {
    let Some(pod) = pod.as_object_mut() else {
        return;
    };
    let status = pod.entry("status").or_insert_with(|| json!({}));
    if !status.is_object() {
        *status = json!({});
    }
    let Some(status) = status.as_object_mut() else {
        return;
    };
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    if let Some(conditions) = conditions.as_array_mut() {
        conditions.retain(|c| c["type"] != "PodScheduled");
        conditions.push(json!({
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": null,
            "lastTransitionTime": crate::object::now_rfc3339(),
        }));
    }
}

/// POST pods/<name>/eviction: deletes the pod unless a matching
/// PodDisruptionBudget allows no disruption right now.
pub(super) async fn evict(ctx: Ctx, body: Body) -> Result<Response, ApiError> {
    let bytes = crate::body::read(&ctx.headers, body).await?;
    let mut eviction = crate::body::decode_object(&ctx.headers, &bytes)?;
    check_type(&mut eviction, "policy/v1", "Eviction")?;
    let info = ctx.info().clone();
    let name = ctx.name()?.to_string();
    let key = ctx.key()?;
    let (pod, _) = storage::read_existing(&ctx.inner, &info, &key, &name).await?;
    // Nothing to hold: quota counts no subresource or delete.
    let _admitted = crate::admission_plugins::admit(
        &ctx.inner,
        &crate::admission_plugins::WriteRequest {
            user: &ctx.user,
            notes: &ctx.notes,
            operation: crate::admission_plugins::Operation::Create,
            info: &info,
            subresource: Some(Subresource::Eviction),
            old: Some(&pod),
            new: Some(&eviction),
            dry_run: ctx.params.dry_run,
        },
    )
    .await?;
    let mut options = DeleteOptions {
        dry_run: ctx.params.dry_run,
        ..Default::default()
    };
    if let Some(delete_options) = eviction.get("deleteOptions").filter(|v| v.is_object()) {
        options.merge_body(delete_options)?;
    }
    let running = pod["status"]["phase"] == "Running";
    if running && !crate::object::is_terminating(&pod) {
        take_disruption(&ctx, &pod).await?;
    }
    let write = ctx.write_info(None);
    delete_object(&ctx.inner, &info, &key, &name, &options, &write).await?;
    respond(StatusCode::CREATED, &success_status(201))
}

/// Upstream's cap on evictions a budget may hold unconfirmed.
const MAX_DISRUPTED_PODS: usize = 2000;

/// Takes one disruption from the PodDisruptionBudget that covers `pod`, as
/// upstream's eviction does: the budget's `disruptionsAllowed` goes down by
/// one and the pod is noted in `disruptedPods` (so the disruption
/// controller counts it gone) in one conditional write, before the pod is
/// deleted; concurrent evictions thus never take more than the budget
/// allows. A budget that allows none refuses with 429. A pod that is not
/// Ready takes nothing when the budget is met (or its policy is
/// AlwaysAllow): it is not counted as healthy anyway.
async fn take_disruption(ctx: &Ctx, pod: &Value) -> Result<(), ApiError> {
    let Some(pdbs) = ctx
        .inner
        .registry
        .get("policy", "v1", "poddisruptionbudgets")
    else {
        return Ok(());
    };
    let namespace = meta_str(pod, "namespace").unwrap_or("");
    let snapshot = ctx.inner.cache(&pdbs)?.snapshot();
    let prefix = pdbs.collection_prefix(Some(namespace));
    let mut covering = Vec::new();
    for (key, pdb) in snapshot.under(&prefix) {
        let pdb = pdb.value();
        let Ok(selector) = LabelSelector::from_object(&pdb["spec"]["selector"]) else {
            continue;
        };
        if !pdb["spec"]["selector"].is_null() && selector.matches(pod) {
            covering.push((key.clone(), pdb));
        }
    }
    let (key, pdb) = match covering.len() {
        0 => return Ok(()),
        1 => covering.remove(0),
        _ => {
            return Err(ApiError::Internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".into(),
            ));
        }
    };
    if !condition_true(pod, "Ready") {
        let always = pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow";
        let desired = pdb["status"]["desiredHealthy"].as_i64().unwrap_or(0);
        let current = pdb["status"]["currentHealthy"].as_i64().unwrap_or(0);
        if always || (desired > 0 && current >= desired) {
            return Ok(());
        }
    }
    let pdb_name = meta_str(&pdb, "name").unwrap_or("").to_string();
    let pod_name = meta_str(pod, "name").unwrap_or("").to_string();
    let dry_run = ctx.params.dry_run;
    let (pdb_name, pod_name) = (&pdb_name, &pod_name);
    guaranteed_update(
        &ctx.inner,
        &pdbs,
        &key,
        pdb_name,
        FirstRead::Store,
        move |current| {
            Box::pin(async move {
                // A budget deleted meanwhile no longer holds the pod.
                let Some(current) = current else {
                    return Ok(Next::Done(Value::Null));
                };
                let mut pdb = current.object;
                disruption_allowed(&pdb, pdb_name)?;
                let status = &mut pdb["status"];
                let allowed = status["disruptionsAllowed"].as_i64().unwrap_or(0) - 1;
                status["disruptionsAllowed"] = json!(allowed);
                if allowed == 0 {
                    no_disruption_allowed(status);
                }
                if dry_run {
                    return Ok(Next::Done(Value::Null));
                }
                if !status["disruptedPods"].is_object() {
                    status["disruptedPods"] = json!({});
                }
                status["disruptedPods"][pod_name] = json!(crate::object::now_rfc3339());
                Ok(Next::ReplaceUnanswered(pdb))
            })
        },
    )
    .await?;
    Ok(())
}

/// Marks a budget's status as allowing no disruption, as the disruption
/// controller would on its next count (the condition's transition time
/// moves only if it allowed some before).
fn no_disruption_allowed(status: &mut Value) {
    let generation = status["observedGeneration"].clone();
    let mut conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    let kept = conditions
        .iter()
        .find(|c| c["type"] == "DisruptionAllowed" && c["status"] == "False")
        .map(|c| c["lastTransitionTime"].clone());
    conditions.retain(|c| c["type"] != "DisruptionAllowed");
    conditions.push(json!({"type": "DisruptionAllowed", "status": "False",
        "reason": "InsufficientPods", "message": "", "observedGeneration": generation,
        "lastTransitionTime": kept.unwrap_or_else(|| json!(crate::object::now_rfc3339()))}));
    status["conditions"] = Value::Array(conditions);
}

/// Whether the budget `pdb` (as stored now) lets one more pod go, in
/// upstream's words when it does not.
fn disruption_allowed(pdb: &Value, name: &str) -> Result<(), ApiError> {
    let status = &pdb["status"];
    let generation = pdb["metadata"]["generation"].as_i64().unwrap_or(0);
    let refused = |cause: String| ApiError::TooManyRequests {
        message: "Cannot evict pod as it would violate the pod's disruption budget.".into(),
        causes: vec![("DisruptionBudget".into(), cause, String::new())],
    };
    if status["observedGeneration"].as_i64().unwrap_or(0) < generation {
        return Err(refused(format!(
            "The disruption budget {name} is still being processed by the server."
        )));
    }
    let forbidden = |detail: &str| ApiError::Forbidden {
        resource: "poddisruptionbudget".into(),
        group: "policy".into(),
        name: name.to_string(),
        detail: detail.into(),
        causes: Vec::new(),
    };
    let allowed = status["disruptionsAllowed"].as_i64().unwrap_or(0);
    if allowed < 0 {
        return Err(forbidden("pdb disruptions allowed is negative"));
    }
    let pending = status["disruptedPods"].as_object().map_or(0, |m| m.len());
    if pending > MAX_DISRUPTED_PODS {
        return Err(forbidden(
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        let desired = status["desiredHealthy"].as_i64().unwrap_or(0);
        let current = status["currentHealthy"].as_i64().unwrap_or(0);
        return Err(refused(format!(
            "The disruption budget {name} needs {desired} healthy pods and has {current} currently"
        )));
    }
    Ok(())
}
