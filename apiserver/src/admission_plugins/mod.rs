//! Validating admission that depends on who writes: the checks upstream
//! runs as admission plugins after an object is defaulted and validated and
//! before it is stored (NodeRestriction, RBAC's escalation checks, and
//! later Pod Security and quota). Each plugin is a module here; [`admit`]
//! runs them in order, and the first refusal wins.
//!
//! Plugins must not write anything: a refused request leaves no trace.

pub(crate) mod node_restriction;

use serde_json::Value;

use crate::authn::UserInfo;
use crate::registry::{ResourceInfo, Subresource};
use crate::server::Inner;
use crate::status::ApiError;

/// What a write does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
}

/// One write, as the plugins see it.
pub(crate) struct WriteRequest<'a> {
    pub user: &'a UserInfo,
    pub operation: Operation,
    pub info: &'a ResourceInfo,
    pub subresource: Option<Subresource>,
    /// The stored object (updates and deletes; for an eviction the pod,
    /// for a token request the service account).
    pub old: Option<&'a Value>,
    /// The object about to be stored (creates and updates), after defaults
    /// and validation.
    pub new: Option<&'a Value>,
}

/// Runs every plugin on `request`.
pub(crate) async fn admit(inner: &Inner, request: &WriteRequest<'_>) -> Result<(), ApiError> {
    tracing::trace!(
        user = %request.user.name,
        operation = ?request.operation,
        resource = %request.info.qualified(),
        subresource = ?request.subresource.map(Subresource::name),
        has_old = request.old.is_some(),
        has_new = request.new.is_some(),
        "admission plugins"
    );
    node_restriction::admit(inner, request)?;
    Ok(())
}
