//! The routing table: which backend a request's host and path go to, built
//! from the served Ingresses with upstream's matching rules.
//!
//! Hosts: an exact host rule wins over a `*.suffix` wildcard (which matches
//! exactly one more label), which wins over rules without a host. Within a
//! host, the longest matching path wins and, at equal length, Exact before
//! Prefix; Prefix matches whole path elements (`/foo` matches `/foo/bar`,
//! not `/foobar`) and ignores a trailing slash; ImplementationSpecific is
//! Prefix here. When the host's rules have no matching path, the rules
//! without a host are tried, then the oldest Ingress's `spec.defaultBackend`.
//! Between Ingresses with the same host and path, the oldest wins.

use std::collections::HashMap;

use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};

/// A Service port as an Ingress backend names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PortRef {
    /// `port.number`.
    Number(i32),
    /// `port.name`.
    Name(String),
}

/// Where a route sends requests: a Service port in the Ingress's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BackendRef {
    /// The Ingress's (and so the Service's) namespace.
    pub namespace: String,
    /// The Service's name.
    pub service: String,
    /// The Service port.
    pub port: PortRef,
}

impl BackendRef {
    /// The backend an Ingress names, or None for resource backends and
    /// Service backends without a port (which skiff cannot serve).
    pub fn from_ingress(namespace: &str, backend: &IngressBackend) -> Option<Self> {
        let service = backend.service.as_ref()?;
        let port = service.port.as_ref()?;
        let port = match (&port.name, port.number) {
            (Some(name), _) if !name.is_empty() => PortRef::Name(name.clone()),
            (_, Some(number)) => PortRef::Number(number),
            _ => return None,
        };
        Some(Self {
            namespace: namespace.to_owned(),
            service: service.name.clone(),
            port,
        })
    }
}

/// How a path rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathMatch {
    /// The request path equals the rule's.
    Exact,
    /// The rule's path elements are the first elements of the request's.
    Prefix,
}

#[derive(Debug, Clone)]
struct PathRule {
    path: String,
    kind: PathMatch,
    backend: BackendRef,
}

impl PathRule {
    fn matches(&self, request: &str) -> bool {
        match self.kind {
            PathMatch::Exact => request == self.path,
            PathMatch::Prefix => {
                let prefix = self.path.trim_end_matches('/');
                prefix.is_empty()
                    || request
                        .strip_prefix(prefix)
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            }
        }
    }
}

/// The path rules of one host, most specific first.
#[derive(Debug, Clone, Default)]
struct HostRules {
    paths: Vec<PathRule>,
}

impl HostRules {
    fn add(&mut self, rule: PathRule) {
        let taken = self
            .paths
            .iter()
            .any(|p| p.path == rule.path && p.kind == rule.kind);
        // Rules arrive oldest Ingress first; the oldest keeps a contested path.
        if !taken {
            self.paths.push(rule);
        }
    }

    fn sort(&mut self) {
        // Longest path first; at equal length Exact before Prefix. The sort
        // is stable, so rules otherwise equal keep their age order.
        self.paths.sort_by(|a, b| {
            b.path
                .len()
                .cmp(&a.path.len())
                .then_with(|| (a.kind == PathMatch::Prefix).cmp(&(b.kind == PathMatch::Prefix)))
        });
    }

    fn find(&self, path: &str) -> Option<&BackendRef> {
        self.paths
            .iter()
            .find(|rule| rule.matches(path))
            .map(|rule| &rule.backend)
    }
}

/// Host and path rules of every served Ingress.
#[derive(Debug, Clone, Default)]
pub struct RouteTable {
    exact: HashMap<String, HostRules>,
    /// Keyed by the suffix after `*.`.
    wildcard: HashMap<String, HostRules>,
    any_host: HostRules,
    default_backend: Option<BackendRef>,
}

impl RouteTable {
    /// The table for `ingresses` (already filtered to the served class).
    pub fn build<'a>(ingresses: impl IntoIterator<Item = &'a Ingress>) -> Self {
        let mut ordered: Vec<&Ingress> = ingresses.into_iter().collect();
        ordered.sort_by(|a, b| {
            let created = |i: &Ingress| i.metadata.creation_timestamp.clone().map(|t| t.0);
            created(a)
                .cmp(&created(b))
                .then_with(|| a.metadata.namespace.cmp(&b.metadata.namespace))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
        let mut table = Self::default();
        for ingress in ordered {
            table.add(ingress);
        }
        for rules in table
            .exact
            .values_mut()
            .chain(table.wildcard.values_mut())
            .chain(std::iter::once(&mut table.any_host))
        {
            rules.sort();
        }
        table
    }

    fn add(&mut self, ingress: &Ingress) {
        let namespace = ingress.metadata.namespace.as_deref().unwrap_or("default");
        let Some(spec) = &ingress.spec else { return };
        if self.default_backend.is_none() {
            self.default_backend = spec
                .default_backend
                .as_ref()
                .and_then(|b| BackendRef::from_ingress(namespace, b));
        }
        for rule in spec.rules.iter().flatten() {
            let rules = match rule.host.as_deref().map(str::to_ascii_lowercase) {
                None => &mut self.any_host,
                Some(host) if host.is_empty() => &mut self.any_host,
                Some(host) => match host.strip_prefix("*.") {
                    Some(suffix) => self.wildcard.entry(suffix.to_owned()).or_default(),
                    None => self.exact.entry(host).or_default(),
                },
            };
            let Some(http) = &rule.http else { continue };
            for path in &http.paths {
                let Some(backend) = BackendRef::from_ingress(namespace, &path.backend) else {
                    continue;
                };
                let kind = match path.path_type.as_str() {
                    "Exact" => PathMatch::Exact,
                    // Prefix, and ImplementationSpecific treated as Prefix.
                    _ => PathMatch::Prefix,
                };
                let path = match path.path.as_deref() {
                    Some(p) if !p.is_empty() => p.to_owned(),
                    _ => "/".to_owned(),
                };
                rules.add(PathRule {
                    path,
                    kind,
                    backend,
                });
            }
        }
    }

    /// The backend for a request to `host` (without port; any case) and
    /// `path` (without query), or None: 404.
    pub fn route(&self, host: &str, path: &str) -> Option<&BackendRef> {
        let host = host.to_ascii_lowercase();
        let wildcard = host
            .split_once('.')
            .and_then(|(label, suffix)| (!label.is_empty()).then_some(suffix))
            .and_then(|suffix| self.wildcard.get(suffix));
        self.exact
            .get(&host)
            .and_then(|rules| rules.find(path))
            .or_else(|| wildcard.and_then(|rules| rules.find(path)))
            .or_else(|| self.any_host.find(path))
            .or(self.default_backend.as_ref())
    }

    /// Every backend the table can route to.
    pub fn backends(&self) -> impl Iterator<Item = &BackendRef> {
        self.exact
            .values()
            .chain(self.wildcard.values())
            .chain(std::iter::once(&self.any_host))
            .flat_map(|rules| rules.paths.iter().map(|p| &p.backend))
            .chain(self.default_backend.iter())
    }
}

#[cfg(test)]
#[path = "routes_tests.rs"]
mod tests;
