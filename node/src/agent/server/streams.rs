//! `/exec/{ns}/{pod}/{container}`, `/attach/{ns}/{pod}/{container}` and
//! `/portForward/{ns}/{pod}`: ask CRI for the runtime's streaming URL, then
//! connect the client's upgraded connection to it — proxied as it is when
//! the runtime speaks the client's protocol, else through a bridge
//! (remote-command WebSocket to SPDY) or a tunnel (SPDY inside WebSocket).

use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use super::NodeState;
use super::status::failure;
use super::target;
use super::{bridge, tunnel, upgrade};
use crate::runtime::{RuntimeError, cri_api};

/// The query parameters of a request, decoded, in order (keys repeat:
/// `command=sh&command=-c`).
pub(crate) fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

/// The stream flags of exec and attach (`stdin=true`, or `1` as older
/// clients send).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct StreamFlags {
    /// Forward the client's input.
    pub stdin: bool,
    /// Return the output.
    pub stdout: bool,
    /// Return the error output (never with a TTY, which merges it).
    pub stderr: bool,
    /// Allocate a terminal.
    pub tty: bool,
}

impl StreamFlags {
    /// Reads the flags from the query.
    pub(crate) fn parse(pairs: &[(String, String)]) -> Self {
        let flag = |name: &str| {
            pairs
                .iter()
                .any(|(k, v)| k == name && matches!(v.as_str(), "1" | "true" | "True"))
        };
        let tty = flag("tty");
        Self {
            stdin: flag("stdin"),
            stdout: flag("stdout"),
            stderr: flag("stderr") && !tty,
            tty,
        }
    }

    /// The refusal of a request that asks for no stream at all.
    fn refusal(&self) -> Option<Response> {
        (!(self.stdin || self.stdout || self.stderr)).then(|| {
            failure(
                StatusCode::BAD_REQUEST,
                "you must specify at least 1 of stdin, stdout, stderr",
            )
        })
    }
}

/// Runs a command in a container and proxies its streams.
pub(crate) async fn exec(
    State(state): State<NodeState>,
    Path(names): Path<(String, String, String)>,
    request: Request,
) -> Response {
    let pairs = query_pairs(request.uri().query());
    let flags = StreamFlags::parse(&pairs);
    if let Some(refused) = flags.refusal() {
        return refused;
    }
    let cmd: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    if cmd.is_empty() {
        return failure(StatusCode::BAD_REQUEST, "you must specify a command");
    }
    container_session(&state, names, request, &flags, |container_id| {
        state.runtime.exec_url(cri_api::ExecRequest {
            container_id,
            cmd,
            tty: flags.tty,
            stdin: flags.stdin,
            stdout: flags.stdout,
            stderr: flags.stderr,
        })
    })
    .await
}

/// Attaches to a container's main process and proxies its streams.
pub(crate) async fn attach(
    State(state): State<NodeState>,
    Path(names): Path<(String, String, String)>,
    request: Request,
) -> Response {
    let flags = StreamFlags::parse(&query_pairs(request.uri().query()));
    if let Some(refused) = flags.refusal() {
        return refused;
    }
    container_session(&state, names, request, &flags, |container_id| {
        state.runtime.attach_url(cri_api::AttachRequest {
            container_id,
            stdin: flags.stdin,
            tty: flags.tty,
            stdout: flags.stdout,
            stderr: flags.stderr,
        })
    })
    .await
}

/// A streaming session with one running container, proxied to the client: finds
/// `container` in the pod `namespace/name`, asks the runtime for the session's URL
/// with `session_url` (given the container's id) and bridges the client's upgraded
/// connection to it. Exec and attach differ only in the URL they ask for; a missing
/// pod or container, or a runtime error, is answered as `TargetError` says.
async fn container_session<Fut>(
    state: &NodeState,
    (namespace, name, container): (String, String, String),
    request: Request,
    flags: &StreamFlags,
    session_url: impl FnOnce(String) -> Fut,
) -> Response
where
    Fut: Future<Output = Result<String, RuntimeError>>,
{
    let url = async {
        let pod = target::pod(&state.pods, &namespace, &name)?;
        let container_id =
            target::running_container(state.runtime.as_ref(), &pod, &container).await?;
        Ok::<_, target::TargetError>(session_url(container_id).await?)
    }
    .await;
    match url {
        Ok(url) => remote_command(request, &url, flags.clone()).await,
        Err(e) => e.into_response(),
    }
}

