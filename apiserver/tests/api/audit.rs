//! The audit log through the router: what each kind of request leaves in
//! the file (who, what, the decision and its reason, impersonation, Pod
//! Security's annotations), what each level records and what it must not
//! (a Secret's data at Metadata), omitted stages, streams, and the
//! `Audit-Id` header.

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::body::Body;
use http::{HeaderMap, Method, Request, StatusCode};
use serde_json::{Value, json};
use skiff_apiserver::audit::{AuditConfig, Event, Level, Stage};
use skiff_apiserver::authn::UserInfo;
use skiff_apiserver::{ApiServer, ApiServerConfig};
use tower::ServiceExt;

use crate::harness::{eventually, exchange, start_error, store_in};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// A server keeping an audit log under `policy` (none: the default).
struct Audited {
    server: ApiServer,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

struct Answer {
    code: StatusCode,
    headers: HeaderMap,
    body: Value,
}

/// Audit logging to `dir`/log/audit.log under `policy` (written to
/// `dir`/policy.yaml; none: the default policy).
fn audit_config(dir: &Path, policy: Option<&str>) -> ApiServerConfig {
    let policy_file = policy.map(|text| {
        let path = dir.join("policy.yaml");
        std::fs::write(&path, text).unwrap();
        path
    });
    ApiServerConfig {
        audit: AuditConfig {
            log_path: Some(dir.join("log/audit.log")),
            policy_file,
            ..Default::default()
        },
        ..ApiServerConfig::default()
    }
}

impl Audited {
    async fn new(policy: Option<&str>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = audit_config(dir.path(), policy);
        let log = config.audit.log_path.clone().unwrap();
        let store = store_in(dir.path());
        let server = ApiServer::new(store, config).await.unwrap();
        Self {
            server,
            log,
            _dir: dir,
        }
    }

    /// Sends a request as `user` (none: unauthenticated, as a bad token
    /// reaches the router).
    async fn send(
        &self,
        user: Option<&UserInfo>,
        method: Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header("user-agent", "audit-tests/v1");
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
        {
            builder = builder.header("content-type", "application/json");
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let bytes = body
            .map(|b| serde_json::to_vec(&b).unwrap())
            .unwrap_or_default();
        let mut request = builder.body(Body::from(bytes)).unwrap();
        if let Some(user) = user {
            request.extensions_mut().insert(user.clone());
        }
        let (code, headers, body) = exchange(self.server.router(), request).await;
        Answer {
            code,
            headers,
            body,
        }
    }

    async fn admin(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        self.as_user(&admin(), method, path, body).await
    }

    /// Sends a request as `user` with no extra headers (most tests' call).
    async fn as_user(
        &self,
        user: &UserInfo,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Answer {
        self.send(Some(user), method, path, body, &[]).await
    }

    /// POSTs `body` as the admin, which must be created: the fixture every
    /// test whose log is checked starts from.
    async fn created(&self, path: &str, body: Value) -> Answer {
        let created = self.admin(Method::POST, path, Some(body)).await;
        assert_eq!(created.code, StatusCode::CREATED, "{}", created.body);
        created
    }

    /// The ResponseComplete event of the request `answer` answered.
    async fn completed(&self, answer: &Answer) -> Event {
        complete(&self.events_of(&audit_id(answer)).await).clone()
    }

    /// The events of the request with this audit ID, once its
    /// ResponseComplete has been written (the writer flushes when idle).
    async fn events_of(&self, audit_id: &str) -> Vec<Event> {
        self.wait_for(|events| {
            events
                .iter()
                .any(|e| e.audit_id == audit_id && e.stage == Stage::ResponseComplete)
        })
        .await
        .into_iter()
        .filter(|e| e.audit_id == audit_id)
        .collect()
    }

    /// Every event in the file once `done` says so (fails after a while).
    async fn wait_for(&self, done: impl Fn(&[Event]) -> bool) -> Vec<Event> {
        eventually(
            Duration::from_secs(10),
            Duration::from_millis(20),
            || async {
                let events = read_events(&self.log);
                if done(&events) {
                    return Ok(events);
                }
                Err(format!(
                    "the audit log never showed what was expected; it has {} events",
                    events.len()
                ))
            },
        )
        .await
    }
}

fn read_events(path: &Path) -> Vec<Event> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        // The last line may still be being written.
        .filter_map(|line| serde_json::from_str::<Event>(line).ok())
        .collect()
}

fn admin() -> UserInfo {
    UserInfo::new("test-admin", ["system:masters".to_string()])
}

fn audit_id(answer: &Answer) -> String {
    answer
        .headers
        .get("audit-id")
        .expect("an Audit-Id header")
        .to_str()
        .unwrap()
        .to_string()
}

fn complete(events: &[Event]) -> &Event {
    events
        .iter()
        .find(|e| e.stage == Stage::ResponseComplete)
        .expect("a ResponseComplete event")
}

/// The stages of a request's `events`, in order: what a level or an
/// omitted stage changes.
fn stages(events: &[Event]) -> Vec<Stage> {
    events.iter().map(|e| e.stage).collect()
}

/// An annotation of `event`, as the many checks of one compare it.
fn annotation<'e>(event: &'e Event, key: &str) -> Option<&'e str> {
    event.annotations.get(key).map(String::as_str)
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
        "data": {"k": "v"}})
}

