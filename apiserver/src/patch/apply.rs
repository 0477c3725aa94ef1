//! Server-side apply (`application/apply-patch+yaml`): the applied
//! configuration is merged into the live object by the schema's list keys,
//! the applier comes to own exactly the fields it applied, fields it applied
//! before but no longer does are removed unless another manager owns them,
//! and changing a field another manager owns is a conflict unless forced.

use serde_json::Value;

use crate::managed_fields::{
    self, BEFORE_FIRST_APPLY, Managers, Operation, Path, Schema, Scope, WalkError, Writer,
    applied_fields, compare, display_path, merge, remove, without_nulls,
};
use crate::object::now_rfc3339;

/// A field another manager owns and the apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The owner as upstream prints it: `"name"` (an applier) or `"name"
    /// using apps/v1` (an updater).
    pub manager: String,
    /// The field.
    pub path: Path,
}

/// Why an apply was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The configuration cannot be read against the schema (an associative
    /// list element without its key, duplicates).
    #[error("{0}")]
    Invalid(#[from] WalkError),
    /// The configuration carries managedFields, which only the server sets.
    #[error("metadata.managedFields must be nil")]
    ManagedFieldsSet,
    /// Fields owned by other managers would change.
    #[error("{}", conflict_message(.0))]
    Conflicts(Vec<Conflict>),
}

impl ApplyError {
    /// `(reason, message, field)` per conflict, the Status causes upstream sends.
    pub fn causes(&self) -> Vec<(String, String, String)> {
        match self {
            ApplyError::Conflicts(list) => list
                .iter()
                .map(|c| {
                    (
                        "FieldManagerConflict".to_string(),
                        format!("conflict with {}", c.manager),
                        display_path(&c.path),
                    )
                })
                .collect(),
            ApplyError::Invalid(_) | ApplyError::ManagedFieldsSet => Vec::new(),
        }
    }
}

