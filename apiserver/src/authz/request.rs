//! Upstream's RequestInfo: what an HTTP request asks to do, read from its
//! method, path and query alone (before any routing), so that a request
//! for something that does not exist is refused the same way as one for
//! something that does.

use http::Method;

use super::{Attributes, RequestKind, ResourceAttributes};
use crate::authn::UserInfo;
use crate::kinds::{GroupResource, Pods};

/// Path segments that a namespace object has as its own subresources
/// (`/api/v1/namespaces/<ns>/status`), not as a namespaced collection.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

/// Pod subresources that open a stream: upstream authorizes them as
/// `create` whichever method opens them (a WebSocket upgrade is a GET).
const STREAMING_SUBRESOURCES: &[&str] = &["exec", "attach", "portforward"];

/// The attributes of a request by `user`.
pub fn attributes(user: UserInfo, method: &Method, path: &str, query: Option<&str>) -> Attributes {
    let (verb, request) = describe(method, path, query);
    Attributes {
        user,
        verb,
        request,
    }
}

/// What one request asks to do, read once from its method, path and query
/// and kept in its extensions, so that the layers in front of the handlers
/// (metrics, audit, timeout, authorization, flow control) share one reading
/// instead of each parsing the path again, as upstream's filters share the
/// RequestInfo in the request's context.
#[derive(Debug)]
pub(crate) struct RequestInfo {
    /// The verb, as authorization names it (`get`, `list`, `watch`, …).
    pub(crate) verb: String,
    /// What the request is about.
    pub(crate) kind: RequestKind,
}

/// Verbs that stream rather than answer once.
const LONG_RUNNING_VERBS: &[&str] = &["watch", "proxy"];

/// Subresources that open a stream or a log.
const LONG_RUNNING_SUBRESOURCES: &[&str] = &["attach", "exec", "proxy", "log", "portforward"];

impl RequestInfo {
    /// The request's info: read on first use, then shared from its
    /// extensions (nothing rewrites a request's method, path or query on
    /// its way through the layers).
    pub(crate) fn of(request: &mut axum::extract::Request) -> std::sync::Arc<RequestInfo> {
        if let Some(info) = request.extensions().get::<std::sync::Arc<RequestInfo>>() {
            return info.clone();
        }
        let uri = request.uri();
        let (verb, kind) = describe(request.method(), uri.path(), uri.query());
        let info = std::sync::Arc::new(RequestInfo { verb, kind });
        request.extensions_mut().insert(info.clone());
        info
    }

    /// The attributes of this request by `user`.
    pub(crate) fn attributes(&self, user: UserInfo) -> Attributes {
        Attributes {
            user,
            verb: self.verb.clone(),
            request: self.kind.clone(),
        }
    }

    /// A watch, a proxied connection, a stream or a log: upstream's
    /// long-running requests, which have no deadline and no in-flight
    /// count.
    pub(crate) fn long_running(&self) -> bool {
        LONG_RUNNING_VERBS.contains(&self.verb.as_str())
            || matches!(&self.kind, RequestKind::Resource(r)
                if LONG_RUNNING_SUBRESOURCES.contains(&r.subresource.as_str()))
    }
}

fn method_verb(method: &Method) -> String {
    match *method {
        Method::POST => "create",
        Method::GET | Method::HEAD => "get",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    }
    .to_string()
}

/// The verb and target of a request, without the user (the audit layer
/// decides its level from them before authorization runs).
pub(crate) fn describe(method: &Method, path: &str, query: Option<&str>) -> (String, RequestKind) {
    let non_resource = || {
        (
            method.as_str().to_ascii_lowercase(),
            RequestKind::NonResource {
                path: path.to_string(),
            },
        )
    };
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if parts.len() < 3 {
        return non_resource();
    }
    let (group, rest) = match parts[0] {
        "api" => ("", &parts[1..]),
        "apis" if parts.len() >= 4 => (parts[1], &parts[2..]),
        _ => return non_resource(),
    };
    let version = rest[0];
    let mut rest = &rest[1..];
    let verb = if rest.first() == Some(&"watch") && rest.len() >= 2 {
        rest = &rest[1..];
        "watch".to_string()
    } else {
        method_verb(method)
    };
    let mut namespace = "";
    if rest.first() == Some(&"namespaces") && rest.len() > 1 {
        namespace = rest[1];
        if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
            rest = &rest[2..];
        }
    }
    let mut attrs = ResourceAttributes {
        group: group.to_string(),
        version: version.to_string(),
        resource: rest.first().copied().unwrap_or("").to_string(),
        name: rest.get(1).copied().unwrap_or("").to_string(),
        subresource: rest.get(2).copied().unwrap_or("").to_string(),
        namespace: namespace.to_string(),
    };
    let mut verb = verb;
    if attrs.name.is_empty() && verb == "get" {
        let (watch, name) = list_options(query);
        verb = if watch { "watch" } else { "list" }.to_string();
        if let Some(name) = name {
            attrs.name = name;
        }
    }
    if attrs.name.is_empty() && verb == "delete" {
        verb = "deletecollection".to_string();
    }
    if GroupResource::new(&attrs.group, &attrs.resource) == Pods::RESOURCE
        && STREAMING_SUBRESOURCES.contains(&attrs.subresource.as_str())
        && verb == "get"
    {
        verb = "create".to_string();
    }
    (verb, RequestKind::Resource(attrs))
}

