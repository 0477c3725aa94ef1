//! The audit log as an administrator turns it on: `skiff server
//! --audit-log-path F --audit-policy-file P`, then kubectl creates, reads,
//! deletes and impersonates; after a clean stop every line of F is an
//! `audit.k8s.io/v1` Event saying who did what, with what outcome.

use serde_json::Value;
use skiff_apiserver::audit::{Event, Level, Stage};

use super::support::{Server, assert_contains};

const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  # The in-process components' own traffic and health checks stay out.
  - level: None
    userGroups: ["system:serviceaccounts:kube-system", "system:nodes"]
  - level: None
    users: ["system:kube-scheduler", "system:kube-controller-manager", "system:apiserver", "system:kube-proxy"]
  - level: None
    nonResourceURLs: ["/healthz*", "/readyz*", "/livez*"]
  - level: RequestResponse
    resources: [{group: "", resources: ["configmaps"]}]
  - level: Metadata
"#;

fn events(text: &str) -> Vec<(Value, Event)> {
    text.lines()
        .map(|line| {
            let raw: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            let event: Event = serde_json::from_value(raw.clone())
                .unwrap_or_else(|e| panic!("not an audit Event ({e}): {line}"));
            (raw, event)
        })
        .collect()
}

fn find<'a>(all: &'a [(Value, Event)], verb: &str, name: &str, user: &str) -> &'a (Value, Event) {
    all.iter()
        .find(|(_, e)| {
            e.verb == verb
                && e.stage == Stage::ResponseComplete
                && e.object_ref.as_ref().is_some_and(|r| r.name == name)
                && e.user.username.as_deref() == Some(user)
        })
        .unwrap_or_else(|| panic!("no {verb} of {name} by {user} in the audit log"))
}

#[test]
fn kubectl_requests_are_in_the_audit_log_saying_who_did_what() {
    let files = tempfile::tempdir().expect("tempdir");
    let log = files.path().join("audit/audit.log");
    let policy = files.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).expect("policy");
    let mut server = Server::start_with(&[
        "--disable-agent",
        "--audit-log-path",
        log.to_str().unwrap(),
        "--audit-policy-file",
        policy.to_str().unwrap(),
    ]);
    server.kubectl_ok(&["create", "configmap", "audited", "--from-literal=k=v"]);
    server.kubectl_ok(&["get", "configmap", "audited", "-o", "name"]);
    let refused = server.kubectl_err(&["--as", "mallory", "get", "secret", "vault"]);
    assert_contains(&refused, "forbidden");
    server.kubectl_ok(&["delete", "configmap", "audited"]);
    // Wrong credentials are answered 401 and recorded without a user.
    let unauthorized = server.kubectl_err(&["--token", "not-a-token", "get", "pods"]);
    assert_contains(&unauthorized, "Unauthorized");
    let status = server.terminate();
    assert!(status.success(), "{status}\n{}", server.log());

    let text = std::fs::read_to_string(&log).expect("the audit log");
    let all = events(&text);
    assert!(!all.is_empty());
    for (raw, event) in &all {
        assert_eq!(raw["kind"], "Event");
        assert_eq!(raw["apiVersion"], "audit.k8s.io/v1");
        // A UUID: 8-4-4-4-12 hex digits.
        let groups: Vec<usize> = event.audit_id.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{raw}");
        assert_ne!(event.stage, Stage::RequestReceived, "omitted: {raw}");
        let user = event.user.username.as_deref().unwrap_or_default();
        assert!(
            !user.starts_with("system:serviceaccount:kube-system:")
                && !user.starts_with("system:node:")
                && user != "system:kube-scheduler",
            "left out by the policy: {raw}"
        );
        // Timestamps with microseconds, as upstream writes them.
        let stamp = raw["stageTimestamp"].as_str().unwrap();
        assert_eq!(stamp.len(), "2024-01-01T00:00:00.000000Z".len(), "{stamp}");
    }

    // The create: kubectl's admin, the object and its body (configmaps are
    // RequestResponse), 201.
    let (raw, created) = find(&all, "create", "audited", "system:admin");
    assert_eq!(created.level, Level::RequestResponse);
    assert_eq!(created.response_status.as_ref().unwrap().code, 201);
    assert!(created.user_agent.starts_with("kubectl"), "{raw}");
    assert_eq!(created.source_ips, ["127.0.0.1"]);
    assert_eq!(created.object_ref.as_ref().unwrap().namespace, "default");
    assert_eq!(raw["requestObject"]["data"]["k"], "v");
    assert_eq!(raw["responseObject"]["metadata"]["name"], "audited");
    assert_eq!(raw["annotations"]["authorization.k8s.io/decision"], "allow");

    let (_, read) = find(&all, "get", "audited", "system:admin");
    assert_eq!(read.response_status.as_ref().unwrap().code, 200);
    let (_, deleted) = find(&all, "delete", "audited", "system:admin");
    assert_eq!(deleted.response_status.as_ref().unwrap().code, 200);

    // kubectl --as: the admin is the user, mallory the one acted as, and
    // the refusal is recorded with authorization's decision.
    let (raw, impersonated) = find(&all, "get", "vault", "system:admin");
    assert_eq!(
        impersonated
            .impersonated_user
            .as_ref()
            .and_then(|u| u.username.as_deref()),
        Some("mallory")
    );
    assert_eq!(impersonated.level, Level::Metadata);
    assert_eq!(impersonated.response_status.as_ref().unwrap().code, 403);
    assert_eq!(
        raw["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
    assert!(raw.get("responseObject").is_none(), "{raw}");

    let (raw, rejected) = all
        .iter()
        .find(|(_, e)| {
            e.response_status.as_ref().is_some_and(|s| s.code == 401)
                && e.object_ref.as_ref().is_some_and(|r| r.resource == "pods")
        })
        .expect("the 401 in the audit log");
    assert!(rejected.user.username.is_none(), "{raw}");
    assert_eq!(rejected.source_ips, ["127.0.0.1"]);
    assert_eq!(raw["responseStatus"]["reason"], "Unauthorized");
}
