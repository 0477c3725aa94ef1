//! Test fixtures: an RBAC authorizer over hand-filled watch caches, and
//! the objects to fill them with.

use std::sync::Arc;
use std::time::Duration;

use imbl::OrdMap;
use serde_json::{Value, json};

use super::{GROUP, Rbac, Sources};
use crate::watch_cache::{CacheLimits, Cached, WatchCache};

pub(crate) fn cache(objects: &[Value], prefix: &str) -> Arc<WatchCache> {
    let limits = CacheLimits {
        history: 16,
        history_max_age: Duration::from_secs(3600),
        fanout_buffer: 16,
        snapshot_ttl: Duration::from_secs(60),
    };
    let c = WatchCache::new(prefix.to_string(), &limits);
    let map: OrdMap<String, Cached> = objects
        .iter()
        .map(|o| (key(prefix, o), Cached::from(Arc::new(o.clone()))))
        .collect();
    c.reset(map, 1);
    c
}

pub(crate) fn key(prefix: &str, object: &Value) -> String {
    let meta = &object["metadata"];
    match meta["namespace"].as_str() {
        Some(ns) => format!("{prefix}{ns}/{}", meta["name"].as_str().unwrap()),
        None => format!("{prefix}{}", meta["name"].as_str().unwrap()),
    }
}

/// The caches and the authorizer reading them.
pub(crate) struct Fixture {
    pub sources: Sources,
    pub rbac: Rbac,
}

pub(crate) fn fixture(
    roles: &[Value],
    cluster_roles: &[Value],
    bindings: &[Value],
    cluster_bindings: &[Value],
) -> Fixture {
    let sources = Sources {
        roles: cache(roles, "/r/"),
        cluster_roles: cache(cluster_roles, "/cr/"),
        role_bindings: cache(bindings, "/rb/"),
        cluster_role_bindings: cache(cluster_bindings, "/crb/"),
    };
    Fixture {
        rbac: Rbac::new(sources.clone()),
        sources,
    }
}

pub(crate) fn role(ns: Option<&str>, name: &str, rules: Value) -> Value {
    let mut meta = json!({"name": name});
    if let Some(ns) = ns {
        meta["namespace"] = json!(ns);
    }
    json!({"metadata": meta, "rules": rules})
}

pub(crate) fn binding(
    ns: Option<&str>,
    name: &str,
    kind: &str,
    role: &str,
    subjects: Value,
) -> Value {
    let mut meta = json!({"name": name});
    if let Some(ns) = ns {
        meta["namespace"] = json!(ns);
    }
    json!({"metadata": meta, "subjects": subjects,
        "roleRef": {"apiGroup": GROUP, "kind": kind, "name": role}})
}

/// A binding's subjects naming the one user `name`.
pub(crate) fn user_subjects(name: &str) -> Value {
    json!([{"kind": "User", "name": name}])
}
