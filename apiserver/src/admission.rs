//! What the server itself sets on objects before they are stored: system
//! metadata (uid, creationTimestamp, generation, managedFields), the status
//! a new object starts with, and the rules that keep spec and status writes
//! apart. Each kind's own defaults and carried fields come from its
//! strategy (`kinds/`).

use rand::Rng;
use serde_json::{Value, json};

use crate::admission_plugins::webhook::Attributes;
use crate::admission_plugins::{Operation, WriteRequest};
use crate::kinds::InitialStatus;
use crate::object::{meta_mut, now_rfc3339, set_field};
use crate::registry::{ResourceInfo, Subresource};

/// Characters upstream uses for generateName suffixes (no vowels, no
/// look-alikes).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `prefix` plus five random characters.
pub(crate) fn generate_name(prefix: &str) -> String {
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| NAME_ALPHABET[rng.random_range(0..NAME_ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{suffix}")
}

/// Who wrote and how, for the managedFields entry.
#[derive(Debug, Clone)]
pub(crate) struct WriteInfo {
    pub manager: String,
    pub subresource: Option<Subresource>,
    /// Recorded as operation `Apply` rather than `Update`.
    pub apply: bool,
    /// Who asked for the write, for the admission plugins that care.
    pub user: crate::authn::UserInfo,
    /// Where admission leaves warnings and audit annotations for the
    /// response.
    pub notes: crate::request_notes::RequestNotes,
}

impl WriteInfo {
    /// The mutating webhooks' view of this write of `info` (`old` for an
    /// update): built the same way by create and update.
    pub(crate) fn webhook_attributes<'a>(
        &'a self,
        info: &'a ResourceInfo,
        operation: Operation,
        old: Option<&'a Value>,
        dry_run: bool,
    ) -> Attributes<'a> {
        let request = self.write_request(info, operation, old, None, dry_run);
        Attributes::of(&request, Some(&self.manager))
    }

    /// The admission plugins' view of this write of `info`, once `new` is
    /// admitted: built the same way by create and update.
    pub(crate) fn write_request<'a>(
        &'a self,
        info: &'a ResourceInfo,
        operation: Operation,
        old: Option<&'a Value>,
        new: Option<&'a Value>,
        dry_run: bool,
    ) -> WriteRequest<'a> {
        WriteRequest {
            user: &self.user,
            notes: &self.notes,
            operation,
            info,
            subresource: self.subresource,
            old,
            new,
            dry_run,
        }
    }
}

/// Sets system metadata and defaults on an object about to be created.
pub(crate) fn prepare_create(info: &ResourceInfo, object: &mut Value, write: &WriteInfo) {
    let meta = meta_mut(object);
    let provided_managers = meta.remove("managedFields");
    for field in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        meta.remove(field);
    }
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
    if info.tracks_generation {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    if !info.namespaced {
        meta.remove("namespace");
    }
    reset_status_on_create(info, object);
    info.strategy.on_create(object, &write.notes);
    info.strategy.on_create_by(object, &write.user);
    info.strategy.apply_defaults(info, object);
    crate::managed_fields::on_create(info, object, provided_managers.as_ref(), write);
}

/// Upstream clears client-set status on create for resources with a status
/// subresource (status belongs to controllers); some kinds start with a
/// phase, nodes keep theirs.
fn reset_status_on_create(info: &ResourceInfo, object: &mut Value) {
    if !info.has(Subresource::Status) {
        return;
    }
    let Some(map) = object.as_object_mut() else {
        return;
    };
    match info.strategy.initial_status() {
        InitialStatus::Kept => {}
        InitialStatus::Cleared => {
            map.remove("status");
        }
        InitialStatus::Phase(phase) => {
            map.insert("status".into(), json!({ "phase": phase }));
        }
        InitialStatus::Empty(status) => {
            map.insert("status".into(), status());
        }
    }
}

/// Carries what a main-resource update may not change from `old` into `new`,
/// and bumps generation when the spec changed.
pub(crate) fn prepare_update(info: &ResourceInfo, old: &Value, new: &mut Value) {
    // As decoded upstream: quantities in canonical form, so `0.5` for a
    // stored `500m` is no spec change. (One that does not parse is refused
    // by validation.)
    let _ = crate::protobuf::settle_quantities(&info.api_version(), info.kind, new);
    carry_system_metadata(old, new);
    info.strategy.apply_defaults(info, new);
    if info.has(Subresource::Status) {
        match old.get("status") {
            Some(s) => set_field(new, "status", s.clone()),
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    }
    info.strategy.carry_on_update(old, new);
    if info.tracks_generation {
        let old_generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
        // Compare against the old object defaulted the same way, so a default
        // added since it was stored is not taken for a change.
        let mut old_defaulted = old.clone();
        info.strategy.apply_defaults(info, &mut old_defaulted);
        let changed = info.strategy.generation_changed(&old_defaulted, new);
        meta_mut(new).insert(
            "generation".into(),
            json!(old_generation + i64::from(changed)),
        );
    }
}

/// The new object for a status write: `old` with only `status` taken from `new`.
pub(crate) fn prepare_status_update(old: &Value, new: &Value) -> Value {
    let mut result = old.clone();
    match new.get("status") {
        Some(s) => set_field(&mut result, "status", s.clone()),
        None => {
            if let Some(m) = result.as_object_mut() {
                m.remove("status");
            }
        }
    }
    result
}

fn carry_system_metadata(old: &Value, new: &mut Value) {
    let old_meta = old["metadata"].clone();
    let meta = meta_mut(new);
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "managedFields",
        "namespace",
        "name",
    ] {
        match old_meta.get(field) {
            Some(v) => {
                meta.insert(field.into(), v.clone());
            }
            None => {
                meta.remove(field);
            }
        }
    }
}

/// Manager name upstream derives from a User-Agent (`kubectl/v1.32 ...` → `kubectl`).
pub(crate) fn manager_from_user_agent(user_agent: Option<&str>) -> String {
    user_agent
        .and_then(|ua| ua.split('/').next())
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn generation_bumps_only_on_spec_change() {
        let reg = Registry::builtin();
        let info = reg.get("apps", "v1", "deployments").unwrap();
        let old = json!({"metadata": {"name": "d", "generation": 3, "uid": "u"}, "spec": {"replicas": 1}, "status": {"replicas": 1}});
        let mut same = json!({"metadata": {"name": "d", "labels": {"a": "b"}}, "spec": {"replicas": 1}, "status": {"replicas": 9}});
        prepare_update(&info, &old, &mut same);
        assert_eq!(same["metadata"]["generation"], 3);
        assert_eq!(same["metadata"]["uid"], "u");
        assert_eq!(
            same["status"]["replicas"], 1,
            "status is not writable through the main resource"
        );
        let mut changed = json!({"metadata": {"name": "d"}, "spec": {"replicas": 2}});
        prepare_update(&info, &old, &mut changed);
        assert_eq!(changed["metadata"]["generation"], 4);
    }

    #[test]
    fn generated_names_use_prefix() {
        let n = generate_name("web-");
        assert!(n.starts_with("web-") && n.len() == 9);
        assert!(n[4..].bytes().all(|b| NAME_ALPHABET.contains(&b)));
    }
}
