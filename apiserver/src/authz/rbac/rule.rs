//! One RBAC policy rule and the two questions asked of it: does it allow
//! this request (upstream's evaluation rules), and does a set of rules
//! cover another rule (upstream's escalation comparison).
//!
//! Evaluation, as upstream:
//! - verbs, apiGroups and resources match exactly or through `*`;
//! - a request for a subresource matches `resource/subresource`, or
//!   `*/subresource`; `resource/*` is not a wildcard (upstream gives it no
//!   meaning, so it matches only a subresource literally named `*`);
//! - a rule with resourceNames matches only requests that carry one of
//!   those names, so never a list, watch, create or deletecollection of
//!   the whole collection;
//! - nonResourceURLs match exactly, `*` matches every path, and a trailing
//!   `*` matches by prefix.
//!
//! This module holds no state and never looks anything up.

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::authz::RequestKind;
use crate::go_format::go_quoted_list;

/// The wildcard upstream accepts in verbs, apiGroups, resources and
/// nonResourceURLs.
pub const ALL: &str = "*";

/// A policy rule with its lists unwrapped (absent = empty).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Rule {
    /// The verbs allowed.
    pub verbs: Vec<String>,
    /// The API groups the rule covers.
    pub api_groups: Vec<String>,
    /// The resources (and `resource/subresource`s) the rule covers.
    pub resources: Vec<String>,
    /// The objects the rule is limited to; empty for all.
    pub resource_names: Vec<String>,
    /// The non-resource paths the rule covers.
    pub non_resource_urls: Vec<String>,
}

impl From<&PolicyRule> for Rule {
    fn from(rule: &PolicyRule) -> Self {
        let list = |v: &Option<Vec<String>>| v.clone().unwrap_or_default();
        Self {
            verbs: rule.verbs.clone(),
            api_groups: list(&rule.api_groups),
            resources: list(&rule.resources),
            resource_names: list(&rule.resource_names),
            non_resource_urls: list(&rule.non_resource_urls),
        }
    }
}

impl From<&Rule> for PolicyRule {
    fn from(rule: &Rule) -> Self {
        let opt = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
        Self {
            verbs: rule.verbs.clone(),
            api_groups: opt(&rule.api_groups),
            resources: opt(&rule.resources),
            resource_names: opt(&rule.resource_names),
            non_resource_urls: opt(&rule.non_resource_urls),
        }
    }
}

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == value)
}

fn has_or_all(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == ALL || v == value)
}

/// Whether `pattern` (a nonResourceURLs entry) matches `path`: `*` every
/// path, `/x*` every path starting with `/x`, anything else only itself.
/// An audit policy's nonResourceURLs match the same way.
pub(crate) fn url_matches(pattern: &str, path: &str) -> bool {
    if pattern == ALL || pattern == path {
        return true;
    }
    pattern
        .strip_suffix('*')
        .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

/// The verbs most requests carry, one bit each; anything else is compared
/// as text. They are also every read and write verb, which the default
/// policy grants as `READ_WRITE`.
pub(crate) const COMMON_VERBS: [&str; 8] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];
/// The bit of the `*` verb.
const ALL_VERBS: u16 = 1 << 15;

fn verb_bit(verb: &str) -> Option<u16> {
    COMMON_VERBS.iter().position(|v| *v == verb).map(|i| 1 << i)
}

/// A rule as the authorizer keeps it: its common verbs as bits, so that
/// the rules of the wrong verb — most of a caller's — are passed over with
/// one mask test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    /// The rule as written.
    pub rule: Rule,
    verbs: u16,
}

impl From<Rule> for Compiled {
    fn from(rule: Rule) -> Self {
        let verbs = rule.verbs.iter().fold(0, |bits, verb| {
            bits | if verb == ALL {
                ALL_VERBS
            } else {
                verb_bit(verb).unwrap_or(0)
            }
        });
        Self { rule, verbs }
    }
}

impl Compiled {
    /// [`Rule::allows`], with `verb_bit` the bit of `verb` (from
    /// [`Compiled::verb_bit`], computed once per request).
    pub fn allows(&self, verb: &str, bit: Option<u16>, request: &RequestKind) -> bool {
        let verb_ok = self.verbs & ALL_VERBS != 0
            || match bit {
                Some(bit) => self.verbs & bit != 0,
                None => has(&self.rule.verbs, verb),
            };
        verb_ok && self.rule.targets(request)
    }

