//! The authorizer over hand-filled watch caches: subjects, binding scopes,
//! role references, and the policy following the caches as they move.

use serde_json::{Value, json};
use skiff_store::Revision;

use super::testing::{Fixture, binding, fixture, key, role, user_subjects};
use super::*;
use crate::authz::{RequestKind, ResourceAttributes};
use crate::watch_cache::ChangeKind;

fn request(user: &UserInfo, verb: &str, spec: &str) -> Attributes {
    // `group resource ns name`, `-` for empty.
    let parts: Vec<&str> = spec
        .split(' ')
        .map(|p| if p == "-" { "" } else { p })
        .collect();
    let (resource, sub) = parts[1].split_once('/').unwrap_or((parts[1], ""));
    Attributes {
        user: user.clone(),
        verb: verb.into(),
        request: RequestKind::Resource(ResourceAttributes {
            group: parts[0].into(),
            version: "v1".into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: parts[2].into(),
            name: parts[3].into(),
        }),
    }
}

fn path(user: &UserInfo, verb: &str, p: &str) -> Attributes {
    Attributes {
        user: user.clone(),
        verb: verb.into(),
        request: RequestKind::NonResource { path: p.into() },
    }
}

/// ClusterRole `reader` of `rules`, bound to no one yet (see
/// [`bind_reader_to_u`]).
fn unbound_reader(rules: Value) -> Fixture {
    fixture(&[], &[role(None, "reader", rules)], &[], &[])
}

/// Binds ClusterRole `reader` to user `u` in namespace `x` as the store's
/// change at `revision`; the binding, for a later delete.
fn bind_reader_to_u(f: &Fixture, revision: Revision) -> Value {
    let b = binding(Some("x"), "b", "ClusterRole", "reader", user_subjects("u"));
    f.sources
        .role_bindings
        .apply(revision, ChangeKind::Put, key("/rb/", &b), Some(b.clone()));
    b
}

fn sa(ns: &str, name: &str) -> UserInfo {
    UserInfo::new(
        crate::tokens::user_name(ns, name),
        crate::tokens::groups(ns),
    )
}

fn allowed(rbac: &Rbac, a: &Attributes) -> bool {
    matches!(rbac.authorize(a), Decision::Allow(_))
}

#[test]
fn subjects_and_scopes_decide_as_upstream() {
    let f = fixture(
        &[
            role(
                Some("a"),
                "cm-reader",
                json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]),
            ),
            role(
                Some("b"),
                "cm-reader",
                json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]),
            ),
        ],
        &[
            role(
                None,
                "pod-reader",
                json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]),
            ),
            role(
                None,
                "node-reader",
                json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]),
            ),
            role(
                None,
                "health",
                json!([{"nonResourceURLs": ["/healthz", "/version/*"], "verbs": ["get"]}]),
            ),
        ],
        &[
            // A Role of the binding's namespace, for a user.
            binding(
                Some("a"),
                "alice-cm",
                "Role",
                "cm-reader",
                user_subjects("alice"),
            ),
            // A ClusterRole granted in one namespace, for a group.
            binding(
                Some("a"),
                "devs-pods",
                "ClusterRole",
                "pod-reader",
                json!([{"kind": "Group", "name": "devs"}]),
            ),
            // A service account without namespace: the binding's own.
            binding(
                Some("b"),
                "robot-cm",
                "Role",
                "cm-reader",
                json!([{"kind": "ServiceAccount", "name": "robot"}]),
            ),
            // Every service account of namespace c.
            binding(
                Some("c"),
                "c-accounts",
                "ClusterRole",
                "pod-reader",
                json!([{"kind": "Group", "name": "system:serviceaccounts:c"}]),
            ),
        ],
        &[
            binding(
                None,
                "ops-nodes",
                "ClusterRole",
                "node-reader",
                json!([{"kind": "Group", "name": "ops"}, {"kind": "ServiceAccount", "name": "watcher", "namespace": "kube-system"}]),
            ),
            binding(
                None,
                "public",
                "ClusterRole",
                "health",
                json!([{"kind": "Group", "name": "system:unauthenticated"}, {"kind": "Group", "name": "system:authenticated"}]),
            ),
            // An account without namespace in a ClusterRoleBinding names nobody.
            binding(
                None,
                "nobody",
                "ClusterRole",
                "pod-reader",
                json!([{"kind": "ServiceAccount", "name": "robot"}]),
            ),
        ],
    );
    let alice = UserInfo::new("alice", Vec::new());
    let dev = UserInfo::new("dave", vec!["devs".to_string()]);
    let op = UserInfo::new("olga", vec!["ops".to_string()]);
    let robot = sa("b", "robot");
    let c_account = sa("c", "any");
    let watcher = sa("kube-system", "watcher");
    let anonymous = UserInfo::anonymous();
    let cases = [
        (request(&alice, "get", "- configmaps a x"), true),
        (request(&alice, "list", "- configmaps a -"), true),
        (request(&alice, "delete", "- configmaps a x"), false),
        // RoleBindings grant nothing in other namespaces or cluster-wide.
        (request(&alice, "get", "- configmaps b x"), false),
        (request(&alice, "list", "- configmaps - -"), false),
        (request(&dev, "watch", "- pods a -"), true),
        (request(&dev, "watch", "- pods c -"), false),
        (request(&dev, "list", "- pods - -"), false),
        (request(&op, "get", "- nodes - n1"), true),
        (request(&op, "list", "- nodes - -"), false),
        (request(&watcher, "get", "- nodes - n1"), true),
        (request(&robot, "delete", "- configmaps b x"), true),
        (request(&robot, "get", "- configmaps a x"), false),
        (request(&robot, "get", "- pods b x"), false),
        (request(&c_account, "list", "- pods c -"), true),
        (request(&c_account, "list", "- pods a -"), false),
        (path(&anonymous, "get", "/healthz"), true),
        (path(&anonymous, "get", "/version/"), true),
        (path(&anonymous, "get", "/api"), false),
        (path(&alice, "get", "/healthz"), true),
        // Users are matched by name, groups by membership, nothing else.
        (
            request(&UserInfo::new("devs", Vec::new()), "list", "- pods a -"),
            false,
        ),
        (
            request(
                &UserInfo::new("x", vec!["alice".to_string()]),
                "get",
                "- configmaps a x",
            ),
            false,
        ),
    ];
    for (attributes, want) in cases {
        assert_eq!(allowed(&f.rbac, &attributes), want, "{attributes:?}");
    }
}

