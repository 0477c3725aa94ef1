//! What a ResourceQuota counts, as upstream's quota evaluators do: which of
//! a quota's resource names an object of some resource is charged under,
//! how much one object uses (`usage`), what a pod must specify when a quota
//! constrains cpu or memory (`constraints`), and whether an object falls in
//! a quota's scopes. The API server's admission checks a write with these
//! and the quota controller reports `status.used` with them, so both agree
//! to the unit.
//!
//! Objects are read in their JSON wire form (what the API server holds and
//! what any client lists), so neither side converts. Nothing here reads the
//! cluster: callers hand in the objects and the time.

mod objects;
pub mod pods;

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value};

use crate::amount::Amount;

/// Quota resource names and their amounts, in name order (upstream's
/// `ResourceList`).
pub type ResourceList = BTreeMap<String, Amount>;

/// The object-count name of a resource: `count/<resource>` in the core
/// group, `count/<resource>.<group>` elsewhere.
pub fn object_count_name(group: &str, resource: &str) -> String {
    if group.is_empty() {
        format!("count/{resource}")
    } else {
        format!("count/{resource}.{group}")
    }
}

/// Reads a `hard`/`used`-style map; entries that are not quantities are
/// left out (validation refuses them before they are stored).
pub fn read_list(value: &Value) -> ResourceList {
    value
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(name, q)| Some((name.clone(), Amount::parse(q.as_str()?)?)))
        .collect()
}

/// A list as JSON, each amount in canonical form.
pub fn list_to_json(list: &ResourceList) -> Value {
    Value::Object(
        list.iter()
            .map(|(name, amount)| (name.clone(), Value::from(amount.to_string())))
            .collect::<Map<String, Value>>(),
    )
}

/// The sum of two lists, name by name.
pub fn add(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut sum = a.clone();
    for (name, amount) in b {
        let total = sum.get(name).map_or(*amount, |have| *have + *amount);
        sum.insert(name.clone(), total);
    }
    sum
}

/// `a - b` name by name over `a`'s names, never below zero (what an update
/// adds to usage; a shrink frees nothing until the controller recounts).
pub fn subtract_non_negative(a: &ResourceList, b: &ResourceList) -> ResourceList {
    a.iter()
        .map(|(name, amount)| {
            let left = b.get(name).map_or(*amount, |less| *amount - *less);
            let left = if left.milli() < 0 { Amount::ZERO } else { left };
            (name.clone(), left)
        })
        .collect()
}

/// The entries of `list` whose names are in `names`.
pub fn mask<'n>(list: &ResourceList, names: impl IntoIterator<Item = &'n str>) -> ResourceList {
    names
        .into_iter()
        .filter_map(|name| list.get_key_value(name))
        .map(|(name, amount)| (name.clone(), *amount))
        .collect()
}

/// Whether every amount is zero.
pub fn is_zero(list: &ResourceList) -> bool {
    list.values().all(Amount::is_zero)
}

/// The names in `wanted` whose amount is above `hard`'s (names `hard`
/// lacks are not limited).
pub fn exceeded(wanted: &ResourceList, hard: &ResourceList) -> Vec<String> {
    wanted
        .iter()
        .filter(|(name, amount)| hard.get(*name).is_some_and(|limit| *amount > limit))
        .map(|(name, _)| name.clone())
        .collect()
}