/// Upstream's wording: one conflict on one line, several grouped by manager.
fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [one] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            one.manager,
            display_path(&one.path)
        );
    }
    let mut managers: Vec<&str> = conflicts.iter().map(|c| c.manager.as_str()).collect();
    managers.sort();
    managers.dedup();
    let mut lines = Vec::new();
    for manager in managers {
        lines.push(format!("conflicts with {manager}:"));
        for c in conflicts.iter().filter(|c| c.manager == manager) {
            lines.push(format!("- {}", display_path(&c.path)));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// What one apply is: the schema of the kind, the part of the object the
/// request may own, who applies, and whether conflicts are overridden.
pub struct ApplyRequest<'a> {
    /// The schema of the object's kind, for list and map merge keys.
    pub schema: &'a dyn Schema,
    /// The part of the object the request may own.
    pub scope: Scope,
    /// Who applies.
    pub writer: &'a Writer,
    /// Whether fields other managers own are taken over rather than refused as conflicts.
    pub force: bool,
}

/// Applies `config` to `live` (an empty object when creating). Returns the
/// new object with its managedFields; `live`'s other metadata is left for
/// the caller's usual update rules.
pub fn server_side_apply(
    request: &ApplyRequest<'_>,
    live: &Value,
    config: &Value,
) -> Result<Value, ApplyError> {
    let ApplyRequest {
        schema,
        scope,
        writer,
        force,
    } = *request;
    debug_assert_eq!(writer.operation, Operation::Apply);
    if config.pointer("/metadata/managedFields").is_some() {
        return Err(ApplyError::ManagedFieldsSet);
    }
    let config = without_nulls(config);
    let applied = applied_fields(schema, &scope.view(&config))?;
    let live_view = scope.view(live);
    let mut managers = managed_fields::stored(live).unwrap_or_default();
    if managers.is_empty() {
        // What the object held before anyone applied belongs to someone, so
        // an apply cannot silently take it over.
        let before = Writer {
            manager: BEFORE_FIRST_APPLY.into(),
            operation: Operation::Update,
            api_version: writer.api_version.clone(),
            subresource: writer.subresource.clone(),
        };
        managed_fields::track_update(
            schema,
            scope,
            &mut managers,
            &before,
            (&serde_json::json!({}), live),
        );
    }
    let mut merged = merge(schema, live, &config);
    let previous = managers.get(writer).map(|e| e.fields.clone());
    managers.entry(writer).fields = applied.clone();
    if let Some(previous) = &previous {
        let owned = managers.all_fields();
        let abandoned = previous.difference(&owned);
        remove(schema, &mut merged, &abandoned, &owned);
    }
    let merged_view = scope.view(&merged);
    let diff = compare(schema, &live_view, &merged_view);
    let changed = diff.changed();
    let mut conflicts: Vec<Conflict> = managers
        .entries
        .iter()
        .filter(|e| managers.get(writer) != Some(*e))
        .flat_map(|e| {
            let manager = e.describe();
            e.fields
                .intersection(&changed)
                .paths()
                .into_iter()
                .map(move |path| Conflict {
                    manager: manager.clone(),
                    path,
                })
        })
        .collect();
    if !force && !conflicts.is_empty() {
        let upgrading = LastApplied::allowed_conflicts(schema, scope, writer, live);
        conflicts.retain(|c| {
            !upgrading
                .as_ref()
                .is_some_and(|allowed| allowed.contains(&c.path))
        });
    }
    if !force && !conflicts.is_empty() {
        conflicts.sort_by(|a, b| (&a.manager, &a.path).cmp(&(&b.manager, &b.path)));
        return Err(ApplyError::Conflicts(conflicts));
    }
    LastApplied::sync(writer, live, &config, &mut merged);
    managers.release(&changed.union(&diff.removed), Some(writer));
    let entry = managers.entry(writer);
    if previous.as_ref() != Some(&applied) || live_view != merged_view || entry.time.is_none() {
        entry.time = Some(now_rfc3339());
    }
    managers.prune();
    managed_fields::store(&mut merged, &managers);
    Ok(merged)
}

/// kubectl's move from client-side to server-side apply, as upstream eases
/// it for the `kubectl` manager: conflicts on fields the client-side
/// `last-applied-configuration` holds are taken over, and that annotation
/// follows what is now applied, so either kind of apply can come next.
struct LastApplied;

impl LastApplied {
    const ANNOTATION: &'static str = "kubectl.kubernetes.io/last-applied-configuration";
    const MANAGER: &'static str = "kubectl";

    fn annotation(object: &Value) -> Option<&str> {
        object
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(Self::ANNOTATION))
            .and_then(Value::as_str)
    }

    /// The fields the last client-side apply set, when `writer` is kubectl.
    fn allowed_conflicts(
        schema: &dyn Schema,
        scope: Scope,
        writer: &Writer,
        live: &Value,
    ) -> Option<crate::managed_fields::set::FieldSet> {
        if writer.manager != Self::MANAGER {
            return None;
        }
        let last: Value = serde_json::from_str(Self::annotation(live)?).ok()?;
        applied_fields(schema, &scope.view(&without_nulls(&last))).ok()
    }

    /// Rewrites the annotation (when the object has one) to the applied
    /// configuration, without the annotation itself.
    fn sync(writer: &Writer, live: &Value, config: &Value, merged: &mut Value) {
        if writer.manager != Self::MANAGER || Self::annotation(live).is_none() {
            return;
        }
        let mut applied = config.clone();
        if let Some(annotations) = applied
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
        {
            annotations.remove(Self::ANNOTATION);
            if annotations.is_empty()
                && let Some(meta) = applied.get_mut("metadata").and_then(Value::as_object_mut)
            {
                meta.remove("annotations");
            }
        }
        let Ok(text) = serde_json::to_string(&applied) else {
            return;
        };
        if let Some(annotations) = merged
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
        {
            annotations.insert(Self::ANNOTATION.into(), Value::String(format!("{text}\n")));
        }
    }
}

