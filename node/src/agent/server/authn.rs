//! Who sent a node server request that came without a client certificate,
//! as the kubelet's webhook token authentication decides it: the bearer
//! token is put to the API server in a TokenReview (with the node's own
//! client), and the user the review names is the caller. So a monitoring
//! agent's service account (Prometheus, metrics-server) can call the node
//! as it calls a kubelet, and [`super::authz`] then decides what it may do.
//!
//! Answers are kept for two minutes (the kubelet's default), under the
//! token's SHA-256 so that no token is held. A token the API server does
//! not accept is answered as no token is (401); an API server that cannot
//! be asked lets nobody through.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::Api;
use kube::api::PostParams;
use sha2::{Digest, Sha256};

use super::answer_cache::AnswerCache;
use super::authz::Caller;

/// How long an answer about a token is reused.
pub(crate) const TOKEN_TTL: Duration = Duration::from_secs(120);

/// Why a token could not be judged.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuthnError {
    /// The TokenReview could not be created.
    #[error("TokenReview: {0}")]
    Review(#[source] kube::Error),
}

/// A source of answers about bearer tokens.
#[async_trait]
pub(crate) trait TokenAuthenticator: Send + Sync + 'static {
    /// The caller `token` proves, or `None` when it proves no one.
    async fn authenticate(&self, token: &str) -> Result<Option<Caller>, AuthnError>;
}

/// The `Authorization: Bearer` token of a request, when it has one.
pub(crate) fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Asks the API server through TokenReviews, with the node's own client.
pub(crate) struct TokenReviewer {
    client: kube::Client,
}

impl TokenReviewer {
    /// A reviewer asking with `client` (the node's identity).
    pub(crate) fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

#[async_trait]
impl TokenAuthenticator for TokenReviewer {
    async fn authenticate(&self, token: &str) -> Result<Option<Caller>, AuthnError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(AuthnError::Review)?;
        let Some(status) = answer.status.filter(|s| s.authenticated == Some(true)) else {
            return Ok(None);
        };
        let Some(user) = status
            .user
            .filter(|u| u.username.as_deref().is_some_and(|n| !n.is_empty()))
        else {
            return Ok(None);
        };
        Ok(Some(Caller {
            name: user.username.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
        }))
    }
}

/// Keeps [`TokenAuthenticator`] answers for a while; errors are not kept.
pub(crate) struct CachedTokens {
    inner: Arc<dyn TokenAuthenticator>,
    ttl: Duration,
    /// Answers by the token's SHA-256.
    answers: AnswerCache<[u8; 32], Option<Caller>>,
}

impl CachedTokens {
    /// Answers kept for [`TOKEN_TTL`].
    pub(crate) fn new(inner: Arc<dyn TokenAuthenticator>) -> Self {
        Self {
            inner,
            ttl: TOKEN_TTL,
            answers: AnswerCache::new(),
        }
    }
}

#[async_trait]
impl TokenAuthenticator for CachedTokens {
    async fn authenticate(&self, token: &str) -> Result<Option<Caller>, AuthnError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(caller) = self.answers.get(&key) {
            return Ok(caller);
        }
        let caller = self.inner.authenticate(token).await?;
        self.answers.insert(key, caller.clone(), self.ttl);
        Ok(caller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn only_a_bearer_scheme_with_a_token_is_read() {
        let headers = |value: &str| {
            let mut h = http::HeaderMap::new();
            h.insert(http::header::AUTHORIZATION, value.parse().unwrap());
            h
        };
        assert_eq!(bearer_token(&headers("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&headers("bearer abc ")), Some("abc"));
        assert_eq!(bearer_token(&headers("Basic YWxpY2U6cHc=")), None);
        assert_eq!(bearer_token(&headers("Bearer ")), None);
        assert_eq!(bearer_token(&headers("Bearer")), None);
        assert_eq!(bearer_token(&http::HeaderMap::new()), None);
    }

    struct Counting {
        asked: Mutex<u32>,
    }

    #[async_trait]
    impl TokenAuthenticator for Counting {
        async fn authenticate(&self, token: &str) -> Result<Option<Caller>, AuthnError> {
            *self.asked.lock().unwrap() += 1;
            Ok((token == "good").then(|| Caller {
                name: "prometheus".into(),
                groups: vec![],
            }))
        }
    }

    #[tokio::test]
    async fn answers_are_kept_for_a_while_both_ways() {
        let inner = Arc::new(Counting {
            asked: Mutex::new(0),
        });
        let cached = CachedTokens::new(inner.clone());
        for _ in 0..3 {
            assert_eq!(
                cached.authenticate("good").await.unwrap().map(|c| c.name),
                Some("prometheus".to_string())
            );
            assert_eq!(cached.authenticate("bad").await.unwrap(), None);
        }
        assert_eq!(*inner.asked.lock().unwrap(), 2);
    }
}
