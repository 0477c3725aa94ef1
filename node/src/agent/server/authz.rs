//! Who may call the node server, decided as the kubelet's webhook mode does:
//! the caller is the user its verified client certificate names (CN the
//! user, O fields the groups); each request becomes the attributes
//! `<verb> nodes/<subresource>` on this node (verb from the method,
//! subresource from the path), and the API server answers a
//! SubjectAccessReview for them. Answers are cached briefly (allowed for
//! 5 minutes, denied for 30 seconds, as upstream) so an exec does not cost
//! a round trip each time.
//!
//! This module decides; it never reads pods or the runtime, and it never
//! lets a request through when the API server could not be asked.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http::Method;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;

use super::answer_cache::AnswerCache;

/// How long an allowed answer is reused.
pub(crate) const ALLOWED_TTL: Duration = Duration::from_secs(300);
/// How long a denied answer is reused.
pub(crate) const DENIED_TTL: Duration = Duration::from_secs(30);

/// The authenticated caller of a node server request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller {
    /// The user (the certificate's common name).
    pub name: String,
    /// Its groups (the certificate's organizations).
    pub groups: Vec<String>,
}

impl Caller {
    /// The identity in a client certificate (DER) the TLS layer already
    /// verified against the cluster CA; `None` when it names no user.
    pub fn from_certificate(der: &[u8]) -> Option<Self> {
        let (name, mut groups) = skiff_common::serving::certificate_user(der)?;
        if name.is_empty() {
            return None;
        }
        // As the API server's x509 authenticator: every certificate user is
        // authenticated.
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".to_string());
        }
        Some(Self { name, groups })
    }
}

/// What a request asks of this node: `verb nodes/subresource`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct NodeAction {
    /// `get`, `create`, `update`, `patch` or `delete`.
    pub verb: &'static str,
    /// `proxy`, `log`, `stats`, `metrics`, `spec` or `checkpoint`.
    pub subresource: &'static str,
}

impl NodeAction {
    /// The action of a request, or `None` for a method the kubelet gives
    /// no verb (such requests are refused).
    pub(crate) fn of(method: &Method, path: &str) -> Option<Self> {
        Some(Self {
            verb: verb_for(method)?,
            subresource: subresource_for(path),
        })
    }
}

/// The verb of an HTTP method, as the kubelet maps them.
pub(crate) fn verb_for(method: &Method) -> Option<&'static str> {
    match *method {
        Method::GET | Method::HEAD => Some("get"),
        Method::POST => Some("create"),
        Method::PUT => Some("update"),
        Method::PATCH => Some("patch"),
        Method::DELETE => Some("delete"),
        _ => None,
    }
}

/// The `nodes` subresource a path is authorized as: a few read-only
/// families have their own, so they can be granted without granting
/// exec; everything else (logs of containers, exec, attach, port-forward,
/// run) is `proxy`, the full power over the node.
pub(crate) fn subresource_for(path: &str) -> &'static str {
    let under = |prefix: &str| {
        path == prefix
            || path
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    if under("/stats") {
        "stats"
    } else if under("/metrics") {
        "metrics"
    } else if under("/logs") {
        "log"
    } else if under("/spec") {
        "spec"
    } else if under("/checkpoint") {
        "checkpoint"
    } else {
        "proxy"
    }
}

/// Why no decision could be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuthzError {
    /// The SubjectAccessReview could not be created.
    #[error("SubjectAccessReview for {user} ({verb} nodes/{subresource}): {source}")]
    Review {
        /// Who asked.
        user: String,
        /// The verb.
        verb: &'static str,
        /// The subresource.
        subresource: &'static str,
        /// The API error.
        source: kube::Error,
    },
}

/// A source of authorization decisions for one node.
#[async_trait]
pub(crate) trait Reviewer: Send + Sync + 'static {
    /// Whether `caller` may do `action` on this node.
    async fn review(&self, caller: &Caller, action: &NodeAction) -> Result<bool, AuthzError>;
}

/// Asks the API server through SubjectAccessReviews, with the node's own
/// client.
pub(crate) struct SubjectAccessReviewer {
    client: kube::Client,
    node_name: String,
}

impl SubjectAccessReviewer {
    /// A reviewer for `node_name` (the `name` of every review).
    pub(crate) fn new(client: kube::Client, node_name: impl Into<String>) -> Self {
        Self {
            client,
            node_name: node_name.into(),
        }
    }
}

