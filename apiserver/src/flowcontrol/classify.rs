//! Which FlowSchema a request falls under, and so which priority level and
//! flow: the schema with the lowest `matchingPrecedence` (ties by name)
//! one of whose rules matches both the requester and the request, as
//! upstream matches them. Schemas naming a priority level that does not
//! exist are skipped; a request nothing matches goes to `catch-all`.
//! This module only reads the configuration it is given; building that
//! configuration from the watch caches is `config`'s job.

use serde_json::Value;

use crate::authz::{Attributes, RequestKind};
use crate::object::str_items;

const ALL: &str = "*";

/// One FlowSchema, as classification needs it.
#[derive(Debug, Clone)]
pub(crate) struct Schema {
    /// The FlowSchema's name.
    pub name: String,
    /// The FlowSchema's uid (the `X-Kubernetes-PF-FlowSchema-UID` header).
    pub uid: String,
    /// `matchingPrecedence`: the lowest matching schema wins.
    pub precedence: i64,
    /// The priority level the schema sends requests to.
    pub level: String,
    /// How the schema's requests split into flows.
    pub distinguisher: Distinguisher,
    rules: Vec<Value>,
}

/// How a schema splits its requests into flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Distinguisher {
    /// One flow for all its requests.
    None,
    /// One flow per user.
    ByUser,
    /// One flow per namespace (cluster-scoped requests share one).
    ByNamespace,
}

impl Schema {
    /// A schema from its JSON object.
    pub(crate) fn from_object(object: &Value) -> Self {
        let text = |v: &Value| v.as_str().unwrap_or("").to_string();
        let spec = &object["spec"];
        Self {
            name: text(&object["metadata"]["name"]),
            uid: text(&object["metadata"]["uid"]),
            precedence: spec["matchingPrecedence"].as_i64().unwrap_or(1000),
            level: text(&spec["priorityLevelConfiguration"]["name"]),
            distinguisher: match spec["distinguisherMethod"]["type"].as_str() {
                Some("ByUser") => Distinguisher::ByUser,
                Some("ByNamespace") => Distinguisher::ByNamespace,
                _ => Distinguisher::None,
            },
            rules: spec["rules"].as_array().cloned().unwrap_or_default(),
        }
    }

    /// Whether one of the schema's rules matches the request.
    pub(crate) fn matches(&self, attrs: &Attributes) -> bool {
        self.rules
            .iter()
            .any(|rule| subjects_match(&rule["subjects"], attrs) && request_matches(rule, attrs))
    }

    /// The flow a matched request belongs to within its level.
    pub(crate) fn flow(&self, attrs: &Attributes) -> String {
        let distinguisher = match self.distinguisher {
            Distinguisher::None => "",
            Distinguisher::ByUser => attrs.user.name.as_str(),
            Distinguisher::ByNamespace => attrs.resource().map_or("", |r| r.namespace.as_str()),
        };
        format!("{}\u{0}{distinguisher}", self.name)
    }
}

/// The schemas in matching order.
pub(crate) fn sort(schemas: &mut [Schema]) {
    schemas.sort_by(|a, b| (a.precedence, &a.name).cmp(&(b.precedence, &b.name)));
}

fn has(list: &Value, wanted: &str) -> bool {
    str_items(list).any(|s| s == ALL || s == wanted)
}

fn subjects_match(subjects: &Value, attrs: &Attributes) -> bool {
    let user = &attrs.user;
    subjects
        .as_array()
        .into_iter()
        .flatten()
        .any(|subject| match subject["kind"].as_str() {
            Some("User") => {
                let name = subject["user"]["name"].as_str().unwrap_or("");
                name == ALL || name == user.name
            }
            Some("Group") => {
                let name = subject["group"]["name"].as_str().unwrap_or("");
                name == ALL || user.groups.iter().any(|g| g == name)
            }
            Some("ServiceAccount") => {
                let Some(rest) = user.name.strip_prefix("system:serviceaccount:") else {
                    return false;
                };
                let Some((namespace, name)) = rest.split_once(':') else {
                    return false;
                };
                let account = &subject["serviceAccount"];
                let want_ns = account["namespace"].as_str().unwrap_or("");
                let want_name = account["name"].as_str().unwrap_or("");
                want_ns == namespace && (want_name == ALL || want_name == name)
            }
            _ => false,
        })
}

fn request_matches(rule: &Value, attrs: &Attributes) -> bool {
    match &attrs.request {
        RequestKind::Resource(r) => {
            let resource = r.combined_resource();
            rule["resourceRules"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|rr| {
                    has(&rr["verbs"], &attrs.verb)
                        && has(&rr["apiGroups"], &r.group)
                        && has(&rr["resources"], &resource)
                        && if r.namespace.is_empty() {
                            rr["clusterScope"] == true
                        } else {
                            has(&rr["namespaces"], &r.namespace)
                        }
                })
        }
        RequestKind::NonResource { path } => rule["nonResourceRules"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|nr| has(&nr["verbs"], &attrs.verb) && url_matches(&nr["nonResourceURLs"], path)),
    }
}

/// `*` matches every path, `/x/*` matches `/x` and everything under it,
/// anything else matches itself.
fn url_matches(urls: &Value, path: &str) -> bool {
    str_items(urls).any(|url| {
        if url == ALL || url == path {
            return true;
        }
        url.strip_suffix("/*").is_some_and(|prefix| {
            path == prefix
                || path
                    .strip_prefix(prefix)
                    .is_some_and(|r| r.starts_with('/'))
        })
    })
}

#[cfg(test)]
mod tests {
    use http::Method;

