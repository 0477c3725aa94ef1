//! Upstream's audit policy (`audit.k8s.io/v1` `Policy`, the file of
//! `--audit-policy-file`): an ordered list of rules, the first that matches
//! a request deciding how much of it is recorded (its level) and which
//! stages are left out. A request no rule matches is not recorded.
//!
//! The policy only answers "how much"; it never sees a response and must
//! never change a request.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::authn::UserInfo;
use crate::authz::RequestKind;
use crate::authz::rbac::rule::url_matches;

/// How much of a request is recorded, in increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Level {
    /// Nothing.
    None,
    /// Who, what, when and the outcome, without bodies.
    Metadata,
    /// Metadata and the request body.
    Request,
    /// Metadata and both bodies.
    RequestResponse,
}

/// When in a request's life an event is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Stage {
    /// As soon as the request arrives, before authorization.
    RequestReceived,
    /// When the response head of a long-running request (watch, exec,
    /// logs, …) has been sent, before its body.
    ResponseStarted,
    /// When the response is complete.
    ResponseComplete,
    /// When the handler panicked.
    Panic,
}

impl Stage {
    fn bit(self) -> u8 {
        match self {
            Stage::RequestReceived => 1,
            Stage::ResponseStarted => 2,
            Stage::ResponseComplete => 4,
            Stage::Panic => 8,
        }
    }
}

/// A set of stages (the ones a rule omits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stages(u8);

impl Stages {
    fn of(stages: &[Stage]) -> Self {
        Self(stages.iter().fold(0, |bits, s| bits | s.bit()))
    }

    /// Whether `stage` is in the set.
    pub fn contains(self, stage: Stage) -> bool {
        self.0 & stage.bit() != 0
    }
}

/// What the policy decided for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decided {
    /// The level to record the request at.
    pub level: Level,
    /// Stages not to record (the rule's and the policy's).
    pub omit_stages: Stages,
    /// Whether `metadata.managedFields` is left out of recorded bodies.
    pub omit_managed_fields: bool,
}

/// Why a policy file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("reading the audit policy file {path}: {source}")]
    Read {
        /// The policy file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a Policy in YAML or JSON.
    #[error("parsing the audit policy file {path}: {source}")]
    Parse {
        /// The policy file.
        path: PathBuf,
        /// Why it did not parse.
        #[source]
        source: serde_yaml::Error,
    },
    /// The policy parsed but cannot be honoured.
    #[error("the audit policy file {path}: {problem}")]
    Invalid {
        /// The policy file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
}

/// The file's form.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PolicyFile {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    rules: Vec<RuleFile>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
    #[serde(default)]
    omit_managed_fields: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleFile {
    level: Level,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    user_groups: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    resources: Vec<GroupResources>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
    #[serde(default)]
    omit_managed_fields: Option<bool>,
}

/// Resources of one API group a rule names.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupResources {
    /// `""` is the core group.
    #[serde(default)]
    group: String,
    /// `pods`, `pods/log`, `*/scale`, `pods/*`, `*`; empty means all.
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
}

/// One rule, its omitted stages merged with the policy's.
#[derive(Debug, Clone)]
struct Rule {
    level: Level,
    users: Vec<String>,
    user_groups: Vec<String>,
    verbs: Vec<String>,
    resources: Vec<GroupResources>,
    namespaces: Vec<String>,
    non_resource_urls: Vec<String>,
    omit_stages: Stages,
    omit_managed_fields: bool,
}

/// A loaded policy.
#[derive(Debug, Clone)]
pub struct Policy {
    rules: Vec<Rule>,
    omit_stages: Stages,
}

const API_VERSION: &str = "audit.k8s.io/v1";

