//! Resource paths: `/api/v1/...` and `/apis/<group>/<version>/...`, with or
//! without `namespaces/<ns>/`, down to an object and its subresource.

use std::sync::Arc;

use crate::registry::{Registry, ResourceInfo, Subresource};
use crate::status::ApiError;

/// What a path names.
#[derive(Debug)]
pub(crate) enum Route {
    /// `/api`: the core group's versions.
    CoreVersions,
    /// `/apis`: every other group.
    Groups,
    /// `/apis/<group>`.
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`: its resources.
    Resources { group: String, version: String },
    /// A collection, object or subresource.
    Resource(Target),
}

/// A request aimed at resources.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub info: Arc<ResourceInfo>,
    /// The namespace from the path (`None`: all namespaces, or cluster scope).
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<Subresource>,
    /// The legacy `/watch/` path prefix was used.
    pub legacy_watch: bool,
}

/// Parses a request path against the registry.
pub(crate) fn parse(path: &str, registry: &Registry) -> Result<Route, ApiError> {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api"] => return Ok(Route::CoreVersions),
        ["apis"] => return Ok(Route::Groups),
        ["apis", group] => return Ok(Route::Group(group.to_string())),
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(ApiError::PathNotFound),
    };
    if rest.is_empty() {
        return Ok(Route::Resources {
            group: group.into(),
            version: version.into(),
        });
    }
    let (legacy_watch, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let is_namespace_sub =
        group.is_empty() && matches!(rest, ["namespaces", _, "status" | "finalize"]);
    let (namespace, rest) = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() && !is_namespace_sub => {
            (Some(ns.to_string()), tail)
        }
        _ => (None, rest),
    };
    let (resource, name, sub) = match rest {
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some(name.to_string()), None),
        [resource, name, sub] => (*resource, Some(name.to_string()), Some(*sub)),
        // A proxy's path goes on past the subresource.
        [resource, name, "proxy", ..] => (*resource, Some(name.to_string()), Some("proxy")),
        _ => return Err(ApiError::PathNotFound),
    };
    let info = registry
        .get(group, version, resource)
        .ok_or(ApiError::PathNotFound)?;
    if namespace.is_some() && !info.namespaced {
        return Err(ApiError::PathNotFound);
    }
    let subresource = match sub {
        None => None,
        Some(s) => Some(
            info.subresources
                .iter()
                .copied()
                .find(|x| x.name() == s)
                .ok_or(ApiError::PathNotFound)?,
        ),
    };
    Ok(Route::Resource(Target {
        info,
        namespace,
        name,
        subresource,
        legacy_watch,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_resource_paths() {
        let reg = Registry::builtin();
        let Route::Resource(t) = parse("/api/v1/namespaces/ns/pods/p/status", &reg).unwrap() else {
            panic!()
        };
        assert_eq!(
            (t.info.resource, t.namespace.as_deref(), t.name.as_deref()),
            ("pods", Some("ns"), Some("p"))
        );
        assert_eq!(t.subresource, Some(Subresource::Status));
        let Route::Resource(t) = parse("/api/v1/namespaces/ns", &reg).unwrap() else {
            panic!()
        };
        assert_eq!(
            (t.info.resource, t.name.as_deref()),
            ("namespaces", Some("ns"))
        );
        let Route::Resource(t) = parse("/api/v1/namespaces/ns/finalize", &reg).unwrap() else {
            panic!()
        };
        assert_eq!(t.subresource, Some(Subresource::Finalize));
        let Route::Resource(t) = parse("/apis/apps/v1/deployments", &reg).unwrap() else {
            panic!()
        };
        assert!(t.namespace.is_none() && t.name.is_none());
        assert!(parse("/api/v1/namespaces/ns/nodes", &reg).is_err());
        assert!(parse("/api/v1/pods/x/logz", &reg).is_err());
        let Route::Resource(t) = parse("/api/v1/namespaces/ns/pods/p:80/proxy/a/b", &reg).unwrap()
        else {
            panic!()
        };
        assert_eq!(t.subresource, Some(Subresource::Proxy));
        assert_eq!(t.name.as_deref(), Some("p:80"));
        assert!(parse("/api/v1/namespaces/ns/pods/p/status/a", &reg).is_err());
        assert!(parse("/apis/nope/v1/things", &reg).is_err());
        assert!(matches!(parse("/apis/apps", &reg).unwrap(), Route::Group(g) if g == "apps"));
    }
}