#[tokio::test]
async fn a_create_is_recorded_at_metadata_with_who_what_and_the_decision() {
    let s = Audited::new(None).await;
    let created = s.created(CMS, configmap("settings")).await;
    let id = audit_id(&created);
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
    let events = s.events_of(&id).await;
    assert_eq!(
        stages(&events),
        [Stage::RequestReceived, Stage::ResponseComplete]
    );
    let event = complete(&events);
    assert_eq!(event.level, Level::Metadata);
    assert_eq!(event.verb, "create");
    assert_eq!(event.request_uri, CMS);
    assert_eq!(event.user.username.as_deref(), Some("test-admin"));
    assert_eq!(
        event.user.groups.as_deref(),
        Some(
            &[
                "system:masters".to_string(),
                "system:authenticated".to_string()
            ][..]
        )
    );
    assert!(event.impersonated_user.is_none());
    assert_eq!(event.user_agent, "audit-tests/v1");
    let reference = event.object_ref.as_ref().expect("objectRef");
    assert_eq!(reference.resource, "configmaps");
    assert_eq!(reference.namespace, "default");
    // The name came in the body only.
    assert_eq!(reference.name, "settings");
    assert_eq!(reference.api_version, "v1");
    assert_eq!(reference.api_group, "");
    let status = event.response_status.as_ref().expect("responseStatus");
    assert_eq!(status.code, 201);
    assert!(status.message.is_empty());
    assert!(event.request_object.is_none() && event.response_object.is_none());
    assert_eq!(
        annotation(event, "authorization.k8s.io/decision"),
        Some("allow")
    );
    assert_eq!(annotation(event, "authorization.k8s.io/reason"), Some(""));
    // RequestReceived comes before authorization, so it has no decision.
    assert!(events[0].annotations.is_empty());
    assert!(events[0].response_status.is_none());
    assert!(event.stage_timestamp.0 >= event.request_received_timestamp.0);
    assert_eq!(
        events[0].request_received_timestamp,
        event.request_received_timestamp
    );
    // Every line is a whole audit.k8s.io/v1 Event.
    let text = std::fs::read_to_string(&s.log).unwrap();
    let raw: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(raw["kind"], "Event");
    assert_eq!(raw["apiVersion"], "audit.k8s.io/v1");
}

#[tokio::test]
async fn a_forbidden_get_is_recorded_with_the_refusal_and_rbac_names_what_allowed() {
    let s = Audited::new(None).await;
    let alice = UserInfo::new("alice", Vec::new());
    let refused = s
        .as_user(
            &alice,
            Method::GET,
            "/api/v1/namespaces/default/secrets/db",
            None,
        )
        .await;
    assert_eq!(refused.code, StatusCode::FORBIDDEN);
    let event = s.completed(&refused).await;
    assert_eq!(event.verb, "get");
    assert_eq!(event.user.username.as_deref(), Some("alice"));
    assert_eq!(event.object_ref.as_ref().unwrap().name, "db");
    assert_eq!(
        annotation(&event, "authorization.k8s.io/decision"),
        Some("forbid")
    );
    let status = event.response_status.as_ref().unwrap();
    assert_eq!(status.code, 403);
    assert_eq!(status.reason, "Forbidden");
    assert_eq!(status.status, "Failure");
    assert_eq!(
        status.message,
        "secrets \"db\" is forbidden: User \"alice\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\""
    );

    // What RBAC allows, it explains as upstream does.
    let review = s
        .as_user(
            &alice,
            Method::POST,
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            Some(
                json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"verb": "create", "resource": "pods"}}}),
            ),
        )
        .await;
    assert_eq!(review.code, StatusCode::CREATED, "{}", review.body);
    let events = s.events_of(&audit_id(&review)).await;
    assert_eq!(
        annotation(complete(&events), "authorization.k8s.io/reason"),
        Some(
            "RBAC: allowed by ClusterRoleBinding \"system:basic-user\" of ClusterRole \"system:basic-user\" to Group \"system:authenticated\""
        )
    );
}