impl Policy {
    /// Reads and checks a policy file (YAML or JSON).
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read(path).map_err(|source| PolicyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text).map_err(|e| match e {
            Problem::Syntax(source) => PolicyError::Parse {
                path: path.to_path_buf(),
                source,
            },
            Problem::Invalid(problem) => PolicyError::Invalid {
                path: path.to_path_buf(),
                problem,
            },
        })
    }

    /// What skiff records when `--audit-log-path` is given without a policy
    /// file: every request at Metadata, every stage. (Upstream records
    /// nothing then; skiff takes a log path as the wish for a log, and
    /// Metadata never holds a body, so no Secret reaches the file.)
    pub fn metadata_for_everything() -> Self {
        Self {
            rules: vec![Rule {
                level: Level::Metadata,
                users: Vec::new(),
                user_groups: Vec::new(),
                verbs: Vec::new(),
                resources: Vec::new(),
                namespaces: Vec::new(),
                non_resource_urls: Vec::new(),
                omit_stages: Stages::default(),
                omit_managed_fields: false,
            }],
            omit_stages: Stages::default(),
        }
    }

    fn parse(text: &[u8]) -> Result<Self, Problem> {
        let file: PolicyFile = serde_yaml::from_slice(text).map_err(Problem::Syntax)?;
        if file.kind != "Policy" || file.api_version != API_VERSION {
            return Err(Problem::Invalid(format!(
                "expected kind Policy of apiVersion {API_VERSION}, found kind {:?} of apiVersion {:?}",
                file.kind, file.api_version
            )));
        }
        if file.rules.is_empty() {
            // As upstream: a policy without rules is a mistake, not "log nothing".
            return Err(Problem::Invalid("the policy has no rules".into()));
        }
        let omit_stages = Stages::of(&file.omit_stages);
        let mut rules = Vec::with_capacity(file.rules.len());
        for (index, rule) in file.rules.into_iter().enumerate() {
            check_rule(&rule).map_err(|p| Problem::Invalid(format!("rules[{index}]: {p}")))?;
            rules.push(Rule {
                level: rule.level,
                omit_stages: Stages(omit_stages.0 | Stages::of(&rule.omit_stages).0),
                omit_managed_fields: rule.omit_managed_fields.unwrap_or(file.omit_managed_fields),
                users: rule.users,
                user_groups: rule.user_groups,
                verbs: rule.verbs,
                resources: rule.resources,
                namespaces: rule.namespaces,
                non_resource_urls: rule.non_resource_urls,
            });
        }
        Ok(Self { rules, omit_stages })
    }

    /// The level and omitted stages for a request by `user` (`None`: it
    /// did not authenticate) with this verb and target. The first rule that
    /// matches decides; none matching means level None.
    pub fn decide(&self, user: Option<&UserInfo>, verb: &str, request: &RequestKind) -> Decided {
        self.rules
            .iter()
            .find(|rule| rule.matches(user, verb, request))
            .map_or(
                Decided {
                    level: Level::None,
                    omit_stages: self.omit_stages,
                    omit_managed_fields: false,
                },
                |rule| Decided {
                    level: rule.level,
                    omit_stages: rule.omit_stages,
                    omit_managed_fields: rule.omit_managed_fields,
                },
            )
    }
}

enum Problem {
    Syntax(serde_yaml::Error),
    Invalid(String),
}

/// Upstream's validation of one rule.
fn check_rule(rule: &RuleFile) -> Result<(), String> {
    if !rule.non_resource_urls.is_empty()
        && (!rule.resources.is_empty() || !rule.namespaces.is_empty())
    {
        return Err("rules cannot apply to both regular resources and non-resource URLs".into());
    }
    for url in &rule.non_resource_urls {
        let wildcard_inside = url.trim_end_matches('*').contains('*');
        if url != "*" && (!url.starts_with('/') || wildcard_inside) {
            return Err(format!(
                "nonResourceURLs: invalid value {url:?}: non-resource URLs start with '/' and may end with one '*'"
            ));
        }
    }
    for group in &rule.resources {
        if group.group.contains('/') {
            return Err(format!(
                "resources.group: invalid value {:?}: a group, not a group/version",
                group.group
            ));
        }
        if !group.resource_names.is_empty() && group.resources.is_empty() {
            return Err("resources.resourceNames: requires resources to be set".into());
        }
    }
    Ok(())
}

impl Rule {
    fn matches(&self, user: Option<&UserInfo>, verb: &str, request: &RequestKind) -> bool {
        if !self.users.is_empty() && !user.is_some_and(|u| self.users.contains(&u.name)) {
            return false;
        }
        if !self.user_groups.is_empty()
            && !user.is_some_and(|u| u.groups.iter().any(|g| self.user_groups.contains(g)))
        {
            return false;
        }
        if !self.verbs.is_empty() && !self.verbs.iter().any(|v| v == verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(request);
        }
        if !self.non_resource_urls.is_empty() {
            return match request {
                RequestKind::NonResource { path } => self
                    .non_resource_urls
                    .iter()
                    .any(|spec| url_matches(spec, path)),
                RequestKind::Resource(_) => false,
            };
        }
        true
    }