    /// The bit of a request's verb, if it is a common one.
    pub fn verb_bit(verb: &str) -> Option<u16> {
        verb_bit(verb)
    }
}

impl Rule {
    /// Whether this rule allows `verb` on `request`.
    pub fn allows(&self, verb: &str, request: &RequestKind) -> bool {
        has_or_all(&self.verbs, verb) && self.targets(request)
    }

    /// Whether this rule's groups, resources, names or paths take in
    /// `request` (verbs aside).
    fn targets(&self, request: &RequestKind) -> bool {
        match request {
            RequestKind::NonResource { path } => {
                self.non_resource_urls.iter().any(|u| url_matches(u, path))
            }
            RequestKind::Resource(r) => {
                has_or_all(&self.api_groups, &r.group)
                    && self.resource_matches(&r.resource, &r.subresource)
                    && (self.resource_names.is_empty() || has(&self.resource_names, &r.name))
            }
        }
    }

    fn resource_matches(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|entry| {
            if entry == ALL {
                return true;
            }
            if subresource.is_empty() {
                return entry == resource;
            }
            match entry.split_once('/') {
                Some((base, sub)) => sub == subresource && (base == resource || base == ALL),
                None => false,
            }
        })
    }

    /// Whether this rule (the holder's) grants everything `atom` does,
    /// where `atom` comes from [`Rule::atoms`] (at most one verb, group,
    /// resource, name or URL).
    pub fn covers(&self, atom: &Rule) -> bool {
        let all_in = |owner: &[String], wanted: &[String]| {
            has(owner, ALL) || wanted.iter().all(|w| has(owner, w))
        };
        let names = if atom.resource_names.is_empty() {
            self.resource_names.is_empty()
        } else {
            self.resource_names.is_empty() || all_in(&self.resource_names, &atom.resource_names)
        };
        all_in(&self.verbs, &atom.verbs)
            && all_in(&self.api_groups, &atom.api_groups)
            && self.resources_cover(&atom.resources)
            && names
            && atom.non_resource_urls.iter().all(|wanted| {
                self.non_resource_urls
                    .iter()
                    .any(|owned| url_matches(owned, wanted))
            })
    }

    fn resources_cover(&self, wanted: &[String]) -> bool {
        if has(&self.resources, ALL) {
            return true;
        }
        wanted.iter().all(|w| {
            has(&self.resources, w)
                || w.split_once('/')
                    .is_some_and(|(_, sub)| has(&self.resources, &format!("*/{sub}")))
        })
    }

    /// This rule split into single-permission rules: one verb, one group,
    /// one resource and at most one name each (or one verb and one URL), so
    /// that each is wholly covered by one of the holder's rules or not.
    pub fn atoms(&self) -> Vec<Rule> {
        let one = |s: &String| vec![s.clone()];
        let mut atoms = Vec::new();
        for group in &self.api_groups {
            for resource in &self.resources {
                for verb in &self.verbs {
                    let base = Rule {
                        verbs: one(verb),
                        api_groups: one(group),
                        resources: one(resource),
                        ..Default::default()
                    };
                    if self.resource_names.is_empty() {
                        atoms.push(base);
                    } else {
                        atoms.extend(self.resource_names.iter().map(|name| Rule {
                            resource_names: one(name),
                            ..base.clone()
                        }));
                    }
                }
            }
        }
        for url in &self.non_resource_urls {
            for verb in &self.verbs {
                atoms.push(Rule {
                    verbs: one(verb),
                    non_resource_urls: one(url),
                    ..Default::default()
                });
            }
        }
        atoms
    }

    /// Upstream's compact form for escalation messages:
    /// `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}`,
    /// empty lists left out.
    pub fn compact_string(&self) -> String {
        let parts: Vec<String> = [
            ("APIGroups", &self.api_groups),
            ("Resources", &self.resources),
            ("NonResourceURLs", &self.non_resource_urls),
            ("ResourceNames", &self.resource_names),
            ("Verbs", &self.verbs),
        ]
        .into_iter()
        .filter(|(_, list)| !list.is_empty())
        .map(|(label, list)| format!("{label}:{}", go_quoted_list(list)))
        .collect();
        format!("{{{}}}", parts.join(", "))
    }
}

/// Every atom of `wanted` that no rule in `held` covers, in order.
pub fn uncovered(held: &[&Rule], wanted: &[Rule]) -> Vec<Rule> {
    wanted
        .iter()
        .flat_map(Rule::atoms)
        .filter(|atom| !held.iter().any(|rule| rule.covers(atom)))
        .collect()
}