#[tokio::test]
async fn an_impersonated_request_records_the_real_caller_and_whom_it_acted_as() {
    let s = Audited::new(None).await;
    let listed = s
        .send(
            Some(&admin()),
            Method::GET,
            CMS,
            None,
            &[("Impersonate-User", "bob"), ("Impersonate-Group", "devs")],
        )
        .await;
    // bob may not list configmaps: the refusal is bob's, the caller the admin.
    assert_eq!(listed.code, StatusCode::FORBIDDEN, "{}", listed.body);
    let events = s.events_of(&audit_id(&listed)).await;
    let event = complete(&events);
    assert_eq!(event.verb, "list");
    assert_eq!(event.user.username.as_deref(), Some("test-admin"));
    let acting = event.impersonated_user.as_ref().expect("impersonatedUser");
    assert_eq!(acting.username.as_deref(), Some("bob"));
    assert_eq!(
        acting.groups.as_deref(),
        Some(&["devs".to_string(), "system:authenticated".to_string()][..])
    );
    assert_eq!(
        annotation(event, "authorization.k8s.io/decision"),
        Some("forbid")
    );
    assert!(
        event
            .response_status
            .as_ref()
            .unwrap()
            .message
            .contains("User \"bob\" cannot list"),
        "{:?}",
        event.response_status
    );
    // The request as it arrived is the caller's; who it acts as is only
    // known once impersonation was allowed.
    assert!(events[0].impersonated_user.is_none());

    // A refused impersonation is the caller's alone.
    let alice = UserInfo::new("alice", Vec::new());
    let refused = s
        .send(
            Some(&alice),
            Method::GET,
            CMS,
            None,
            &[("Impersonate-User", "system:admin")],
        )
        .await;
    assert_eq!(refused.code, StatusCode::FORBIDDEN);
    let event = s.completed(&refused).await;
    assert_eq!(event.user.username.as_deref(), Some("alice"));
    assert!(event.impersonated_user.is_none());
    assert_eq!(event.response_status.as_ref().unwrap().code, 403);
}

#[tokio::test]
async fn pod_security_annotations_reach_the_log() {
    let s = Audited::new(None).await;
    s.created(
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "watched",
                "labels": {"pod-security.kubernetes.io/audit": "baseline",
                    "pod-security.kubernetes.io/enforce": "privileged"}}}),
    )
    .await;
    let created = s
        .created(
            "/api/v1/namespaces/watched/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "busybox",
                    "securityContext": {"privileged": true}}]}}),
        )
        .await;
    let event = s.completed(&created).await;
    assert_eq!(
        annotation(&event, "pod-security.kubernetes.io/enforce-policy"),
        Some("privileged:latest")
    );
    assert_eq!(
        annotation(&event, "pod-security.kubernetes.io/audit-violations"),
        Some(
            "would violate PodSecurity \"baseline:latest\": privileged (container \"c\" must not set securityContext.privileged=true)"
        )
    );
    assert_eq!(
        annotation(&event, "authorization.k8s.io/decision"),
        Some("allow")
    );
}

const LEVELS: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    users: ["system:apiserver"]
  - level: Metadata
    resources: [{group: "", resources: ["secrets"]}]
  - level: RequestResponse
    resources: [{group: "", resources: ["configmaps"]}]
    omitManagedFields: true
  - level: Request
    resources: [{group: "", resources: ["services"]}]
  - level: Metadata
    omitStages: ["ResponseStarted"]
"#;

