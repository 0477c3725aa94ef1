//! Accepting service-account tokens: a valid signature and lifetime are not
//! enough, the account must still exist with the UID the token names, and so
//! must the pod or secret the token is bound to.

use std::sync::Arc;

use super::ISSUER;
use super::claims::{Claims, ObjectRef};
use crate::authn::UserInfo;
use crate::object::meta_str;
use crate::server::Inner;

/// The user extra naming the pod a token is bound to.
pub(super) const EXTRA_POD_NAME: &str = "authentication.kubernetes.io/pod-name";
/// The user extra holding that pod's UID.
pub(super) const EXTRA_POD_UID: &str = "authentication.kubernetes.io/pod-uid";
/// The user extra naming the node a token is bound to (or its pod ran on).
pub(super) const EXTRA_NODE_NAME: &str = "authentication.kubernetes.io/node-name";
/// The user extra holding that node's UID.
pub(super) const EXTRA_NODE_UID: &str = "authentication.kubernetes.io/node-uid";
/// The user extra identifying the credential itself (`JTI=<id>`).
pub(super) const EXTRA_CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

/// Checks tokens against the server's signing key and current objects.
#[derive(Clone)]
pub struct ServiceAccountTokens {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ServiceAccountTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountTokens")
            .field("signer", &self.inner.tokens)
            .finish()
    }
}

impl ServiceAccountTokens {
    pub(crate) fn new(inner: Arc<Inner>) -> Self {
        Self { inner }
    }

    /// Whether `token` has the shape of a JWT (so it is ours to judge).
    pub fn looks_like_jwt(token: &str) -> bool {
        token.split('.').count() == 3
    }

    /// The service account's identity, when `token` is valid now for this
    /// API server.
    pub fn authenticate(&self, token: &str) -> Option<UserInfo> {
        self.authenticate_for(token, &[ISSUER.to_string()])
            .map(|(user, _)| user)
    }

    /// The service account's identity and the audiences (of `audiences`)
    /// the token was issued for, when it is valid now for one of them.
    pub fn authenticate_for(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Option<(UserInfo, Vec<String>)> {
        let wanted: Vec<&str> = audiences.iter().map(String::as_str).collect();
        let claims = self.inner.tokens.verify(token, &wanted)?;
        if !self.still_bound(&claims) {
            return None;
        }
        let k = &claims.kubernetes;
        let mut user = UserInfo::service_account(&k.namespace, &k.serviceaccount.name);
        user.uid = k.serviceaccount.uid.clone();
        // As upstream, a pod-bound token tells authorizers which pod it
        // was issued to, and every token its own id.
        if let Some(pod) = &k.pod {
            user.extra
                .insert(EXTRA_POD_NAME.into(), vec![pod.name.clone()]);
            user.extra
                .insert(EXTRA_POD_UID.into(), vec![pod.uid.clone()]);
        }
        if let Some(node) = &k.node {
            user.extra
                .insert(EXTRA_NODE_NAME.into(), vec![node.name.clone()]);
            user.extra
                .insert(EXTRA_NODE_UID.into(), vec![node.uid.clone()]);
        }
        if !claims.jti.is_empty() {
            user.extra.insert(
                EXTRA_CREDENTIAL_ID.into(),
                vec![format!("JTI={}", claims.jti)],
            );
        }
        let matched = audiences
            .iter()
            .filter(|a| claims.aud.contains(a))
            .cloned()
            .collect();
        Some((user, matched))
    }

    fn still_bound(&self, claims: &Claims) -> bool {
        let k = &claims.kubernetes;
        let exists = |resource: &str, reference: &ObjectRef| {
            super::read_core(&self.inner, resource, &k.namespace, &reference.name)
                .ok()
                .flatten()
                .is_some_and(|o| meta_str(&o, "uid") == Some(reference.uid.as_str()))
        };
        // A pod-bound token's node is a fact about where the pod ran, not a
        // binding (upstream checks the node only of a node-bound token).
        let node_bound = k.pod.is_none() && k.secret.is_none();
        exists("serviceaccounts", &k.serviceaccount)
            && k.pod.as_ref().is_none_or(|p| exists("pods", p))
            && k.secret.as_ref().is_none_or(|s| exists("secrets", s))
            && (!node_bound || k.node.as_ref().is_none_or(|n| exists("nodes", n)))
    }
}