/// Forwards ports of a pod's network namespace.
pub(crate) async fn port_forward(
    State(state): State<NodeState>,
    Path((namespace, name)): Path<(String, String)>,
    mut request: Request,
) -> Response {
    let mut ports = Vec::new();
    for (k, v) in query_pairs(request.uri().query()) {
        if k != "port" {
            continue;
        }
        match v.parse::<u16>() {
            Ok(p) if p > 0 => ports.push(i32::from(p)),
            _ => {
                return failure(
                    StatusCode::BAD_REQUEST,
                    format!("invalid port {v:?}: must be 1-65535"),
                );
            }
        }
    }
    let url = async {
        let pod = target::pod(&state.pods, &namespace, &name)?;
        let pod_sandbox_id = target::ready_sandbox(state.runtime.as_ref(), &pod).await?;
        Ok::<_, target::TargetError>(
            state
                .runtime
                .port_forward_url(&pod_sandbox_id, &ports)
                .await?,
        )
    }
    .await;
    let url = match url {
        Ok(url) => url,
        Err(e) => return e.into_response(),
    };
    let tunnelled = upgrade::is_websocket(&request)
        && upgrade::offered_protocols(request.headers())
            .iter()
            .any(|p| p == tunnel::TUNNEL_PROTOCOL);
    if !tunnelled {
        return proxied(request, &url).await;
    }
    let runtime = match upgrade::spdy_upstream(&url, None, tunnel::PORT_FORWARD_PROTOCOL).await {
        Ok(Ok(io)) => io,
        Ok(Err(refused)) => return refused,
        Err(e) => return e.into_response(),
    };
    let (response, client) = match upgrade::accept_websocket(&mut request, tunnel::TUNNEL_PROTOCOL)
    {
        Ok(pair) => pair,
        Err(e) => return e.into_response(),
    };
    tokio::spawn(async move {
        match client.await {
            Ok(client) => tunnel::run(client, runtime).await,
            Err(error) => tracing::debug!(%error, "port-forward upgrade failed"),
        }
    });
    response
}

/// Exec or attach on the runtime's `url`: WebSocket clients speaking the
/// remote-command channels are bridged to SPDY; anything else (SPDY
/// clients, base64 channels) is proxied as it is.
async fn remote_command(mut request: Request, url: &str, flags: StreamFlags) -> Response {
    let offered = upgrade::offered_protocols(request.headers());
    let protocol = [upgrade::V5_CHANNEL, upgrade::V4_CHANNEL]
        .into_iter()
        .find(|p| offered.iter().any(|o| o == p));
    let Some(protocol) = protocol.filter(|_| upgrade::is_websocket(&request)) else {
        return proxied(request, url).await;
    };
    let runtime = match upgrade::spdy_upstream(url, None, upgrade::V4_CHANNEL).await {
        Ok(Ok(io)) => io,
        Ok(Err(refused)) => return refused,
        Err(e) => return e.into_response(),
    };
    let (response, client) = match upgrade::accept_websocket(&mut request, protocol) {
        Ok(pair) => pair,
        Err(e) => return e.into_response(),
    };
    tokio::spawn(async move {
        match client.await {
            Ok(client) => bridge::run(client, runtime, flags).await,
            Err(error) => tracing::debug!(%error, "exec upgrade failed"),
        }
    });
    response
}

async fn proxied(request: Request, url: &str) -> Response {
    match upgrade::proxy(request, url).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode_repeated_keys_and_flags() {
        let pairs = query_pairs(Some(
            "command=sh&command=-c&command=echo+hi%3B%20exit%203&stdin=true&stdout=1&stderr=true&tty=true",
        ));
        let commands: Vec<&str> = pairs
            .iter()
            .filter(|(k, _)| k == "command")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(commands, ["sh", "-c", "echo hi; exit 3"]);
        assert_eq!(
            StreamFlags::parse(&pairs),
            StreamFlags {
                stdin: true,
                stdout: true,
                stderr: false,
                tty: true
            }
        );
        assert_eq!(query_pairs(Some("a=100%"))[0].1, "100%");
        assert_eq!(query_pairs(Some("a=%zz"))[0].1, "%zz");
    }
}