#[tokio::test]
async fn levels_record_bodies_as_asked_and_never_a_secrets_data_at_metadata() {
    let s = Audited::new(Some(LEVELS)).await;
    // Metadata: a Secret's value appears nowhere in the file.
    let secret = s
        .created(
            "/api/v1/namespaces/default/secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
                "data": {"password": "aHVudGVyMi1zM2NyZXQ="},
                "stringData": {"token": "plain-t0ken-value"}}),
        )
        .await;
    let read = s
        .admin(Method::GET, "/api/v1/namespaces/default/secrets/db", None)
        .await;
    assert_eq!(read.code, StatusCode::OK);
    let event = s.completed(&read).await;
    assert_eq!(event.level, Level::Metadata);
    assert!(event.request_object.is_none() && event.response_object.is_none());
    s.events_of(&audit_id(&secret)).await;
    let text = std::fs::read_to_string(&s.log).unwrap();
    for needle in [
        "aHVudGVyMi1zM2NyZXQ=",
        "hunter2-s3cret",
        "plain-t0ken-value",
        "cGxhaW4tdDBrZW4tdmFsdWU=",
    ] {
        assert!(!text.contains(needle), "{needle} is in the audit log");
    }

    // RequestResponse: both bodies, without managed fields as asked.
    let created = s
        .created(&format!("{CMS}?fieldManager=audit-test"), configmap("both"))
        .await;
    let events = s.events_of(&audit_id(&created)).await;
    assert_eq!(
        stages(&events),
        [Stage::ResponseComplete],
        "RequestReceived is omitted"
    );
    let event = complete(&events);
    assert_eq!(event.level, Level::RequestResponse);
    let request = event.request_object.as_ref().expect("requestObject");
    assert_eq!(request["data"]["k"], "v");
    assert_eq!(request["metadata"]["name"], "both");
    let response = event.response_object.as_ref().expect("responseObject");
    assert_eq!(response["metadata"]["name"], "both");
    assert!(response["metadata"]["uid"].is_string());
    assert!(
        response["metadata"].get("managedFields").is_none(),
        "{response}"
    );
    assert!(created.body["metadata"]["managedFields"].is_array());
    // A failure at RequestResponse carries the Status as the response.
    let missing = s.admin(Method::GET, &format!("{CMS}/none"), None).await;
    let event = s.completed(&missing).await;
    assert_eq!(event.response_status.as_ref().unwrap().reason, "NotFound");
    assert_eq!(event.response_object.as_ref().unwrap()["kind"], "Status");

    // Request: the request body only.
    let service = s
        .created(
            "/api/v1/namespaces/default/services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                "spec": {"ports": [{"port": 80}]}}),
        )
        .await;
    let event = s.completed(&service).await;
    assert_eq!(event.level, Level::Request);
    assert_eq!(
        event.request_object.as_ref().unwrap()["spec"]["ports"][0]["port"],
        80
    );
    assert!(event.response_object.is_none());

    // A refused request's body is never read, so never recorded.
    let alice = UserInfo::new("alice", Vec::new());
    let refused = s
        .as_user(
            &alice,
            Method::POST,
            "/api/v1/namespaces/default/services",
            Some(
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "sneaky"},
                "spec": {"ports": [{"port": 81}]}}),
            ),
        )
        .await;
    assert_eq!(refused.code, StatusCode::FORBIDDEN);
    let event = s.completed(&refused).await;
    assert_eq!(event.level, Level::Request);
    assert!(event.request_object.is_none(), "{:?}", event.request_object);

    // A patch is recorded as sent.
    let patched = s
        .send(
            Some(&admin()),
            Method::PATCH,
            "/api/v1/namespaces/default/services/web",
            Some(json!({"metadata": {"labels": {"tier": "front"}}})),
            &[("content-type", "application/merge-patch+json")],
        )
        .await;
    assert_eq!(patched.code, StatusCode::OK, "{}", patched.body);
    let events = s.events_of(&audit_id(&patched)).await;
    assert_eq!(
        complete(&events).request_object,
        Some(json!({"metadata": {"labels": {"tier": "front"}}}))
    );

    // A rule of level None keeps a user out of the log entirely.
    let everyone = read_events(&s.log);
    assert!(
        everyone
            .iter()
            .all(|e| e.user.username.as_deref() != Some("system:apiserver")),
        "system:apiserver was audited"
    );
}