/// Merges atoms that differ only in their verbs (one group, one resource,
/// at most one name) into one rule each, as upstream lists missing
/// permissions; anything else is kept as it is.
pub fn compact(atoms: Vec<Rule>) -> Vec<Rule> {
    let mut merged: Vec<Rule> = Vec::new();
    let mut rest = Vec::new();
    for atom in atoms {
        let simple = atom.api_groups.len() == 1
            && atom.resources.len() == 1
            && atom.resource_names.len() <= 1
            && atom.non_resource_urls.is_empty();
        if !simple {
            rest.push(atom);
            continue;
        }
        match merged.iter_mut().find(|m| {
            m.api_groups == atom.api_groups
                && m.resources == atom.resources
                && m.resource_names == atom.resource_names
        }) {
            Some(existing) => existing.verbs.extend(atom.verbs),
            None => merged.push(atom),
        }
    }
    rest.extend(merged);
    rest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> Rule {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        Rule {
            verbs: v(verbs),
            api_groups: v(groups),
            resources: v(resources),
            resource_names: v(names),
            non_resource_urls: Vec::new(),
        }
    }

    fn urls(verbs: &[&str], urls: &[&str]) -> Rule {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        Rule {
            verbs: v(verbs),
            non_resource_urls: v(urls),
            ..Default::default()
        }
    }

    /// `group resource[/sub] [name]`.
    fn res(spec: &str) -> RequestKind {
        let mut parts = spec.split(' ');
        let group = parts.next().unwrap_or("").trim_matches('\'');
        let resource = parts.next().unwrap_or("");
        let name = parts.next().unwrap_or("");
        RequestKind::v1(group, resource, "ns", name)
    }

    fn path(p: &str) -> RequestKind {
        RequestKind::NonResource { path: p.into() }
    }

    #[test]
    fn evaluation_follows_upstream_rules() {
        let pods_read = rule(&["get", "list"], &[""], &["pods"], &[]);
        let everything = rule(&["*"], &["*"], &["*"], &[]);
        let any_status = rule(&["update"], &["apps"], &["*/status"], &[]);
        let pod_logs = rule(&["get"], &[""], &["pods/log"], &[]);
        let pods_star = rule(&["get"], &[""], &["pods/*"], &[]);
        let named = rule(
            &["get", "list", "create", "delete"],
            &[""],
            &["configmaps"],
            &["cfg"],
        );
        let health = urls(&["get"], &["/healthz", "/version/*", "/logs*"]);
        let binder = rule(
            &["bind", "get"],
            &["rbac.authorization.k8s.io"],
            &["clusterroles"],
            &[],
        );
        let all_urls = urls(&["*"], &["*"]);
        let cases: Vec<(&Rule, &str, RequestKind, bool)> = vec![
            (&pods_read, "get", res("'' pods p"), true),
            (&pods_read, "list", res("'' pods"), true),
            (&pods_read, "watch", res("'' pods"), false),
            (&pods_read, "get", res("apps pods p"), false),
            (&pods_read, "get", res("'' pods/log p"), false),
            (&pods_read, "get", res("'' services s"), false),
            (
                &everything,
                "escalate",
                res("rbac.authorization.k8s.io roles r"),
                true,
            ),
            (&everything, "get", res("'' pods/exec p"), true),
            (&everything, "get", path("/healthz"), false),
            (
                &any_status,
                "update",
                res("apps deployments/status d"),
                true,
            ),
            (&any_status, "update", res("apps deployments d"), false),
            (
                &any_status,
                "update",
                res("apps deployments/scale d"),
                false,
            ),
            (&pod_logs, "get", res("'' pods/log p"), true),
            (&pod_logs, "get", res("'' pods p"), false),
            // `resource/*` is no wildcard upstream.
            (&pods_star, "get", res("'' pods/log p"), false),
            (&pods_star, "get", res("'' pods p"), false),
            (&named, "get", res("'' configmaps cfg"), true),
            (&named, "get", res("'' configmaps other"), false),
            (&named, "delete", res("'' configmaps cfg"), true),
            // resourceNames never match a request without a name.
            (&named, "list", res("'' configmaps"), false),
            (&named, "create", res("'' configmaps"), false),
            (&named, "deletecollection", res("'' configmaps"), false),
            (&named, "get", path("/healthz"), false),
            (&health, "get", path("/healthz"), true),
            (&health, "get", path("/healthz/ping"), false),
            (&health, "post", path("/healthz"), false),
            (&health, "get", path("/version/"), true),
            (&health, "get", path("/version/x/y"), true),
            (&health, "get", path("/version"), false),
            (&health, "get", path("/logs"), true),
            (&health, "get", path("/logsx/y"), true),
            (&health, "get", res("'' pods p"), false),
            (&all_urls, "delete", path("/anything/at/all"), true),
            (
                &binder,
                "bind",
                res("rbac.authorization.k8s.io clusterroles c"),
                true,
            ),
            (
                &binder,
                "escalate",
                res("rbac.authorization.k8s.io clusterroles c"),
                false,
            ),
            (
                &binder,
                "list",
                res("rbac.authorization.k8s.io clusterroles"),
                false,
            ),
        ];
        for (rule, verb, request, want) in cases {
            assert_eq!(
                rule.allows(verb, &request),
                want,
                "{rule:?} {verb} {request:?}"
            );
            // The authorizer's form decides the same.
            let compiled = Compiled::from(rule.clone());
            assert_eq!(
                compiled.allows(verb, Compiled::verb_bit(verb), &request),
                want,
                "compiled {rule:?} {verb} {request:?}"
            );
        }
    }

    #[test]
    fn coverage_follows_upstream_comparison() {
        let owner = [
            rule(&["get", "list", "watch"], &[""], &["pods", "services"], &[]),
            rule(&["update"], &["apps"], &["*/scale"], &[]),
            rule(&["get"], &[""], &["secrets"], &["a", "b"]),
            urls(&["get"], &["/healthz", "/metrics/*"]),
        ];
        let held: Vec<&Rule> = owner.iter().collect();
        let cases = [
            (rule(&["get", "list"], &[""], &["pods"], &[]), true),
            (rule(&["get"], &[""], &["pods", "services"], &["x"]), true),
            (rule(&["delete"], &[""], &["pods"], &[]), false),
            (rule(&["*"], &[""], &["pods"], &[]), false),
            (rule(&["get"], &["*"], &["pods"], &[]), false),
            (
                rule(&["update"], &["apps"], &["deployments/scale"], &[]),
                true,
            ),
            (rule(&["update"], &["apps"], &["deployments"], &[]), false),
            (rule(&["get"], &[""], &["secrets"], &["a"]), true),
            (rule(&["get"], &[""], &["secrets"], &["a", "c"]), false),
            // Holding a few names does not cover the whole collection.
            (rule(&["get"], &[""], &["secrets"], &[]), false),
            (urls(&["get"], &["/healthz"]), true),
            (urls(&["get"], &["/metrics/cadvisor"]), true),
            (urls(&["get"], &["/metrics"]), false),
            (urls(&["get"], &["*"]), false),
        ];
        for (wanted, want) in cases {
            let missing = uncovered(&held, std::slice::from_ref(&wanted));
            assert_eq!(missing.is_empty(), want, "{wanted:?} missing {missing:?}");
        }
        let star = rule(&["*"], &["*"], &["*"], &[]);
        assert!(uncovered(&[&star], &owner[..3]).is_empty());
        // `*` resources do not reach non-resource URLs.
        assert_eq!(uncovered(&[&star], &owner[3..]).len(), 2);
    }

    #[test]
    fn missing_permissions_read_as_upstream() {
        let atoms = rule(&["get", "list"], &["", "apps"], &["pods"], &[]).atoms();
        assert_eq!(atoms.len(), 4);
        let compacted: Vec<String> = compact(atoms).iter().map(Rule::compact_string).collect();
        assert_eq!(
            compacted,
            vec![
                r#"{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}"#,
                r#"{APIGroups:["apps"], Resources:["pods"], Verbs:["get" "list"]}"#,
            ]
        );
        assert_eq!(
            urls(&["get"], &["/x"]).compact_string(),
            r#"{NonResourceURLs:["/x"], Verbs:["get"]}"#
        );
        assert_eq!(
            rule(&["get"], &[""], &["secrets"], &["a"]).compact_string(),
            r#"{APIGroups:[""], Resources:["secrets"], ResourceNames:["a"], Verbs:["get"]}"#
        );
        assert_eq!(crate::go_format::go_quote("a\"b\\\n"), r#""a\"b\\\n""#);
    }
}
