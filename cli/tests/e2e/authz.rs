//! The review APIs and impersonation through real kubectl: `auth can-i`
//! (SelfSubjectAccessReview), `auth can-i --list` (SelfSubjectRulesReview),
//! `auth whoami` (SelfSubjectReview) and `--as`/`--as-group`.

use super::support::{Server, assert_contains};

/// `kubectl auth can-i` answers on stdout and exits 1 for "no".
fn can_i(server: &Server, args: &[&str]) -> String {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let out = server.kubectl(&all);
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        stdout == "yes" || stdout == "no",
        "kubectl {all:?}: {stdout} / {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        out.status.success(),
        stdout == "yes",
        "exit code of {all:?}"
    );
    stdout
}

/// The SelfSubjectAccessReview of the Kubernetes authorization docs.
const DOCS_REVIEW: &str = r#"apiVersion: authorization.k8s.io/v1
kind: SelfSubjectAccessReview
spec:
  resourceAttributes:
    group: apps
    resource: deployments
    verb: create
    namespace: dev
"#;

#[test]
fn kubectl_auth_asks_the_review_apis() {
    let server = Server::start();
    assert_eq!(can_i(&server, &["create", "pods"]), "yes");
    assert_eq!(
        can_i(&server, &["delete", "nodes", "--all-namespaces"]),
        "yes"
    );

    let list = server.kubectl_ok(&["auth", "can-i", "--list"]);
    let rows: Vec<Vec<&str>> = list
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows.first().map(|r| r[0]),
        Some("Resources"),
        "a table: {list}"
    );
    assert!(
        rows.iter()
            .any(|r| r.first() == Some(&"*.*") && r.last() == Some(&"[*]")),
        "the admin may do anything: {list}"
    );

    // A review written as the Kubernetes docs write it, without metadata:
    // kubectl checks create-only kinds against the served OpenAPI schema
    // on the client, so the schema must not require metadata.
    let review = server.kubectl_stdin_ok(&["create", "-f", "-", "-o", "json"], DOCS_REVIEW);
    let review: serde_json::Value = serde_json::from_str(&review).expect("review JSON");
    assert_eq!(review["status"]["allowed"], true, "{review}");

    let whoami = server.kubectl_ok(&["auth", "whoami"]);
    assert!(
        whoami
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["Username", "system:admin"]),
        "{whoami}"
    );
    assert!(
        whoami.contains("system:masters") && whoami.contains("system:authenticated"),
        "{whoami}"
    );

    // Impersonation: the admin acts as a service account with an extra
    // group; whoami and the answers are the acting user's.
    let acting = server.kubectl_ok(&[
        "auth",
        "whoami",
        "--as=system:serviceaccount:default:x",
        "--as-group=team-a",
        "-o",
        "json",
    ]);
    let review: serde_json::Value = serde_json::from_str(&acting).expect("whoami JSON");
    let info = &review["status"]["userInfo"];
    assert_eq!(
        info["username"], "system:serviceaccount:default:x",
        "{review}"
    );
    assert_eq!(
        info["groups"],
        serde_json::json!(["team-a", "system:authenticated"]),
        "groups given replace the service account's own: {review}"
    );
}

#[test]
fn kubectl_as_a_service_account_gets_its_answers_not_the_admins() {
    let server = Server::start();
    let sa = "--as=system:serviceaccount:default:x";
    assert_eq!(can_i(&server, &["get", "secrets", sa]), "no");
    assert_eq!(can_i(&server, &["create", "pods", sa]), "no");
    assert_eq!(
        can_i(&server, &["create", "selfsubjectaccessreviews", sa]),
        "yes"
    );
    let err = server.kubectl_err(&["get", "secrets", sa]);
    assert_contains(
        &err,
        "secrets is forbidden: User \"system:serviceaccount:default:x\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\"",
    );
}
