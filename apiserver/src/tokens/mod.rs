//! Service-account tokens as upstream issues them: the API server signs
//! short-lived JWTs (ES256, key kept in the data dir) through the
//! `serviceaccounts/<name>/token` subresource (TokenRequest), optionally bound
//! to a pod or secret, and accepts them back as the service account's
//! identity while the account and the bound object still exist; the
//! signing key is published for relying parties (`discovery`).

pub(crate) mod admission;
mod claims;
pub(crate) mod discovery;
mod request;
mod signer;
mod verify;

pub(crate) use request::create_token;
pub(crate) use signer::{SignerError, TokenSigner};
pub(crate) use verify::ServiceAccountTokens;

/// The issuer and default audience of every token this server signs (the
/// in-cluster name of the API server, as upstream defaults them).
pub(crate) const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// Token lifetime when a TokenRequest names none (upstream: one hour).
pub(crate) const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

/// The shortest lifetime a TokenRequest may ask for (upstream: ten minutes).
pub(crate) const MIN_EXPIRATION_SECONDS: i64 = 600;

/// Reads one object of a core/v1 resource from the watch cache (every
/// write waits for the cache, so a just-written object is there).
pub(crate) fn read_core(
    inner: &crate::server::Inner,
    resource: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<serde_json::Value>, crate::status::ApiError> {
    use crate::status::ApiError;
    let info = inner
        .registry
        .get("", "v1", resource)
        .ok_or_else(|| ApiError::Internal(format!("{resource} are not registered")))?;
    let key = info.key(Some(namespace), name);
    Ok(inner
        .cache(&info)?
        .snapshot()
        .objects
        .get(&key)
        .map(|o| o.to_value()))
}

/// [`read_core`], a missing object being a 404 for it.
pub(crate) fn read_core_found(
    inner: &crate::server::Inner,
    resource: &str,
    namespace: &str,
    name: &str,
) -> Result<serde_json::Value, crate::status::ApiError> {
    read_core(inner, resource, namespace, name)?.ok_or_else(|| crate::status::ApiError::NotFound {
        resource: resource.to_string(),
        group: String::new(),
        name: name.to_string(),
    })
}

/// The user name of a service account.
pub(crate) fn user_name(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The groups every service account of `namespace` belongs to (without
/// `system:authenticated`, which every user gets).
pub(crate) fn groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{namespace}"),
    ]
}
