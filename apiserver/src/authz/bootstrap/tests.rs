//! Reconciliation and aggregation of the default policy, without a server.

use std::collections::HashSet;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule};
use serde_json::json;

use super::table::{AUTOUPDATE, RoleSpec, RuleBuilder, rule};
use super::*;
use crate::authn::UserInfo;
use crate::authz::rbac::rule::uncovered;
use crate::authz::{Attributes, RequestKind, ResourceAttributes};

fn cluster_role(value: serde_json::Value) -> ClusterRole {
    serde_json::from_value(value).unwrap()
}

fn rules(role: &ClusterRole) -> Vec<Rule> {
    role.rules.iter().flatten().map(Rule::from).collect()
}

#[test]
fn reconcile_adds_what_is_missing_and_keeps_what_the_admin_added() {
    let expected = RoleSpec::cluster(
        "r",
        vec![
            rule(&["get"]).groups(&[""]).resources(&["pods"]),
            rule(&["list"]).groups(&[""]).resources(&["pods"]),
        ],
    )
    .cluster_role();
    // Edited: one default rule widened, one dropped, one extra, a label
    // changed, the default annotation gone.
    let existing = cluster_role(json!({
        "metadata": {"name": "r", "labels": {"kubernetes.io/bootstrapping": "mine", "extra": "x"}},
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]},
        ]
    }));
    let (step, result) = reconcile(&existing, &expected);
    assert_eq!(step, Step::Update);
    let got = rules(&result);
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[2], Rule::from(&expected.rules.as_ref().unwrap()[1]));
    let labels = result.metadata.labels.unwrap();
    assert_eq!(labels["kubernetes.io/bootstrapping"], "mine");
    assert_eq!(labels["extra"], "x");
    assert_eq!(result.metadata.annotations.unwrap()[AUTOUPDATE], "true");

    // Reconciling the result again changes nothing.
    let (again, _) = reconcile(&existing_after(&existing, &expected), &expected);
    assert_eq!(again, Step::Keep);

    let mut protected = existing.clone();
    protected.metadata.annotations = Some([(AUTOUPDATE.to_string(), "false".to_string())].into());
    assert_eq!(
        reconcile(&protected, &expected),
        (Step::Keep, protected.clone())
    );
}

fn existing_after(existing: &ClusterRole, expected: &ClusterRole) -> ClusterRole {
    reconcile(existing, expected).1
}

#[test]
fn reconcile_bindings_by_subject_and_role_reference() {
    let expected: ClusterRoleBinding = table::BindingSpec::cluster(
        "b",
        vec![table::user("u"), table::service_account("kube-system", "x")],
    )
    .cluster_role_binding();
    let mut existing = expected.clone();
    existing.subjects = Some(vec![table::group("admins"), table::user("u")]);
    let (step, result) = reconcile(&existing, &expected);
    assert_eq!(step, Step::Update);
    let names: Vec<&str> = result
        .subjects
        .iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(names, ["admins", "u", "x"]);

    let mut moved = expected.clone();
    moved.role_ref.name = "other".into();
    assert_eq!(
        reconcile(&moved, &expected),
        (Step::Recreate, expected.clone())
    );
    assert_eq!(reconcile(&expected, &expected).0, Step::Keep);
}

#[test]
fn aggregation_gathers_matching_roles_once_in_name_order() {
    let mut all = vec![
        cluster_role(json!({"metadata": {"name": "top"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"to-top": "true"}}]}})),
        cluster_role(
            json!({"metadata": {"name": "mid", "labels": {"to-top": "true"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"to-mid": "true"}}]}}),
        ),
        cluster_role(
            json!({"metadata": {"name": "b", "labels": {"to-mid": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["b"], "verbs": ["get"]}]}),
        ),
        cluster_role(
            json!({"metadata": {"name": "a", "labels": {"to-mid": "true", "to-top": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["a"], "verbs": ["get"]}]}),
        ),
        cluster_role(json!({"metadata": {"name": "unrelated"},
            "rules": [{"apiGroups": [""], "resources": ["z"], "verbs": ["get"]}]})),
    ];
    let changed = settle_aggregation(&mut all);
    assert_eq!(changed, vec![0, 1]);
    let resources = |role: &ClusterRole| -> Vec<String> {
        role.rules
            .iter()
            .flatten()
            .flat_map(|r| r.resources.clone().unwrap_or_default())
            .collect()
    };
    assert_eq!(resources(&all[1]), ["a", "b"]);
    // `a` reaches top directly and through mid, and counts once.
    assert_eq!(resources(&all[0]), ["a", "b"]);
    assert!(settle_aggregation(&mut all).is_empty());
    assert!(aggregated_rules(&all[4], &all).is_none());
}

