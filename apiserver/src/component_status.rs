//! `componentstatuses` (core/v1): what `kubectl get cs` reads. Upstream
//! deprecated it in 1.19 and still serves it, warning each caller; here it
//! answers for the store (`etcd-0`, as upstream names its datastore) and
//! for each in-process component the binary registered (the controller
//! manager, the scheduler), which is healthy while its task runs. Read-only
//! and never stored.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::response::Response;
use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::handlers::Ctx;
use crate::status::{ApiError, json_response};

/// The warning upstream sends with every answer.
const DEPRECATED: &str = "v1 ComponentStatus is deprecated in v1.19+";

/// The name the store answers under.
const STORE: &str = "etcd-0";

/// The in-process components whose health `componentstatuses` reports,
/// shared by the binary (which registers them as it starts them) and the
/// API server (which reads them).
#[derive(Clone, Default)]
pub struct ComponentHealth(Arc<parking_lot::RwLock<BTreeMap<String, Arc<AtomicBool>>>>);

impl std::fmt::Debug for ComponentHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.states()).finish()
    }
}

/// Held by a running component's task: dropped when the task ends (or is
/// cancelled, or panics), and the component turns unhealthy.
#[derive(Debug)]
pub struct Running(Arc<AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl ComponentHealth {
    /// Registers `name` as running until the returned guard is dropped.
    pub fn running(&self, name: &str) -> Running {
        let alive = Arc::new(AtomicBool::new(true));
        self.0.write().insert(name.to_string(), alive.clone());
        Running(alive)
    }

    /// Each registered component and whether it runs.
    fn states(&self) -> Vec<(String, bool)> {
        self.0
            .read()
            .iter()
            .map(|(name, alive)| (name.clone(), alive.load(Ordering::Acquire)))
            .collect()
    }
}

/// A ComponentStatus object with its one `Healthy` condition.
fn component(name: &str, health: Result<(), String>) -> Value {
    let condition = match health {
        Ok(()) => json!({"type": "Healthy", "status": "True", "message": "ok"}),
        Err(error) => json!({"type": "Healthy", "status": "False", "error": error}),
    };
    json!({"kind": "ComponentStatus", "apiVersion": "v1",
           "metadata": {"name": name}, "conditions": [condition]})
}

/// Every component's status: the registered ones by name, then the store.
fn statuses(ctx: &Ctx) -> Vec<Value> {
    let mut out: Vec<Value> = ctx
        .inner
        .config
        .component_health
        .states()
        .into_iter()
        .map(|(name, alive)| {
            let health = if alive {
                Ok(())
            } else {
                Err(format!("the {name} is not running"))
            };
            component(&name, health)
        })
        .collect();
    out.push(component(
        STORE,
        ctx.inner.store.health().map_err(|e| e.to_string()),
    ));
    out
}

/// Serves `GET` of the list or of one component.
pub(crate) async fn serve(ctx: Ctx, method: Method) -> Result<Response, ApiError> {
    ctx.only_get(&method)?;
    ctx.notes.warn(DEPRECATED);
    let all = statuses(&ctx);
    let info = ctx.info().clone();
    let items = match &ctx.target.name {
        Some(name) => {
            let one = all
                .into_iter()
                .find(|c| c["metadata"]["name"] == name.as_str())
                .ok_or_else(|| ApiError::NotFound {
                    group: String::new(),
                    resource: "componentstatuses".into(),
                    name: name.clone(),
                })?;
            vec![one]
        }
        None => all,
    };
    if let Some(table) = ctx.table(&info, &items, json!({})) {
        return Ok(json_response(StatusCode::OK, &table?));
    }
    let body = match ctx.target.name {
        Some(_) => items.into_iter().next().unwrap_or_default(),
        None => json!({"kind": "ComponentStatusList", "apiVersion": "v1",
                       "metadata": {}, "items": items}),
    };
    Ok(json_response(StatusCode::OK, &body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_component_is_healthy_while_its_guard_lives() {
        let health = ComponentHealth::default();
        let scheduler = health.running("scheduler");
        let _manager = health.running("controller-manager");
        assert_eq!(
            health.states(),
            [
                ("controller-manager".to_string(), true),
                ("scheduler".to_string(), true)
            ]
        );
        drop(scheduler);
        assert_eq!(health.states()[1], ("scheduler".to_string(), false));
        let down = component("scheduler", Err("the scheduler is not running".into()));
        assert_eq!(down["conditions"][0]["status"], "False");
        assert_eq!(
            down["conditions"][0]["error"],
            "the scheduler is not running"
        );
    }
}