/// The review that asks whether `caller` may do `action` on `node_name`.
pub(crate) fn review_for(
    node_name: &str,
    caller: &Caller,
    action: &NodeAction,
) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(caller.name.clone()),
            groups: Some(caller.groups.clone()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(action.verb.to_string()),
                group: Some(String::new()),
                version: Some("v1".to_string()),
                resource: Some("nodes".to_string()),
                subresource: Some(action.subresource.to_string()),
                name: Some(node_name.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[async_trait]
impl Reviewer for SubjectAccessReviewer {
    async fn review(&self, caller: &Caller, action: &NodeAction) -> Result<bool, AuthzError> {
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api
            .create(
                &PostParams::default(),
                &review_for(&self.node_name, caller, action),
            )
            .await
            .map_err(|source| AuthzError::Review {
                user: caller.name.clone(),
                verb: action.verb,
                subresource: action.subresource,
                source,
            })?;
        Ok(answer
            .status
            .is_some_and(|s| s.allowed && s.denied != Some(true)))
    }
}

/// A [`Reviewer`] in front of another that remembers its answers for a
/// while (allowed ones longer than denied ones); errors are never cached.
pub(crate) struct CachedReviewer {
    inner: Arc<dyn Reviewer>,
    allowed_ttl: Duration,
    denied_ttl: Duration,
    answers: AnswerCache<(Caller, NodeAction), bool>,
}

impl CachedReviewer {
    /// Upstream's lifetimes: [`ALLOWED_TTL`] and [`DENIED_TTL`].
    pub(crate) fn new(inner: Arc<dyn Reviewer>) -> Self {
        Self::with_ttls(inner, ALLOWED_TTL, DENIED_TTL)
    }

    /// Chosen lifetimes (tests).
    pub(crate) fn with_ttls(
        inner: Arc<dyn Reviewer>,
        allowed_ttl: Duration,
        denied_ttl: Duration,
    ) -> Self {
        Self {
            inner,
            allowed_ttl,
            denied_ttl,
            answers: AnswerCache::new(),
        }
    }
}

#[async_trait]
impl Reviewer for CachedReviewer {
    async fn review(&self, caller: &Caller, action: &NodeAction) -> Result<bool, AuthzError> {
        let key = (caller.clone(), action.clone());
        if let Some(allowed) = self.answers.get(&key) {
            return Ok(allowed);
        }
        let allowed = self.inner.review(caller, action).await?;
        let ttl = if allowed {
            self.allowed_ttl
        } else {
            self.denied_ttl
        };
        self.answers.insert(key, allowed, ttl);
        Ok(allowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn paths_map_to_the_kubelets_subresources() {
        for (path, want) in [
            ("/containerLogs/ns/pod/c", "proxy"),
            ("/exec/ns/pod/c", "proxy"),
            ("/attach/ns/pod/c", "proxy"),
            ("/portForward/ns/pod", "proxy"),
            ("/run/ns/pod/c", "proxy"),
            ("/logs", "log"),
            ("/logs/syslog", "log"),
            ("/stats", "stats"),
            ("/stats/summary", "stats"),
            ("/metrics", "metrics"),
            ("/metrics/cadvisor", "metrics"),
            ("/spec/", "spec"),
            ("/checkpoint/ns/pod/c", "checkpoint"),
            // Only whole path segments count: these are not the families.
            ("/logsx", "proxy"),
            ("/statsfoo/x", "proxy"),
            ("/", "proxy"),
            ("/pods", "proxy"),
        ] {
            assert_eq!(subresource_for(path), want, "{path}");
        }
    }

    #[test]
    fn methods_map_to_verbs() {
        assert_eq!(verb_for(&Method::GET), Some("get"));
        assert_eq!(verb_for(&Method::HEAD), Some("get"));
        assert_eq!(verb_for(&Method::POST), Some("create"));
        assert_eq!(verb_for(&Method::PUT), Some("update"));
        assert_eq!(verb_for(&Method::PATCH), Some("patch"));
        assert_eq!(verb_for(&Method::DELETE), Some("delete"));
        assert_eq!(verb_for(&Method::OPTIONS), None);
        let exec = NodeAction::of(&Method::POST, "/exec/ns/p/c").unwrap();
        assert_eq!((exec.verb, exec.subresource), ("create", "proxy"));
    }

    #[test]
    fn the_review_names_this_node_and_the_callers_identity() {
        let caller = Caller {
            name: "kube-apiserver-kubelet-client".into(),
            groups: vec!["system:authenticated".into()],
        };
        let review = review_for(
            "n1",
            &caller,
            &NodeAction::of(&Method::GET, "/stats").unwrap(),
        );
        let value = serde_json::to_value(&review).unwrap();
        assert_eq!(value["spec"]["user"], "kube-apiserver-kubelet-client");
        assert_eq!(value["spec"]["groups"][0], "system:authenticated");
        let attrs = &value["spec"]["resourceAttributes"];
        assert_eq!(attrs["verb"], "get");
        assert_eq!(attrs["resource"], "nodes");
        assert_eq!(attrs["subresource"], "stats");
        assert_eq!(attrs["name"], "n1");
        assert_eq!(attrs["version"], "v1");
    }

    /// A reviewer that always answers `allow` and counts how often it was asked.
    struct Counting {
        calls: AtomicUsize,
        allow: bool,
    }

    /// A `Counting` reviewer answering `allow`, behind a cache that keeps an
    /// allowance a minute and a denial not at all.
    fn counted_and_cached(allow: bool) -> (Arc<Counting>, CachedReviewer) {
        let inner = Arc::new(Counting {
            calls: AtomicUsize::new(0),
            allow,
        });
        let cached = CachedReviewer::with_ttls(
            inner.clone(),
            Duration::from_secs(60),
            Duration::from_millis(0),
        );
        (inner, cached)
    }

    #[async_trait]
    impl Reviewer for Counting {
        async fn review(&self, _: &Caller, _: &NodeAction) -> Result<bool, AuthzError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Ok(self.allow)
        }
    }

    #[tokio::test]
    async fn answers_are_reused_until_they_expire() {
        let caller = Caller {
            name: "u".into(),
            groups: vec![],
        };
        let action = NodeAction::of(&Method::GET, "/exec/a/b/c").unwrap();
        let (allow, cached) = counted_and_cached(true);
        assert!(cached.review(&caller, &action).await.unwrap());
        assert!(cached.review(&caller, &action).await.unwrap());
        assert_eq!(allow.calls.load(Ordering::SeqCst), 1);
        // Another user is a different question.
        let other = Caller {
            name: "v".into(),
            groups: vec![],
        };
        assert!(cached.review(&other, &action).await.unwrap());
        assert_eq!(allow.calls.load(Ordering::SeqCst), 2);

        // A denial that has expired is asked again.
        let (deny, cached) = counted_and_cached(false);
        assert!(!cached.review(&caller, &action).await.unwrap());
        assert!(!cached.review(&caller, &action).await.unwrap());
        assert_eq!(deny.calls.load(Ordering::SeqCst), 2);
    }
}