#[test]
fn missing_roles_are_the_reason_of_a_refusal() {
    let f = fixture(
        &[],
        &[],
        &[binding(Some("a"), "b1", "Role", "gone", user_subjects("u"))],
        &[binding(
            None,
            "b2",
            "ClusterRole",
            "absent",
            user_subjects("u"),
        )],
    );
    let u = UserInfo::new("u", Vec::new());
    assert_eq!(
        f.rbac.authorize(&request(&u, "get", "- pods - p")),
        Decision::NoOpinion(
            "RBAC: clusterrole.rbac.authorization.k8s.io \"absent\" not found".into()
        )
    );
    assert_eq!(
        f.rbac.authorize(&request(&u, "get", "- pods a p")),
        Decision::NoOpinion("RBAC: [clusterrole.rbac.authorization.k8s.io \"absent\" not found, role.rbac.authorization.k8s.io \"gone\" not found]".into())
    );
    let nobody = UserInfo::new("v", Vec::new());
    assert_eq!(
        f.rbac.authorize(&request(&nobody, "get", "- pods a p")),
        Decision::NoOpinion(String::new())
    );
}

#[test]
fn the_policy_follows_the_caches() {
    let f = unbound_reader(json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]}]));
    let u = UserInfo::new("u", Vec::new());
    let get = request(&u, "get", "apps deployments x d");
    assert!(!allowed(&f.rbac, &get));
    let b = bind_reader_to_u(&f, 2);
    assert!(allowed(&f.rbac, &get), "a new binding takes effect");
    let narrowed = role(
        None,
        "reader",
        json!([{"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}]),
    );
    f.sources.cluster_roles.apply(
        2,
        ChangeKind::Put,
        key("/cr/", &narrowed),
        Some(narrowed.clone()),
    );
    assert!(!allowed(&f.rbac, &get), "a changed role takes effect");
    assert!(allowed(&f.rbac, &request(&u, "get", "- pods x p")));
    f.sources
        .role_bindings
        .apply(3, ChangeKind::Delete, key("/rb/", &b), None);
    assert!(
        !allowed(&f.rbac, &request(&u, "get", "- pods x p")),
        "a removed binding takes effect"
    );
}

/// The compiled policy is keyed by the caches' last changes, not by how far
/// the store has moved: writes to other resources (the store's progress
/// passing the RBAC caches' revisions) must not rebuild it. A policy built
/// per request cost the scheduler's bench two thirds of its throughput once,
/// and no other test noticed.
#[test]
fn the_policy_is_built_once_per_rbac_change() {
    let f = unbound_reader(json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]));
    let progress = skiff_store::WatchProgress::new(1);
    for cache in [
        &f.sources.roles,
        &f.sources.cluster_roles,
        &f.sources.role_bindings,
        &f.sources.cluster_role_bindings,
    ] {
        cache.follows(Some(progress.clone()));
    }
    let u = UserInfo::new("u", Vec::new());
    let get = request(&u, "get", "- pods x p");
    assert!(!allowed(&f.rbac, &get));
    let first = f.rbac.current();
    for revision in 2..50 {
        progress.advance(revision);
        assert!(!allowed(&f.rbac, &get));
        assert!(
            Arc::ptr_eq(&first, &f.rbac.current()),
            "policy rebuilt when the store reached {revision} without an RBAC change"
        );
    }
    bind_reader_to_u(&f, 50);
    progress.advance(50);
    assert!(allowed(&f.rbac, &get), "the new binding takes effect");
    let second = f.rbac.current();
    assert!(!Arc::ptr_eq(&first, &second), "an RBAC change rebuilds it");
    progress.advance(60);
    assert!(allowed(&f.rbac, &get));
    assert!(Arc::ptr_eq(&second, &f.rbac.current()));
}