/// Applies `config` with no schema knowledge beyond upstream's deduced one
/// (every list atomic, maps field by field): the entry point for custom
/// resources whose schema declares no list types.
pub fn apply_deduced(
    scope: Scope,
    writer: &Writer,
    force: bool,
    live: &Value,
    config: &Value,
) -> Result<Value, ApplyError> {
    let request = ApplyRequest {
        schema: &managed_fields::Deduced,
        scope,
        writer,
        force,
    };
    server_side_apply(&request, live, config)
}

/// Managers of `object`, for callers that inspect ownership.
pub fn managers_of(object: &Value) -> Managers {
    managed_fields::stored(object).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::managed_fields::schema::Builtin;
    use serde_json::json;

    fn applier(name: &str) -> Writer {
        Writer {
            manager: name.into(),
            operation: Operation::Apply,
            api_version: "v1".into(),
            subresource: None,
        }
    }

    fn apply(live: &Value, config: Value, who: &str, force: bool) -> Result<Value, ApplyError> {
        let writer = applier(who);
        let request = ApplyRequest {
            schema: &Builtin,
            scope: Scope::Whole,
            writer: &writer,
            force,
        };
        server_side_apply(&request, live, &config)
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
    }

    fn fields_of(object: &Value, manager: &str) -> Value {
        object["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["manager"] == manager)
            .map(|e| e["fieldsV1"].clone())
            .unwrap_or(Value::Null)
    }

    #[test]
    fn applier_owns_what_it_applied_and_drops_what_it_stopped_applying() {
        let created = apply(&json!({}), cm(json!({"a": "1", "b": "2"})), "a", false).unwrap();
        assert_eq!(
            fields_of(&created, "a"),
            json!({"f:data": {"f:a": {}, "f:b": {}}})
        );
        let second = apply(&created, cm(json!({"a": "1"})), "a", false).unwrap();
        assert_eq!(second["data"], json!({"a": "1"}));
        assert_eq!(fields_of(&second, "a"), json!({"f:data": {"f:a": {}}}));
    }

    #[test]
    fn other_owners_conflict_unless_values_agree_or_forced() {
        let created = apply(&json!({}), cm(json!({"k": "1"})), "a", false).unwrap();
        let shared = apply(&created, cm(json!({"k": "1"})), "b", false).unwrap();
        assert_eq!(fields_of(&shared, "b"), json!({"f:data": {"f:k": {}}}));
        assert_eq!(fields_of(&shared, "a"), json!({"f:data": {"f:k": {}}}));
        // a stops applying k: b still owns it, so it stays.
        let kept = apply(&shared, cm(json!({"other": "x"})), "a", false).unwrap();
        assert_eq!(kept["data"]["k"], "1");
        let err = apply(&created, cm(json!({"k": "2"})), "b", false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"a\": .data.k"
        );
        assert_eq!(
            err.causes(),
            vec![(
                "FieldManagerConflict".to_string(),
                "conflict with \"a\"".to_string(),
                ".data.k".to_string()
            )]
        );
        let forced = apply(&created, cm(json!({"k": "2"})), "b", true).unwrap();
        assert_eq!(forced["data"]["k"], "2");
        assert_eq!(
            fields_of(&forced, "a"),
            Value::Null,
            "a lost its only field"
        );
    }

    #[test]
    fn configurations_may_not_carry_managed_fields() {
        let mut config = cm(json!({"k": "1"}));
        config["metadata"]["managedFields"] = json!([]);
        assert_eq!(
            apply(&json!({}), config, "a", false),
            Err(ApplyError::ManagedFieldsSet)
        );
    }

    #[test]
    fn several_conflicts_are_grouped_by_manager() {
        let created = apply(&json!({}), cm(json!({"x": "1", "y": "1"})), "a", false).unwrap();
        let err = apply(&created, cm(json!({"x": "2", "y": "2"})), "b", false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 2 conflicts: conflicts with \"a\":\n- .data.x\n- .data.y"
        );
    }

    #[test]
    fn containers_merge_by_name_and_items_are_removed_by_omission() {
        let pod = |containers: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers}});
        let created = apply(
            &json!({}),
            pod(json!([{"name": "a", "image": "1"}, {"name": "b", "image": "1"}])),
            "me",
            false,
        )
        .unwrap();
        let mut live = created.clone();
        live["spec"]["containers"][0]["imagePullPolicy"] = json!("Always");
        let updated = apply(
            &live,
            pod(json!([{"name": "a", "image": "2"}])),
            "me",
            false,
        )
        .unwrap();
        assert_eq!(
            updated["spec"]["containers"],
            json!([{"name": "a", "image": "2", "imagePullPolicy": "Always"}])
        );
    }

    #[test]
    fn fields_present_before_the_first_apply_have_an_owner() {
        let live = cm(json!({"k": "1"}));
        let err = apply(&live, cm(json!({"k": "2"})), "a", false).unwrap_err();
        assert!(err.to_string().contains(BEFORE_FIRST_APPLY), "{err}");
    }

    #[test]
    fn kubectl_takes_over_what_its_client_side_apply_set() {
        let last =
            r#"{"apiVersion":"v1","data":{"k":"1"},"kind":"ConfigMap","metadata":{"name":"c"}}"#;
        let mut live = cm(json!({"k": "1"}));
        live["metadata"]["annotations"] = json!({LastApplied::ANNOTATION: last});
        live["metadata"]["managedFields"] = json!([{
            "manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:k": {}}, "f:metadata": {"f:annotations": {"f:kubectl.kubernetes.io/last-applied-configuration": {}}}}
        }]);
        let err = apply(&live, cm(json!({"k": "2"})), "someone", false).unwrap_err();
        assert!(matches!(err, ApplyError::Conflicts(_)));
        let upgraded = apply(&live, cm(json!({"k": "2"})), "kubectl", false).unwrap();
        assert_eq!(upgraded["data"]["k"], "2");
        let annotation = upgraded["metadata"]["annotations"][LastApplied::ANNOTATION]
            .as_str()
            .unwrap();
        let synced: Value = serde_json::from_str(annotation).unwrap();
        assert_eq!(synced["data"], json!({"k": "2"}));
    }

    #[test]
    fn an_applier_that_owned_a_map_itself_keeps_what_it_still_applies() {
        // kubectl's migrated entry claims the maps themselves (`.`); its next
        // apply does not, yet the keys it applies again and the annotation
        // another manager owns stay.
        let mut live = cm(json!({"k": "1"}));
        live["metadata"]["annotations"] = json!({"kept": "x", "dropped": "y"});
        live["metadata"]["managedFields"] = json!([
            {"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
             "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {".": {}, "f:k": {}},
                 "f:metadata": {"f:annotations": {".": {}, "f:kept": {}, "f:dropped": {}}}}},
            {"manager": "other", "operation": "Apply", "apiVersion": "v1",
             "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:annotations": {"f:kept": {}}}}}
        ]);
        let applied = apply(&live, cm(json!({"k": "2"})), "kubectl", false).unwrap();
        assert_eq!(applied["data"], json!({"k": "2"}));
        assert_eq!(applied["metadata"]["annotations"], json!({"kept": "x"}));
        assert_eq!(
            fields_of(&applied, "kubectl"),
            json!({"f:data": {"f:k": {}}})
        );
    }

    #[test]
    fn deduced_schema_treats_lists_as_atomic() {
        let cr = |items: Value| json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "x"}, "spec": {"items": items}});
        let writer = applier("me");
        let live = apply_deduced(
            Scope::Whole,
            &writer,
            false,
            &json!({}),
            &cr(json!([{"name": "a"}])),
        )
        .unwrap();
        let next = apply_deduced(
            Scope::Whole,
            &writer,
            false,
            &live,
            &cr(json!([{"name": "b"}])),
        )
        .unwrap();
        assert_eq!(next["spec"]["items"], json!([{"name": "b"}]));
        assert_eq!(fields_of(&next, "me"), json!({"f:spec": {"f:items": {}}}));
    }
}
