//! Ending a pod: preStop hooks, StopContainer with the remaining grace
//! period (the runtime sends SIGTERM, then SIGKILL), removal of the sandbox
//! and the pod's volumes, and finally the API object (grace 0, UID
//! precondition, so a new pod of the same name is never deleted). Stopping
//! and removing are separate steps so the worker can report the stopped
//! containers' exit codes (the terminal status) in between; this module
//! never writes a status itself.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, Preconditions};

use super::context::AgentContext;
use super::hooks::{self, HookTarget};
use super::runtime_view::PodRuntimeView;
use crate::agent::volumes;
use crate::runtime::RuntimeError;
use skiff_common::containers::is_sidecar;

/// Default `terminationGracePeriodSeconds`.
const DEFAULT_GRACE_SECONDS: i64 = 30;

/// The grace period for stopping `pod` now: the deletion's, else the spec's.
pub(crate) fn grace_period(pod: &Pod) -> Duration {
    let seconds = pod
        .metadata
        .deletion_grace_period_seconds
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        })
        .unwrap_or(DEFAULT_GRACE_SECONDS)
        .max(0);
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
}

/// Stops every container of the pod (running preStop hooks first), then
/// removes its sandboxes and volumes.
pub(crate) async fn kill_pod(
    ctx: &AgentContext,
    pod: Option<&Pod>,
    uid: &str,
    grace: Duration,
) -> Result<(), RuntimeError> {
    stop_pod(ctx, pod, uid, grace).await?;
    remove_pod(ctx, uid).await
}

/// Stops every container of the pod (running preStop hooks first) and its
/// sandboxes; the exited containers stay, so their exit codes can still
/// be read.
pub(crate) async fn stop_pod(
    ctx: &AgentContext,
    pod: Option<&Pod>,
    uid: &str,
    grace: Duration,
) -> Result<(), RuntimeError> {
    let runtime = ctx.runtime.as_ref();
    let view = PodRuntimeView::load(runtime, uid).await?;
    let deadline = Instant::now() + grace;
    let spec = pod.and_then(|p| p.spec.as_ref());
    // Sidecars outlive the containers they serve, as upstream's: the
    // others stop first (together), then the sidecars one by one in the
    // reverse of their order, each within what is left of the grace.
    let sidecars: Vec<&str> = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|c| is_sidecar(c))
        .map(|c| c.name.as_str())
        .collect();
    let (last, first): (Vec<_>, Vec<_>) = view
        .running()
        .partition(|c| sidecars.contains(&c.name.as_str()));
    let stop = |c: &super::runtime_view::ContainerInstance| {
        let container = spec.and_then(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
                .find(|spec| spec.name == c.name)
        });
        let pre_stop = container
            .and_then(|spec| spec.lifecycle.as_ref())
            .and_then(|l| l.pre_stop.as_ref());
        let regarding = pod.map(|pod| super::container_events::container_reference(pod, &c.name));
        if let Some(regarding) = &regarding {
            let message = format!("Stopping container {}", c.name);
            ctx.events.normal(regarding, "Killing", "", message);
        }
        let id = c.id.clone();
        async move {
            if let (Some(handler), Some(pod), Some(container)) = (pre_stop, pod, container) {
                let budget = deadline.saturating_duration_since(Instant::now());
                let pod_ip = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.pod_ip.clone())
                    .unwrap_or_default();
                let target = HookTarget {
                    runtime,
                    pod,
                    container,
                    container_id: &id,
                    pod_ip: &pod_ip,
                };
                if let Err(message) = hooks::run(&target, handler, budget).await {
                    tracing::info!(container = %id, %message, "preStop hook failed");
                    if let Some(regarding) = &regarding {
                        ctx.events
                            .warning(regarding, "FailedPreStopHook", "", message);
                    }
                }
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            match runtime.stop_container(&id, remaining).await {
                Err(e) if !e.is_not_found() => Err(e),
                _ => Ok(()),
            }
        }
    };
    for result in futures::future::join_all(first.into_iter().map(stop)).await {
        result?;
    }
    for name in sidecars.iter().rev() {
        for c in last.iter().filter(|c| c.name == *name) {
            stop(c).await?;
        }
    }
    for sandbox in &view.sandboxes {
        if let Err(e) = runtime.stop_pod_sandbox(&sandbox.id).await
            && !e.is_not_found()
        {
            return Err(e);
        }
    }
    Ok(())
}

/// Removes the pod's sandboxes (with their containers) and its volumes.
pub(crate) async fn remove_pod(ctx: &AgentContext, uid: &str) -> Result<(), RuntimeError> {
    let runtime = ctx.runtime.as_ref();
    let view = PodRuntimeView::load(runtime, uid).await?;
    for sandbox in &view.sandboxes {
        for step in [
            runtime.stop_pod_sandbox(&sandbox.id).await,
            runtime.remove_pod_sandbox(&sandbox.id).await,
        ] {
            if let Err(e) = step
                && !e.is_not_found()
            {
                return Err(e);
            }
        }
    }
    if let Some(cgroups) = &ctx.cgroups {
        cgroups.remove(uid);
        cgroups.weigh_burstable(
            ctx.pods
                .list()
                .iter()
                .map(|p| p.as_ref())
                .filter(|p| p.metadata.uid.as_deref() != Some(uid)),
        );
    }
    let dir = volumes::pod_dir(&ctx.agent_dir, uid);
    // Removing files through a mount (a pinned sub path, what a container
    // mounted back through Bidirectional propagation) would delete what it
    // shows: the directory stays until every mount under it is detached.
    if let Err(error) = volumes::mounts::detach_all_under(&dir) {
        tracing::warn!(dir = %dir.display(), %error, "pod directory kept: mounts under it stay");
        return Ok(());
    }
    if let Err(error) = std::fs::remove_dir_all(&dir)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(dir = %dir.display(), %error, "removing pod directory");
    }
    Ok(())
}

/// Deletes the pod object now that nothing of it runs.
pub(crate) async fn delete_object(ctx: &AgentContext, pod: &Pod) -> Result<(), kube::Error> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    delete_for_good(&api, pod).await
}

/// The final delete (grace 0), only of this very pod (its UID as a precondition), so a
/// new pod of the same name is never removed; a pod already gone (404) or replaced (409)
/// counts as deleted. The agent and the simulated nodes end their pods this one way.
pub(crate) async fn delete_for_good(api: &Api<Pod>, pod: &Pod) -> Result<(), kube::Error> {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api
        .delete(pod.metadata.name.as_deref().unwrap_or_default(), &params)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_comes_from_the_deletion_then_the_spec() {
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [], "terminationGracePeriodSeconds": 5}
        }))
        .unwrap();
        assert_eq!(grace_period(&pod), Duration::from_secs(5));
        pod.metadata.deletion_grace_period_seconds = Some(2);
        assert_eq!(grace_period(&pod), Duration::from_secs(2));
        pod.spec.as_mut().unwrap().termination_grace_period_seconds = None;
        pod.metadata.deletion_grace_period_seconds = None;
        assert_eq!(grace_period(&pod), Duration::from_secs(30));
    }
}