    fn matches_resource(&self, request: &RequestKind) -> bool {
        let RequestKind::Resource(r) = request else {
            return false;
        };
        // Cluster-scoped requests have the empty namespace, which a rule
        // names as "".
        if !self.namespaces.is_empty() && !self.namespaces.contains(&r.namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let combined = r.combined_resource();
        self.resources.iter().any(|group| {
            if group.group != r.group {
                return false;
            }
            if group.resources.is_empty() {
                return true;
            }
            if !group.resource_names.is_empty() && !group.resource_names.contains(&r.name) {
                return false;
            }
            group.resources.iter().any(|spec| {
                spec == "*"
                    || *spec == combined
                    || (!r.subresource.is_empty()
                        && spec.strip_prefix("*/") == Some(r.subresource.as_str()))
                    || spec.strip_suffix("/*") == Some(r.resource.as_str())
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  # Health checks of the in-process components are noise.
  - level: None
    users: ["system:kube-proxy"]
    verbs: ["watch"]
  - level: None
    nonResourceURLs: ["/healthz*", "/version"]
  - level: None
    resources:
      - group: ""
        resources: ["events"]
  - level: RequestResponse
    userGroups: ["auditors"]
    resources:
      - group: ""
        resources: ["configmaps"]
        resourceNames: ["watched"]
  - level: Metadata
    resources:
      - group: ""
        resources: ["secrets", "configmaps", "pods/log", "*/exec"]
      - group: "apps"
        resources: ["deployments/*"]
    omitStages: ["ResponseStarted"]
  - level: Request
    namespaces: ["kube-system", ""]
    omitManagedFields: true
  - level: Request
    verbs: ["create", "update", "patch", "delete"]
  - level: Metadata
    nonResourceURLs: ["/api*"]
"#;

    fn res(group: &str, resource: &str, ns: &str, name: &str) -> RequestKind {
        RequestKind::v1(group, resource, ns, name)
    }

    fn path(p: &str) -> RequestKind {
        RequestKind::NonResource { path: p.into() }
    }

    #[test]
    fn the_first_matching_rule_decides_as_upstream() {
        let policy = Policy::parse(POLICY.as_bytes()).ok().expect("valid policy");
        let alice = UserInfo::new("alice", Vec::new());
        let auditor = UserInfo::new("eve", ["auditors".to_string()]);
        let proxy = UserInfo::new("system:kube-proxy", Vec::new());
        use Level::*;
        let cases: Vec<(Option<&UserInfo>, &str, RequestKind, Level)> = vec![
            // users + verbs
            (Some(&proxy), "watch", res("", "services", "a", ""), None),
            (
                Some(&proxy),
                "create",
                res("", "services", "a", ""),
                Request,
            ),
            (Some(&alice), "watch", res("", "services", "", ""), Request),
            (Some(&alice), "watch", res("", "services", "a", ""), None),
            // nonResourceURLs: prefix with `*`, exact otherwise
            (Some(&alice), "get", path("/healthz"), None),
            (Some(&alice), "get", path("/healthz/ping"), None),
            (Some(&alice), "get", path("/version"), None),
            (Some(&alice), "get", path("/version/x"), None),
            (Some(&alice), "get", path("/apis/apps"), Metadata),
            (Some(&alice), "get", path("/openapi/v2"), None),
            // a resource rule never matches a path and the other way round
            (Some(&alice), "get", res("", "events", "a", "e"), None),
            (
                Some(&alice),
                "create",
                res("events.k8s.io", "events", "a", ""),
                Request,
            ),
            // userGroups + resourceNames
            (
                Some(&auditor),
                "get",
                res("", "configmaps", "a", "watched"),
                RequestResponse,
            ),
            (
                Some(&auditor),
                "get",
                res("", "configmaps", "a", "other"),
                Metadata,
            ),
            (
                Some(&alice),
                "get",
                res("", "configmaps", "a", "watched"),
                Metadata,
            ),
            // subresources: named, `*/sub`, `res/*`; a plain resource name
            // does not cover its subresources
            (Some(&alice), "get", res("", "pods/log", "a", "p"), Metadata),
            (
                Some(&alice),
                "create",
                res("", "pods/exec", "a", "p"),
                Metadata,
            ),
            (Some(&alice), "create", res("", "pods", "a", ""), Request),
            (
                Some(&alice),
                "update",
                res("", "secrets/status", "a", "s"),
                Request,
            ),
            (
                Some(&alice),
                "update",
                res("apps", "deployments/scale", "a", "d"),
                Metadata,
            ),
            // …and, as upstream's checker has it, `res/*` the resource too
            (
                Some(&alice),
                "update",
                res("apps", "deployments", "a", "d"),
                Metadata,
            ),
            (
                Some(&alice),
                "update",
                res("apps", "replicasets", "a", "d"),
                Request,
            ),
            // namespaces, "" for cluster-scoped
            (
                Some(&alice),
                "get",
                res("", "pods", "kube-system", "p"),
                Request,
            ),
            (Some(&alice), "get", res("", "nodes", "", "n"), Request),
            (Some(&alice), "get", res("", "pods", "a", "p"), None),
            // an unauthenticated request only matches rules without users
            (Option::None, "get", res("", "secrets", "a", "s"), Metadata),
            (Option::None, "watch", res("", "services", "", ""), Request),
        ];
        for (user, verb, request, level) in cases {
            assert_eq!(
                policy.decide(user, verb, &request).level,
                level,
                "{:?} {verb} {request:?}",
                user.map(|u| &u.name)
            );
        }
    }

    #[test]
    fn omitted_stages_and_managed_fields_merge_as_upstream() {
        let policy = Policy::parse(POLICY.as_bytes()).ok().expect("valid policy");
        let alice = UserInfo::new("alice", Vec::new());
        let secret = policy.decide(Some(&alice), "get", &res("", "secrets", "a", "s"));
        assert!(secret.omit_stages.contains(Stage::RequestReceived));
        assert!(secret.omit_stages.contains(Stage::ResponseStarted));
        assert!(!secret.omit_stages.contains(Stage::ResponseComplete));
        assert!(!secret.omit_managed_fields);
        let system = policy.decide(Some(&alice), "get", &res("", "pods", "kube-system", "p"));
        assert!(system.omit_stages.contains(Stage::RequestReceived));
        assert!(!system.omit_stages.contains(Stage::ResponseStarted));
        assert!(system.omit_managed_fields);
        let unmatched = policy.decide(Some(&alice), "get", &res("", "pods", "a", "p"));
        assert_eq!(unmatched.level, Level::None);
    }

    #[test]
    fn bad_policies_are_refused_with_the_reason() {
        let cases = [
            (
                "kind: Policy\napiVersion: audit.k8s.io/v1beta1\nrules: [{level: None}]",
                "apiVersion",
            ),
            (
                "kind: Policy\napiVersion: audit.k8s.io/v1\nrules: []",
                "no rules",
            ),
            (
                "kind: Policy\napiVersion: audit.k8s.io/v1\nrules: [{level: Loud}]",
                "",
            ),
            (
                "kind: Policy\napiVersion: audit.k8s.io/v1\nrules: [{level: None, nonResourceURLs: [/x], namespaces: [a]}]",
                "both regular resources and non-resource URLs",
            ),
            (
                "kind: Policy\napiVersion: audit.k8s.io/v1\nrules: [{level: None, nonResourceURLs: [\"/a*b\"]}]",
                "rules[0]: nonResourceURLs",
            ),
            (
                "kind: Policy\napiVersion: audit.k8s.io/v1\nrules: [{level: None, resources: [{group: apps/v1}]}]",
                "a group, not a group/version",
            ),
        ];
        for (text, wanted) in cases {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("policy.yaml");
            std::fs::write(&file, text).unwrap();
            let error = Policy::load(&file).expect_err(text).to_string();
            assert!(error.contains(wanted), "{text}: {error}");
            assert!(error.contains("policy.yaml"), "{error}");
        }
        let missing = Policy::load(Path::new("/nonexistent/policy.yaml")).expect_err("missing");
        assert!(matches!(missing, PolicyError::Read { .. }));
    }

    #[test]
    fn without_a_policy_file_everything_is_metadata() {
        let policy = Policy::metadata_for_everything();
        let decided = policy.decide(Option::None, "get", &path("/healthz"));
        assert_eq!(decided.level, Level::Metadata);
        assert_eq!(decided.omit_stages, Stages::default());
    }
}
