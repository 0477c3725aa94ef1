//! Accepting service-account tokens: a valid signature and lifetime are not
//! enough, the account must still exist with the UID the token names, and so
//! must the pod or secret the token is bound to.

use std::sync::Arc;

use super::ISSUER;
use super::claims::{Claims, ObjectRef};
use crate::authn::UserInfo;
use crate::object::meta_str;
use crate::server::Inner;

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

    /// The service account's identity, when `token` is valid now.
    pub fn authenticate(&self, token: &str) -> Option<UserInfo> {
        let claims = self.inner.tokens.verify(token, &[ISSUER])?;
        self.still_bound(&claims).then(|| {
            let k = &claims.kubernetes;
            let mut user = UserInfo::service_account(&k.namespace, &k.serviceaccount.name);
            user.uid = k.serviceaccount.uid.clone();
            user
        })
    }

    fn still_bound(&self, claims: &Claims) -> bool {
        let k = &claims.kubernetes;
        let exists = |resource: &str, reference: &ObjectRef| {
            super::read_core(&self.inner, resource, &k.namespace, &reference.name)
                .ok()
                .flatten()
                .is_some_and(|o| meta_str(&o, "uid") == Some(reference.uid.as_str()))
        };
        exists("serviceaccounts", &k.serviceaccount)
            && k.pod.as_ref().is_none_or(|p| exists("pods", p))
            && k.secret.as_ref().is_none_or(|s| exists("secrets", s))
    }
}
