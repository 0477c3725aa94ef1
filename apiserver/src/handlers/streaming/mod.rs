//! The pod subresources served by the pod's node: `pods/log` (a chunked
//! text stream), `pods/exec`, `pods/attach` and `pods/portforward` (upgraded
//! connections: WebSocket or SPDY, passed through untouched). The API server
//! checks the request against the pod, then proxies it to the node server
//! at the Node's InternalIP and `daemonEndpoints.kubeletEndpoint.port`
//! over TLS: the node must prove it is the pod's node
//! ([`crate::kubelet_client`]) before anything is sent, and the API server
//! authenticates with its own client certificate.

mod log_options;
pub(crate) mod node;
pub(crate) mod proxy;

use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;
use http::Method;
use serde_json::Value;

use crate::registry::Subresource;
use crate::routing::Target;
use crate::server::Inner;
use crate::status::ApiError;

use super::storage;

/// Whether the subresource is served by the pod's node.
pub(crate) fn is_streaming(sub: Option<Subresource>) -> bool {
    matches!(
        sub,
        Some(Subresource::Log | Subresource::Exec | Subresource::Attach | Subresource::PortForward)
    )
}

/// Serves a streaming subresource of a pod.
pub(crate) async fn serve(
    inner: Arc<Inner>,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let Some(sub) = target.subresource else {
        return Err(ApiError::MethodNotAllowed);
    };
    let allowed = match sub {
        Subresource::Log => request.method() == Method::GET,
        _ => request.method() == Method::GET || request.method() == Method::POST,
    };
    if !allowed {
        return Err(ApiError::MethodNotAllowed);
    }
    let (Some(namespace), Some(name)) = (target.namespace.as_deref(), target.name.as_deref())
    else {
        return Err(ApiError::MethodNotAllowed);
    };
    let query = request.uri().query().unwrap_or_default().to_string();
    let pairs = node::query_pairs(&query);
    // As upstream, the options are checked before the pod is looked up.
    if sub == Subresource::Log {
        log_options::check(name, &pairs)?;
    }
    let key = target.info.key(Some(namespace), name);
    let (pod, _) = storage::read_existing(&inner, &target.info, &key, name).await?;
    let path = match sub {
        Subresource::PortForward => format!("/portForward/{namespace}/{name}"),
        _ => {
            let asked = pairs
                .iter()
                .find(|(k, _)| k == "container")
                .map(|(_, v)| v.as_str())
                .filter(|c| !c.is_empty());
            let container = pick_container(&pod, name, asked)?;
            if sub != Subresource::Log {
                refuse_completed(&pod, sub)?;
            }
            let prefix = match sub {
                Subresource::Log => "containerLogs",
                Subresource::Exec => "exec",
                _ => "attach",
            };
            format!("/{prefix}/{namespace}/{name}/{container}")
        }
    };
    let node_name = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    if node_name.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    let location = node::locate(&inner, node_name).await?;
    let forwarded = node_query(sub, &pairs);
    let refs: Vec<&(String, String)> = forwarded.iter().collect();
    let uri = location.uri(&path, &node::encode_query(&refs));
    let Some(tls) = inner.config.kubelet_client.as_deref() else {
        return Err(ApiError::ServiceUnavailable(format!(
            "error dialing backend: node {node_name}: the API server has no client credentials for node servers"
        )));
    };
    match sub {
        Subresource::Log => proxy::get(tls, &location, &uri).await,
        _ => proxy::upgrade(tls, request, &location, &uri).await,
    }
}

/// The query the node server receives: without `container` (it is in the
/// path), and for port-forward the API's `ports` (repeated, or comma
/// separated as the Python client sends them) as the node's `port`.
fn node_query(sub: Subresource, pairs: &[(String, String)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, v) in pairs {
        match (sub, k.as_str()) {
            (_, "container") => {}
            (Subresource::PortForward, "ports") => out.extend(
                v.split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(|p| ("port".to_string(), p.to_string())),
            ),
            _ => out.push((k.clone(), v.clone())),
        }
    }
    out
}

/// The container a request is for: the one named (which must exist), else
/// the pod's only container.
fn pick_container(pod: &Value, pod_name: &str, asked: Option<&str>) -> Result<String, ApiError> {
    let names = |field: &str| -> Vec<String> {
        pod["spec"][field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str().map(String::from))
            .collect()
    };
    let containers = names("containers");
    let init = names("initContainers");
    let ephemeral = names("ephemeralContainers");
    match asked {
        Some(c) => {
            if containers
                .iter()
                .chain(&init)
                .chain(&ephemeral)
                .any(|n| n == c)
            {
                Ok(c.to_string())
            } else {
                Err(ApiError::BadRequest(format!(
                    "container {c} is not valid for pod {pod_name}"
                )))
            }
        }
        None if containers.len() == 1 => Ok(containers[0].clone()),
        None => {
            let mut message = format!(
                "a container name must be specified for pod {pod_name}, choose one of: [{}]",
                containers.join(" ")
            );
            if !init.is_empty() {
                message.push_str(&format!(
                    " or one of the init containers: [{}]",
                    init.join(" ")
                ));
            }
            Err(ApiError::BadRequest(message))
        }
    }
}

/// Upstream refuses exec and attach once the pod has finished.
fn refuse_completed(pod: &Value, sub: Subresource) -> Result<(), ApiError> {
    let phase = pod["status"]["phase"].as_str().unwrap_or_default();
    if phase == "Succeeded" || phase == "Failed" {
        let verb = if sub == Subresource::Exec {
            "exec into"
        } else {
            "attach to"
        };
        return Err(ApiError::BadRequest(format!(
            "cannot {verb} a container in a completed pod; current phase is {phase}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_container_defaults_to_the_only_one_and_must_exist() {
        let one = json!({"spec": {"containers": [{"name": "app"}]}});
        assert_eq!(pick_container(&one, "p", None).unwrap(), "app");
        assert_eq!(pick_container(&one, "p", Some("app")).unwrap(), "app");
        let err = pick_container(&one, "p", Some("x")).unwrap_err();
        assert_eq!(err.to_string(), "container x is not valid for pod p");
        let two = json!({"spec": {
            "containers": [{"name": "a"}, {"name": "b"}],
            "initContainers": [{"name": "i"}]}});
        let err = pick_container(&two, "p", None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i]"
        );
        assert_eq!(pick_container(&two, "p", Some("i")).unwrap(), "i");
    }

    #[test]
    fn port_forward_ports_become_the_node_port_parameter() {
        let pairs = vec![
            ("ports".to_string(), "80, 8080".to_string()),
            ("ports".to_string(), "9000".to_string()),
        ];
        let ports: Vec<String> = node_query(Subresource::PortForward, &pairs)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        assert_eq!(ports, ["port=80", "port=8080", "port=9000"]);
        let exec = vec![
            ("container".to_string(), "c".to_string()),
            ("command".to_string(), "ls".to_string()),
        ];
        assert_eq!(
            node_query(Subresource::Exec, &exec),
            [("command".to_string(), "ls".to_string())]
        );
    }

    #[test]
    fn completed_pods_refuse_exec() {
        let done = json!({"status": {"phase": "Succeeded"}});
        assert_eq!(
            refuse_completed(&done, Subresource::Exec)
                .unwrap_err()
                .to_string(),
            "cannot exec into a container in a completed pod; current phase is Succeeded"
        );
        let running = json!({"status": {"phase": "Running"}});
        assert!(refuse_completed(&running, Subresource::Attach).is_ok());
    }
}