/// `name=amount` pairs joined by commas, in name order, as upstream's
/// quota messages print a list.
pub fn pretty(list: &ResourceList) -> String {
    list.iter()
        .map(|(name, amount)| format!("{name}={amount}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The resources (group, plural) with their own usage rules; any other is
/// only counted, under `count/<resource>.<group>`.
const EVALUATED: &[&str] = &[
    "pods",
    "services",
    "persistentvolumeclaims",
    "configmaps",
    "secrets",
    "replicationcontrollers",
    "resourcequotas",
];

/// The resource (group, plural) whose objects are charged under the quota
/// resource `name`; `None` for names nothing is charged under.
pub fn resource_of(name: &str) -> Option<(String, String)> {
    if let Some(counted) = name.strip_prefix("count/") {
        return Some(match counted.split_once('.') {
            Some((resource, group)) => (group.to_string(), resource.to_string()),
            None => (String::new(), counted.to_string()),
        });
    }
    EVALUATED
        .iter()
        .find(|resource| Evaluator::for_resource("", resource).matches(name))
        .map(|resource| (String::new(), resource.to_string()))
}

/// How objects of one resource are charged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluator {
    kind: Kind,
    count_name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pods,
    Services,
    Claims,
    /// Counted only; some core resources also have a short legacy name.
    Counted(Option<&'static str>),
}

impl Evaluator {
    /// The evaluator for objects of `group`/`resource`.
    pub fn for_resource(group: &str, resource: &str) -> Self {
        let kind = match (group, resource) {
            ("", "pods") => Kind::Pods,
            ("", "services") => Kind::Services,
            ("", "persistentvolumeclaims") => Kind::Claims,
            ("", "configmaps") => Kind::Counted(Some("configmaps")),
            ("", "secrets") => Kind::Counted(Some("secrets")),
            ("", "replicationcontrollers") => Kind::Counted(Some("replicationcontrollers")),
            ("", "resourcequotas") => Kind::Counted(Some("resourcequotas")),
            _ => Kind::Counted(None),
        };
        Evaluator {
            kind,
            count_name: object_count_name(group, resource),
        }
    }

    /// Whether a quota resource `name` is charged by objects of this
    /// resource.
    pub fn matches(&self, name: &str) -> bool {
        if name == self.count_name {
            return true;
        }
        match self.kind {
            Kind::Pods => pods::is_pod_resource(name),
            Kind::Services => objects::is_service_resource(name),
            Kind::Claims => objects::is_claim_resource(name),
            Kind::Counted(legacy) => legacy == Some(name),
        }
    }

    /// The names among `names` this resource is charged under.
    pub fn matching<'n>(&self, names: impl IntoIterator<Item = &'n String>) -> Vec<String> {
        names
            .into_iter()
            .filter(|name| self.matches(name))
            .cloned()
            .collect()
    }

    /// Whether updates can change what an object uses (so admission checks
    /// them): a Service's type and ports, a claim's size. Pods' resources
    /// cannot change and other objects count once.
    pub fn charges_updates(&self) -> bool {
        matches!(self.kind, Kind::Services | Kind::Claims)
    }

    /// Whether quota scopes apply to this resource (only pods have any).
    pub fn has_scopes(&self) -> bool {
        self.kind == Kind::Pods
    }

    /// What `object` uses, under every name this resource is charged by.
    /// `now` decides whether a deleted pod's grace period is over.
    pub fn usage(&self, object: &Value, now: Timestamp) -> ResourceList {
        let mut usage = match self.kind {
            Kind::Pods => pods::usage(object, now),
            Kind::Services => objects::service_usage(object),
            Kind::Claims => objects::claim_usage(object),
            Kind::Counted(legacy) => legacy
                .map(|name| (name.to_string(), Amount::count(1)))
                .into_iter()
                .collect(),
        };
        usage.insert(self.count_name.clone(), Amount::count(1));
        usage
    }

    /// Refuses an object that does not say how much of a `required`
    /// resource it uses, where that must be said (pods under a cpu or
    /// memory quota); the error reads `must specify ...`.
    pub fn constraints(&self, required: &[String], object: &Value) -> Result<(), String> {
        match self.kind {
            Kind::Pods => pods::constraints(required, object),
            _ => Ok(()),
        }
    }
}

/// One scope requirement of a quota: `spec.scopes` entries (operator
/// `Exists`) and `spec.scopeSelector.matchExpressions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeRequirement {
    /// `Terminating`, `NotTerminating`, `BestEffort`, `NotBestEffort`,
    /// `PriorityClass` or `CrossNamespacePodAffinity`.
    pub scope: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// The values of `In` and `NotIn`.
    pub values: Vec<String>,
}

/// What of a quota decides which objects it counts and how much it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaSpec {
    /// `spec.hard`.
    pub hard: ResourceList,
    /// Every scope requirement; all must hold.
    pub scopes: Vec<ScopeRequirement>,
}