#[test]
fn rules_for_lists_cluster_and_namespace_rules() {
    let f = fixture(
        &[role(
            Some("a"),
            "r",
            json!([{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["s"], "verbs": ["get"]}]),
        )],
        &[role(
            None,
            "c",
            json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}, {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]),
        )],
        &[binding(Some("a"), "b", "Role", "r", user_subjects("u"))],
        &[binding(None, "cb", "ClusterRole", "c", user_subjects("u"))],
    );
    let u = UserInfo::new("u", Vec::new());
    let cluster = f.rbac.rules_for(&u, "");
    assert_eq!(cluster.resource_rules.len(), 1);
    assert_eq!(cluster.non_resource_rules.len(), 1);
    let in_a = f.rbac.rules_for(&u, "a");
    assert_eq!(in_a.resource_rules.len(), 2);
    assert_eq!(
        in_a.resource_rules[1].resource_names,
        Some(vec!["s".to_string()])
    );
    assert!(f.rbac.rules_for(&u, "b").resource_rules.len() == 1);
    assert!(
        f.rbac
            .rules_for(&UserInfo::new("x", Vec::new()), "a")
            .resource_rules
            .is_empty()
    );
}

#[test]
fn an_allow_names_the_binding_subject_and_role_in_upstreams_words() {
    let f = fixture(
        &[role(
            Some("a"),
            "cm-reader",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]),
        )],
        &[role(
            None,
            "node-reader",
            json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]),
        )],
        &[binding(
            Some("a"),
            "robot-cm",
            "Role",
            "cm-reader",
            json!([{"kind": "ServiceAccount", "name": "robot"}]),
        )],
        &[binding(
            None,
            "ops-nodes",
            "ClusterRole",
            "node-reader",
            json!([{"kind": "Group", "name": "ops"}, {"kind": "User", "name": "carol"}]),
        )],
    );
    let cases = [
        (
            UserInfo::new("dave", ["ops".to_string()]),
            "- nodes - n1",
            "RBAC: allowed by ClusterRoleBinding \"ops-nodes\" of ClusterRole \"node-reader\" to Group \"ops\"",
        ),
        (
            UserInfo::new("carol", Vec::new()),
            "- nodes - n1",
            "RBAC: allowed by ClusterRoleBinding \"ops-nodes\" of ClusterRole \"node-reader\" to User \"carol\"",
        ),
        (
            sa("a", "robot"),
            "- configmaps a x",
            "RBAC: allowed by RoleBinding \"robot-cm/a\" of Role \"cm-reader\" to ServiceAccount \"robot/a\"",
        ),
    ];
    for (user, spec, reason) in cases {
        assert_eq!(
            f.rbac.authorize(&request(&user, "get", spec)),
            Decision::Allow(reason.to_string()),
            "{} {spec}",
            user.name
        );
    }
    // A refusal has no opinion and names nothing.
    assert_eq!(
        f.rbac
            .authorize(&request(&sa("a", "robot"), "delete", "- configmaps a x")),
        Decision::NoOpinion(String::new())
    );
}