    use super::*;
    use crate::authn::UserInfo;
    use crate::authz::request::attributes;
    use crate::flowcontrol::bootstrap::flow_schemas;

    fn schemas() -> Vec<Schema> {
        let mut all: Vec<Schema> = flow_schemas()
            .into_iter()
            .map(|b| {
                Schema::from_object(
                    &serde_json::json!({"metadata": {"name": b.name}, "spec": b.spec}),
                )
            })
            .collect();
        sort(&mut all);
        all
    }

    fn classify(user: UserInfo, method: Method, path: &str) -> (String, String) {
        let (path, query) = match path.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (path, None),
        };
        let attrs = attributes(user, &method, path, query);
        let schema = schemas().into_iter().find(|s| s.matches(&attrs)).unwrap();
        (schema.name.clone(), schema.level.clone())
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo::new(name, groups.iter().map(|g| g.to_string()))
    }

    #[test]
    fn the_servers_own_components_land_in_their_system_levels() {
        let node = || user("system:node:n1", &["system:nodes"]);
        let cases = [
            (
                user("admin", &["system:masters"]),
                Method::POST,
                "/api/v1/namespaces/a/configmaps",
                "exempt",
            ),
            (node(), Method::PUT, "/api/v1/nodes/n1/status", "node-high"),
            (
                node(),
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1",
                "node-high",
            ),
            (node(), Method::GET, "/api/v1/pods?watch=true", "system"),
            (
                user("system:kube-controller-manager", &[]),
                Method::GET,
                "/apis/apps/v1/deployments",
                "workload-high",
            ),
            (
                user("system:kube-scheduler", &[]),
                Method::POST,
                "/api/v1/namespaces/a/pods/p/binding",
                "workload-high",
            ),
            (
                UserInfo::service_account("kube-system", "replicaset-controller"),
                Method::POST,
                "/api/v1/namespaces/a/pods",
                "workload-high",
            ),
            (
                UserInfo::service_account("kube-system", "kube-dns"),
                Method::GET,
                "/api/v1/services",
                "workload-high",
            ),
            (
                user("system:kube-controller-manager", &[]),
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kcm",
                "leader-election",
            ),
            (
                UserInfo::service_account("team", "builder"),
                Method::POST,
                "/api/v1/namespaces/team/configmaps",
                "workload-low",
            ),
            (
                user("alice", &[]),
                Method::POST,
                "/api/v1/namespaces/a/configmaps",
                "global-default",
            ),
            (UserInfo::anonymous(), Method::GET, "/readyz", "exempt"),
        ];
        for (user, method, path, level) in cases {
            let name = user.name.clone();
            assert_eq!(classify(user, method, path).1, level, "{name} {path}");
        }
    }

    #[test]
    fn rules_match_as_upstream() {
        let attrs = |u: UserInfo, m: Method, p: &str| attributes(u, &m, p, None);
        let schema = |rules: Value| {
            Schema::from_object(&serde_json::json!({"metadata": {"name": "s"}, "spec": {
                "priorityLevelConfiguration": {"name": "l"}, "rules": rules}}))
        };
        // A namespaced rule does not match cluster-scoped requests, and
        // subresources are matched as resource/subresource.
        let pods = schema(
            serde_json::json!([{"subjects": [{"kind": "Group", "group": {"name": "*"}}],
            "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"], "namespaces": ["a"]}]}]),
        );
        let bob = || user("bob", &[]);
        assert!(pods.matches(&attrs(
            bob(),
            Method::GET,
            "/api/v1/namespaces/a/pods/p/log"
        )));
        assert!(!pods.matches(&attrs(bob(), Method::GET, "/api/v1/namespaces/a/pods/p")));
        assert!(!pods.matches(&attrs(
            bob(),
            Method::GET,
            "/api/v1/namespaces/b/pods/p/log"
        )));
        // Service accounts by namespace with a name wildcard.
        let accounts = schema(
            serde_json::json!([{"subjects": [{"kind": "ServiceAccount", "serviceAccount": {"namespace": "ci", "name": "*"}}],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics/*"]}]}]),
        );
        let ci = || UserInfo::service_account("ci", "runner");
        assert!(accounts.matches(&attrs(ci(), Method::GET, "/metrics")));
        assert!(accounts.matches(&attrs(ci(), Method::GET, "/metrics/x")));
        assert!(!accounts.matches(&attrs(ci(), Method::GET, "/metricsx")));
        assert!(!accounts.matches(&attrs(
            UserInfo::service_account("cd", "runner"),
            Method::GET,
            "/metrics"
        )));
        assert!(!accounts.matches(&attrs(
            user("system:serviceaccount:ci", &[]),
            Method::GET,
            "/metrics"
        )));
    }

    #[test]
    fn flows_split_by_user_or_namespace() {
        let by_user = schemas()
            .into_iter()
            .find(|s| s.name == "global-default")
            .unwrap();
        let by_ns = schemas()
            .into_iter()
            .find(|s| s.name == "kube-controller-manager")
            .unwrap();
        let a = attributes(
            user("a", &[]),
            &Method::GET,
            "/api/v1/namespaces/x/pods",
            None,
        );
        let b = attributes(
            user("b", &[]),
            &Method::GET,
            "/api/v1/namespaces/x/pods",
            None,
        );
        let c = attributes(
            user("a", &[]),
            &Method::GET,
            "/api/v1/namespaces/y/pods",
            None,
        );
        assert_ne!(by_user.flow(&a), by_user.flow(&b));
        assert_eq!(by_user.flow(&a), by_user.flow(&c));
        assert_eq!(by_ns.flow(&a), by_ns.flow(&b));
        assert_ne!(by_ns.flow(&a), by_ns.flow(&c));
    }
}
