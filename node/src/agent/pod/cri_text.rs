//! CRI errors in the words a kubelet's gRPC client gives them: the full
//! `rpc error: code = <Code> desc = <message>` (what pull failures show)
//! and the bare status message (what `CreateContainerError` and
//! `RunContainerError` show), rather than skiff's own `CRI <method>: ...`.

use crate::cri::CriError;
use crate::runtime::RuntimeError;

/// What Go's context says when a call's deadline passes.
const DEADLINE: &str = "context deadline exceeded";

/// A gRPC code as grpc-go names it (`OK`, `Canceled`; the rest as tonic).
fn go_code(code: tonic::Code) -> String {
    match code {
        tonic::Code::Ok => "OK".to_string(),
        tonic::Code::Cancelled => "Canceled".to_string(),
        other => format!("{other:?}"),
    }
}

/// The error as grpc-go prints a status error:
/// `rpc error: code = NotFound desc = ...`.
pub(crate) fn grpc_error(e: &RuntimeError) -> String {
    match e {
        RuntimeError::Cri(CriError::Rpc { code, message, .. }) => {
            format!("rpc error: code = {} desc = {message}", go_code(*code))
        }
        RuntimeError::Cri(CriError::Timeout { .. }) => {
            format!("rpc error: code = DeadlineExceeded desc = {DEADLINE}")
        }
        other => other.to_string(),
    }
}

/// The error's status message alone (grpc-go's `status.Message()`), which
/// a kubelet puts in `Error: ...` events and waiting messages.
pub(crate) fn status_message(e: &RuntimeError) -> String {
    match e {
        RuntimeError::Cri(CriError::Rpc { message, .. }) => message.clone(),
        RuntimeError::Cri(CriError::Timeout { .. }) => DEADLINE.to_string(),
        other => other.to_string(),
    }
}

/// A failed `PullImage` as the kubelet's image client reports it: an
/// `Unknown` status by its message alone (upstream strips the code, which
/// says nothing), any other as the full gRPC error.
pub(crate) fn pull_error(e: &RuntimeError) -> String {
    match e {
        RuntimeError::Cri(CriError::Rpc {
            code: tonic::Code::Unknown,
            message,
            ..
        }) => message.clone(),
        other => grpc_error(other),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn rpc(code: tonic::Code, message: &str) -> RuntimeError {
        RuntimeError::Cri(CriError::Rpc {
            method: "PullImage",
            code,
            message: message.to_string(),
        })
    }

    #[test]
    fn errors_read_as_grpc_go_prints_them() {
        let missing = rpc(tonic::Code::NotFound, "no such image");
        assert_eq!(
            grpc_error(&missing),
            "rpc error: code = NotFound desc = no such image"
        );
        assert_eq!(status_message(&missing), "no such image");
        assert_eq!(
            pull_error(&missing),
            "rpc error: code = NotFound desc = no such image"
        );
        let unknown = rpc(tonic::Code::Unknown, "failed to pull and unpack image");
        assert_eq!(pull_error(&unknown), "failed to pull and unpack image");
        assert_eq!(
            grpc_error(&rpc(tonic::Code::Cancelled, "stop")),
            "rpc error: code = Canceled desc = stop"
        );
        let late = RuntimeError::Cri(CriError::Timeout {
            method: "PullImage",
            after: Duration::from_secs(1),
        });
        assert_eq!(
            pull_error(&late),
            "rpc error: code = DeadlineExceeded desc = context deadline exceeded"
        );
        assert_eq!(status_message(&late), "context deadline exceeded");
        let refused = RuntimeError::Failed("no".into());
        assert_eq!(status_message(&refused), "no");
    }
}