#[tokio::test]
async fn a_watch_is_recorded_when_it_starts_and_when_it_ends() {
    let s = Audited::new(None).await;
    let watch = s
        .admin(
            Method::GET,
            &format!("{CMS}?watch=true&timeoutSeconds=1"),
            None,
        )
        .await;
    assert_eq!(watch.code, StatusCode::OK);
    let events = s.events_of(&audit_id(&watch)).await;
    assert_eq!(
        stages(&events),
        [
            Stage::RequestReceived,
            Stage::ResponseStarted,
            Stage::ResponseComplete
        ]
    );
    assert_eq!(events[1].verb, "watch");
    assert_eq!(events[1].response_status.as_ref().unwrap().code, 200);
    // The end is recorded when the stream ended, after it started.
    assert!(events[2].stage_timestamp.0 >= events[1].stage_timestamp.0);
    assert!(
        events[2]
            .stage_timestamp
            .0
            .duration_since(events[1].stage_timestamp.0)
            >= k8s_openapi::jiff::SignedDuration::from_millis(500),
        "the watch lasted about a second"
    );

    // A rule may leave ResponseStarted out.
    let s = Audited::new(Some(LEVELS)).await;
    let watch = s
        .admin(
            Method::GET,
            "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1",
            None,
        )
        .await;
    let events = s.events_of(&audit_id(&watch)).await;
    assert_eq!(stages(&events), [Stage::ResponseComplete]);
}

#[tokio::test]
async fn unauthenticated_requests_are_recorded_and_every_answer_has_an_audit_id() {
    let s = Audited::new(None).await;
    let refused = s
        .send(None, Method::GET, "/api/v1/namespaces", None, &[])
        .await;
    assert_eq!(refused.code, StatusCode::UNAUTHORIZED);
    let event = s.completed(&refused).await;
    assert_eq!(event.user, Default::default());
    assert_eq!(event.response_status.as_ref().unwrap().code, 401);
    assert_eq!(
        event.response_status.as_ref().unwrap().reason,
        "Unauthorized"
    );

    // A client's own audit ID is kept, as upstream keeps it.
    let chosen = s
        .send(
            Some(&admin()),
            Method::GET,
            "/version",
            None,
            &[("Audit-Id", "d1b2c3")],
        )
        .await;
    assert_eq!(audit_id(&chosen), "d1b2c3");
    let events = s.events_of("d1b2c3").await;
    assert_eq!(complete(&events).verb, "get");
    assert!(complete(&events).object_ref.is_none());

    // Without an audit log the header is still there.
    let plain = crate::harness::TestServer::new().await;
    let request = Request::builder()
        .uri("/version")
        .body(Body::empty())
        .unwrap();
    let response = plain.router.clone().oneshot(request).await.unwrap();
    assert!(response.headers().contains_key("audit-id"));
}

#[tokio::test]
async fn in_process_components_are_audited_under_their_own_names() {
    let s = Audited::new(None).await;
    let client = skiff_apiserver::inprocess::client(
        s.server.router(),
        UserInfo::new("system:kube-scheduler", Vec::new()),
    );
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::all(client);
    pods.list(&Default::default()).await.unwrap();
    let events = s
        .wait_for(|events| {
            events.iter().any(|e| {
                e.user.username.as_deref() == Some("system:kube-scheduler")
                    && e.stage == Stage::ResponseComplete
            })
        })
        .await;
    let event = events
        .iter()
        .find(|e| {
            e.user.username.as_deref() == Some("system:kube-scheduler")
                && e.stage == Stage::ResponseComplete
        })
        .unwrap();
    assert_eq!(event.verb, "list");
    assert!(event.source_ips.is_empty());
    assert!(
        event.annotations["authorization.k8s.io/reason"]
            .starts_with("RBAC: allowed by ClusterRoleBinding \"system:kube-scheduler\""),
        "{:?}",
        event.annotations
    );
    // The API server's own start-up writes are there too.
    assert!(
        events
            .iter()
            .any(|e| e.user.username.as_deref() == Some("system:apiserver"))
    );
}

#[tokio::test]
async fn a_bad_policy_file_stops_the_server_from_starting() {
    let dir = tempfile::tempdir().unwrap();
    let policy = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n";
    let error = start_error(audit_config(dir.path(), Some(policy)))
        .await
        .to_string();
    assert!(error.contains("no rules"), "{error}");
}