/// `watch=true|1` and a `metadata.name=<x>` field selector of a list.
fn list_options(query: Option<&str>) -> (bool, Option<String>) {
    let mut watch = false;
    let mut name = None;
    for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match &*key {
            "watch" => watch = matches!(&*value, "true" | "1"),
            "fieldSelector" => name = exact_name(&value),
            _ => {}
        }
    }
    (watch, name)
}

/// The name a field selector pins, when it requires `metadata.name` to be
/// exactly one value that could name an object.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let (field, value) = term
            .split_once("==")
            .or_else(|| term.split_once('='))
            .filter(|(f, _)| !f.ends_with('!'))?;
        (field.trim() == "metadata.name"
            && !value.is_empty()
            && !matches!(value, "." | "..")
            && !value.contains(['/', '%']))
        .then(|| value.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn describe_str(method: Method, uri: &str) -> (String, RequestKind) {
        let (path, query) = match uri.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (uri, None),
        };
        describe(&method, path, query)
    }

    fn res(group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> RequestKind {
        let resource = if sub.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}/{sub}")
        };
        RequestKind::v1(group, &resource, ns, name)
    }

    #[test]
    fn verbs_and_targets_as_upstream_request_info() {
        let cases = [
            (
                Method::GET,
                "/api/v1/pods",
                "list",
                res("", "pods", "", "", ""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/pods?watch=true",
                "watch",
                res("", "pods", "", "a", ""),
            ),
            (
                Method::GET,
                "/api/v1/watch/namespaces/a/pods/p",
                "watch",
                res("", "pods", "", "a", "p"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/pods?fieldSelector=metadata.name%3Dp",
                "list",
                res("", "pods", "", "a", "p"),
            ),
            (
                Method::POST,
                "/apis/apps/v1/namespaces/a/deployments",
                "create",
                res("apps", "deployments", "", "a", ""),
            ),
            (
                Method::PUT,
                "/apis/apps/v1/namespaces/a/deployments/d/scale",
                "update",
                res("apps", "deployments", "scale", "a", "d"),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/a/configmaps",
                "deletecollection",
                res("", "configmaps", "", "a", ""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a",
                "get",
                res("", "namespaces", "", "a", "a"),
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/a/finalize",
                "update",
                res("", "namespaces", "finalize", "a", "a"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/pods/p/exec?command=ls",
                "create",
                res("", "pods", "exec", "a", "p"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/pods/p/log",
                "get",
                res("", "pods", "log", "a", "p"),
            ),
            (
                Method::GET,
                "/api/v1/nodes/n1/proxy/stats",
                "get",
                res("", "nodes", "proxy", "", "n1"),
            ),
        ];
        for (method, uri, verb, kind) in cases {
            assert_eq!(describe_str(method, uri), (verb.to_string(), kind), "{uri}");
        }
    }

    #[test]
    fn short_paths_are_non_resource_requests() {
        for uri in [
            "/api",
            "/apis",
            "/api/v1",
            "/apis/apps",
            "/apis/apps/v1",
            "/version",
            "/openapi/v2",
            "/healthz/ping",
        ] {
            assert_eq!(
                describe_str(Method::GET, uri),
                (
                    "get".to_string(),
                    RequestKind::NonResource { path: uri.into() }
                ),
                "{uri}"
            );
        }
        assert_eq!(describe_str(Method::POST, "/foo").0, "post");
    }

    #[test]
    fn field_selectors_pin_a_name_only_when_exact() {
        assert_eq!(exact_name("metadata.name=x"), Some("x".into()));
        assert_eq!(
            exact_name("metadata.name==x,spec.nodeName=n"),
            Some("x".into())
        );
        assert_eq!(exact_name("metadata.name!=x"), None);
        assert_eq!(exact_name("spec.nodeName=n"), None);
        assert_eq!(exact_name("metadata.name=a/b"), None);
    }
}
