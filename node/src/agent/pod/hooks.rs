//! Lifecycle hooks, as a kubelet runs them: `postStart` right after a
//! container starts (a failure kills it, for its restart policy to bring it
//! back) and `preStop` before it is stopped, within its grace period. A
//! hook is a command run in the container, an HTTP GET to the pod (its port
//! by number or by name) or a sleep.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Pod};

use super::container_events::pod_name;
use super::probes::{container_port, http_get};
use crate::runtime::Runtime;

/// Where a hook runs.
pub(crate) struct HookTarget<'a> {
    pub runtime: &'a dyn Runtime,
    pub pod: &'a Pod,
    pub container: &'a Container,
    pub container_id: &'a str,
    pub pod_ip: &'a str,
}

/// Runs `handler`, taking at most `budget`; a failure says what went
/// wrong in a kubelet's words.
pub(crate) async fn run(
    target: &HookTarget<'_>,
    handler: &LifecycleHandler,
    budget: Duration,
) -> Result<(), String> {
    let (container, pod) = (&target.container.name, pod_name(target.pod));
    if let Some(exec) = &handler.exec {
        let command = exec.command.clone().unwrap_or_default();
        let failed = |error: String, output: &str| {
            format!(
                "Exec lifecycle hook ([{}]) for Container {container:?} in Pod {pod:?} failed - error: {error}, message: {output:?}",
                command.join(" ")
            )
        };
        return match target
            .runtime
            .exec_sync(target.container_id, &command, budget)
            .await
        {
            Ok(out) if out.exit_code == 0 => Ok(()),
            Ok(out) => {
                let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
                output.push_str(&String::from_utf8_lossy(&out.stderr));
                let error = format!(
                    "command '{}' exited with {}: {}",
                    command.join(" "),
                    out.exit_code,
                    String::from_utf8_lossy(&out.stderr)
                );
                Err(failed(error, &output))
            }
            Err(e) => Err(failed(e.to_string(), "")),
        };
    }
    if let Some(http) = &handler.http_get {
        let path = http.path.as_deref().unwrap_or("/");
        let failed = |error: String| {
            format!(
                "HTTP lifecycle hook ({path}) for Container {container:?} in Pod {pod:?} failed - error: {error}"
            )
        };
        let port = container_port(&http.port, target.container)
            .ok_or_else(|| failed(format!("couldn't find port: {:?}", http.port)))?;
        // Any answer will do: a kubelet does not look at a hook's status code.
        return match tokio::time::timeout(budget, http_get(http, port, target.pod_ip)).await {
            Ok(answered) => answered.map(drop).map_err(failed),
            Err(_) => Err(failed("context deadline exceeded".to_owned())),
        };
    }
    if let Some(sleep) = &handler.sleep {
        let seconds = Duration::from_secs(u64::try_from(sleep.seconds).unwrap_or(0));
        tokio::time::sleep(seconds.min(budget)).await;
        return Ok(());
    }
    // tcpSocket is accepted by the API for old manifests but does nothing,
    // as upstream's kubelet does nothing with it.
    Ok(())
}
