//! Errors of the CRI client, keeping the gRPC status code and message so the
//! pod workers can tell "not found" from "runtime down" from "bad request".

use std::time::Duration;

/// A failed CRI call.
#[derive(Debug, thiserror::Error)]
pub enum CriError {
    /// The endpoint is not a usable unix socket address.
    #[error("invalid CRI endpoint {endpoint}: {reason}")]
    InvalidEndpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The runtime answered with a gRPC error status.
    #[error("CRI {method}: {code:?}: {message}")]
    Rpc {
        /// The CRI method called, e.g. `RunPodSandbox`.
        method: &'static str,
        /// The gRPC status code.
        code: tonic::Code,
        /// The runtime's message.
        message: String,
    },
    /// No answer within the call's deadline.
    #[error("CRI {method}: no answer within {after:?}")]
    Timeout {
        /// The CRI method called.
        method: &'static str,
        /// The deadline that passed.
        after: Duration,
    },
    /// The runtime answered without a field CRI says it must set.
    #[error("CRI {method}: response lacks {field}")]
    MissingField {
        /// The CRI method called.
        method: &'static str,
        /// The missing field.
        field: &'static str,
    },
}

impl CriError {
    pub(crate) fn rpc(method: &'static str, status: tonic::Status) -> Self {
        Self::Rpc {
            method,
            code: status.code(),
            message: status.message().to_string(),
        }
    }

    /// The gRPC code: the runtime's own for `Rpc`, `DeadlineExceeded` for a
    /// local timeout, and `Unavailable` (from tonic) when the socket cannot be reached.
    pub fn code(&self) -> tonic::Code {
        match self {
            Self::Rpc { code, .. } => *code,
            Self::Timeout { .. } => tonic::Code::DeadlineExceeded,
            Self::InvalidEndpoint { .. } => tonic::Code::InvalidArgument,
            Self::MissingField { .. } => tonic::Code::Internal,
        }
    }

    /// The runtime does not know the sandbox, container or image.
    pub fn is_not_found(&self) -> bool {
        self.code() == tonic::Code::NotFound
    }

    /// The runtime could not be reached (down, restarting, socket missing).
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self.code(),
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
        )
    }
}