impl QuotaSpec {
    /// Reads a ResourceQuota (its JSON form).
    pub fn of(quota: &Value) -> Self {
        let spec = &quota["spec"];
        let mut scopes: Vec<ScopeRequirement> = spec["scopes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|scope| ScopeRequirement {
                scope: scope.to_string(),
                operator: "Exists".into(),
                values: Vec::new(),
            })
            .collect();
        scopes.extend(
            spec["scopeSelector"]["matchExpressions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|expr| ScopeRequirement {
                    scope: expr["scopeName"].as_str().unwrap_or("").to_string(),
                    operator: expr["operator"].as_str().unwrap_or("").to_string(),
                    values: expr["values"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect(),
                }),
        );
        QuotaSpec {
            hard: read_list(&spec["hard"]),
            scopes,
        }
    }

    /// The hard names `evaluator`'s resource is charged under, when this
    /// quota counts `object` at all (it names one of them and the object
    /// is in every scope; a scoped quota counts pods only). Empty otherwise.
    pub fn charged_names(&self, evaluator: &Evaluator, object: &Value) -> Vec<String> {
        let names = evaluator.matching(self.hard.keys());
        if names.is_empty() || !self.in_scope(evaluator, object) {
            return Vec::new();
        }
        names
    }

    /// Whether `object` is in every scope of this quota.
    pub fn in_scope(&self, evaluator: &Evaluator, object: &Value) -> bool {
        if self.scopes.is_empty() {
            return true;
        }
        evaluator.has_scopes()
            && self
                .scopes
                .iter()
                .all(|requirement| pods::in_scope(requirement, object))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn list(pairs: &[(&str, &str)]) -> ResourceList {
        pairs
            .iter()
            .map(|(n, q)| (n.to_string(), Amount::parse(q).unwrap()))
            .collect()
    }

    #[test]
    fn count_names_follow_the_group() {
        assert_eq!(object_count_name("", "configmaps"), "count/configmaps");
        assert_eq!(
            object_count_name("apps", "deployments"),
            "count/deployments.apps"
        );
    }

    #[test]
    fn each_resource_is_charged_under_its_own_names() {
        let cm = Evaluator::for_resource("", "configmaps");
        assert!(cm.matches("configmaps") && cm.matches("count/configmaps"));
        assert!(!cm.matches("secrets") && !cm.matches("pods"));
        let deploy = Evaluator::for_resource("apps", "deployments");
        assert!(deploy.matches("count/deployments.apps"));
        assert!(!deploy.matches("deployments") && !deploy.matches("count/deployments"));
        let pods = Evaluator::for_resource("", "pods");
        for name in [
            "pods",
            "count/pods",
            "cpu",
            "requests.memory",
            "limits.cpu",
            "requests.ephemeral-storage",
            "hugepages-2Mi",
            "requests.example.com/gpu",
        ] {
            assert!(pods.matches(name), "{name}");
        }
        assert!(!pods.matches("requests.storage") && !pods.matches("services"));
        let claims = Evaluator::for_resource("", "persistentvolumeclaims");
        assert!(claims.matches("requests.storage"));
        assert!(claims.matches("gold.storageclass.storage.k8s.io/requests.storage"));
        assert!(claims.matches("gold.storageclass.storage.k8s.io/persistentvolumeclaims"));
        assert!(!claims.matches("requests.cpu"));
    }

    #[test]
    fn each_name_leads_to_the_resource_charged_under_it() {
        let of = |name: &str| resource_of(name).map(|(g, r)| format!("{g}/{r}"));
        assert_eq!(of("pods").as_deref(), Some("/pods"));
        assert_eq!(of("limits.memory").as_deref(), Some("/pods"));
        assert_eq!(of("services.nodeports").as_deref(), Some("/services"));
        assert_eq!(
            of("gold.storageclass.storage.k8s.io/requests.storage").as_deref(),
            Some("/persistentvolumeclaims")
        );
        assert_eq!(of("configmaps").as_deref(), Some("/configmaps"));
        assert_eq!(of("count/secrets").as_deref(), Some("/secrets"));
        assert_eq!(
            of("count/widgets.example.com").as_deref(),
            Some("example.com/widgets")
        );
        assert_eq!(of("bananas"), None);
    }

    #[test]
    fn list_arithmetic_as_quota_admission_uses_it() {
        let used = list(&[("pods", "1"), ("requests.memory", "512Mi")]);
        let more = list(&[("pods", "1"), ("requests.memory", "1Gi")]);
        let sum = add(&used, &more);
        assert_eq!(pretty(&sum), "pods=2,requests.memory=1536Mi");
        let hard = list(&[("pods", "2"), ("requests.memory", "1Gi")]);
        assert_eq!(exceeded(&sum, &hard), vec!["requests.memory".to_string()]);
        let shrink = subtract_non_negative(&used, &more);
        assert!(is_zero(&shrink));
        assert_eq!(pretty(&mask(&sum, ["pods"])), "pods=2");
        assert_eq!(
            list_to_json(&sum),
            json!({"pods": "2", "requests.memory": "1536Mi"})
        );
    }

    #[test]
    fn generic_objects_count_once_under_both_names() {
        let cm = Evaluator::for_resource("", "configmaps");
        let usage = cm.usage(&json!({}), Timestamp::UNIX_EPOCH);
        assert_eq!(pretty(&usage), "configmaps=1,count/configmaps=1");
    }

    #[test]
    fn scoped_quotas_count_pods_only() {
        let quota = QuotaSpec::of(&json!({"spec": {
            "hard": {"pods": "2", "count/configmaps": "1"},
            "scopes": ["BestEffort"]
        }}));
        let pods = Evaluator::for_resource("", "pods");
        let cms = Evaluator::for_resource("", "configmaps");
        let best_effort = json!({"spec": {"containers": [{"name": "c"}]}});
        assert_eq!(quota.charged_names(&pods, &best_effort), vec!["pods"]);
        assert!(quota.charged_names(&cms, &json!({})).is_empty());
        let unscoped = QuotaSpec::of(&json!({"spec": {"hard": {"count/configmaps": "1"}}}));
        assert_eq!(
            unscoped.charged_names(&cms, &json!({})),
            vec!["count/configmaps"]
        );
    }
}