fn can(rules: &[PolicyRule], verb: &str, group: &str, resource: &str) -> bool {
    let attributes = Attributes {
        user: UserInfo::new("x", Vec::new()),
        verb: verb.into(),
        request: RequestKind::Resource(ResourceAttributes {
            group: group.into(),
            resource: resource.into(),
            namespace: "ns".into(),
            ..Default::default()
        }),
    };
    rules
        .iter()
        .any(|r| Rule::from(r).allows(&attributes.verb, &attributes.request))
}

#[test]
fn the_default_policy_hangs_together() {
    let mut policy = default_policy();
    let role_names: HashSet<String> = policy
        .cluster_roles
        .iter()
        .filter_map(|r| r.metadata.name.clone())
        .collect();
    assert_eq!(role_names.len(), policy.cluster_roles.len(), "unique names");
    for binding in &policy.cluster_role_bindings {
        assert!(
            role_names.contains(&binding.role_ref.name),
            "{:?} binds a missing role",
            binding.metadata.name
        );
    }
    for binding in &policy.role_bindings {
        let ns = binding.metadata.namespace.as_deref();
        assert!(
            policy
                .roles
                .iter()
                .any(|r| r.metadata.namespace.as_deref() == ns
                    && r.metadata.name.as_deref() == Some(binding.role_ref.name.as_str())),
            "{:?} binds a missing role",
            binding.metadata.name
        );
    }
    settle_aggregation(&mut policy.cluster_roles);
    let role = |name: &str| -> Vec<PolicyRule> {
        policy
            .cluster_roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .and_then(|r| r.rules.clone())
            .unwrap_or_default()
    };
    let (admin, edit, view) = (role("admin"), role("edit"), role("view"));
    assert!(can(&view, "list", "", "pods"));
    assert!(!can(&view, "list", "", "secrets"));
    assert!(!can(&view, "create", "", "pods"));
    assert!(can(&edit, "list", "", "secrets"));
    assert!(can(&edit, "create", "apps", "deployments"));
    assert!(!can(&edit, "create", "rbac.authorization.k8s.io", "roles"));
    assert!(can(&admin, "create", "rbac.authorization.k8s.io", "roles"));
    // Each includes the one below it.
    let as_rules = |l: &[PolicyRule]| l.iter().map(Rule::from).collect::<Vec<_>>();
    let (admin, edit, view) = (as_rules(&admin), as_rules(&edit), as_rules(&view));
    assert!(uncovered(&admin.iter().collect::<Vec<_>>(), &edit).is_empty());
    assert!(uncovered(&edit.iter().collect::<Vec<_>>(), &view).is_empty());
    assert!(!uncovered(&view.iter().collect::<Vec<_>>(), &edit).is_empty());
    // The disruption controller writes budgets' status and nothing else:
    // not their spec, not pods (evictions are the eviction API's), and it
    // reads no secrets.
    let disruption = role(&controllers::role_name("disruption-controller"));
    assert!(can(
        &disruption,
        "update",
        "policy",
        "poddisruptionbudgets/status"
    ));
    assert!(can(&disruption, "list", "apps", "replicasets"));
    assert!(!can(
        &disruption,
        "update",
        "policy",
        "poddisruptionbudgets"
    ));
    assert!(!can(&disruption, "delete", "", "pods"));
    assert!(!can(&disruption, "create", "", "pods/eviction"));
    assert!(!can(&disruption, "get", "", "secrets"));
    // Every skiff controller has a role and a binding to its account.
    for (_, account) in controllers::CONTROLLER_ACCOUNTS {
        let name = controllers::role_name(account);
        assert!(role_names.contains(&name), "{name}");
        assert!(
            policy.cluster_role_bindings.iter().any(|b| {
                b.metadata.name.as_deref() == Some(name.as_str())
                    && b.subjects.iter().flatten().any(|s| {
                        s.kind == "ServiceAccount"
                            && s.name == *account
                            && s.namespace.as_deref() == Some("kube-system")
                    })
            }),
            "{name} is bound to its account"
        );
    }
}
