//! Admission webhooks against real HTTPS servers started by the test (an
//! rcgen CA as the configuration's caBundle): refusals in upstream's words,
//! patches applied on creates and updates, warnings relayed, timeouts and
//! unreachable hooks under both failure policies, dry runs and side
//! effects, namespace and object selectors, reinvocation, Service
//! references resolved through an EndpointSlice — and from the attacker's
//! side: a hook that cannot prove its name gets nothing, a patch cannot
//! rename the object, a validating hook cannot patch, and no webhook can
//! lock the administrator out of the configurations.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use http::{Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use parking_lot::Mutex;
use serde_json::{Value, json};
use skiff_testkit::admission::review_answer;
use skiff_testkit::pki::TestCa;

use crate::harness::{
    Client, Expect, KeptStore, TestServer, assert_mentions, columns, configmap, created_answer,
    deployment, forbidden, labelled_namespace, refused,
};
use crate::node_tls::{ClientCerts, tls_listener};

type Answer = Arc<dyn Fn(&Value) -> Value + Send + Sync>;

/// A webhook server on loopback: answers each review with what `answer`
/// makes of its request (the response's fields; uid is filled in), after
/// `delay`, and keeps every request it got.
struct Hook {
    port: u16,
    seen: Arc<Mutex<Vec<Value>>>,
    /// The header names of every request, in order.
    headers: Arc<Mutex<Vec<Vec<String>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Hook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Hook {
    async fn start(cert: (String, String), delay: Duration, answer: Answer) -> Self {
        let (listener, port, acceptor) = tls_listener(&cert, ClientCerts::None).await;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = seen.clone();
        let headers = Arc::new(Mutex::new(Vec::new()));
        let recorded_headers = headers.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                let answer = answer.clone();
                let recorded = recorded.clone();
                let recorded_headers = recorded_headers.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service =
                        tower::service_fn(move |request: Request<hyper::body::Incoming>| {
                            let answer = answer.clone();
                            let recorded = recorded.clone();
                            recorded_headers.lock().push(
                                request
                                    .headers()
                                    .keys()
                                    .map(|k| k.as_str().to_string())
                                    .collect(),
                            );
                            async move {
                                let bytes = axum::body::to_bytes(
                                    Body::new(request.into_body()),
                                    usize::MAX,
                                )
                                .await
                                .unwrap_or_default();
                                let review: Value =
                                    serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                                recorded.lock().push(review["request"].clone());
                                tokio::time::sleep(delay).await;
                                let body = review_answer(&review, answer(&review["request"]));
                                Ok::<_, std::convert::Infallible>(
                                    http::Response::builder()
                                        .header("content-type", "application/json")
                                        .body(Body::from(serde_json::to_vec(&body).unwrap()))
                                        .unwrap(),
                                )
                            }
                        });
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), TowerToHyperService::new(service))
                        .await;
                });
            }
        });
        Self {
            port,
            seen,
            headers,
            task,
        }
    }

    /// A hook on 127.0.0.1 with a serving certificate from `ca` that
    /// answers at once: what most tests run.
    async fn local(ca: &TestCa, answer: Answer) -> Self {
        Self::start(ca.serving(&["127.0.0.1"]), Duration::ZERO, answer).await
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    fn requests(&self) -> Vec<Value> {
        self.seen.lock().clone()
    }
}

fn allow() -> Answer {
    Arc::new(|_| json!({"allowed": true}))
}

fn deny(message: &'static str) -> Answer {
    Arc::new(
        move |_| json!({"allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": message}}),
    )
}

/// Answers with a JSON patch adding the label `key=value`.
fn add_label(key: &'static str, value: &'static str) -> Answer {
    Arc::new(move |request| {
        let has_labels = request["object"]["metadata"]["labels"].is_object();
        let ops = if has_labels {
            json!([{"op": "add", "path": format!("/metadata/labels/{key}"), "value": value}])
        } else {
            json!([{"op": "add", "path": "/metadata/labels", "value": {key: value}}])
        };
        patching(&ops)
    })
}

/// An admitting response carrying the JSON patch `ops`, base64-encoded as
/// the review wants it: what every mutating hook here answers.
fn patching(ops: &Value) -> Value {
    json!({"allowed": true, "patchType": "JSONPatch",
        "patch": BASE64.encode(serde_json::to_vec(ops).unwrap())})
}

/// One webhook entry on configmaps in `url`'s hands.
fn webhook(name: &str, client_config: Value, extra: Value) -> Value {
    let mut hook = json!({"name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""],
            "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "clientConfig": client_config});
    for (k, v) in extra.as_object().into_iter().flatten() {
        hook[k] = v.clone();
    }
    hook
}

/// One webhook entry on configmaps that calls `url`, trusting `ca`.
fn url_hook(ca: &TestCa, name: &str, url: String, extra: Value) -> Value {
    webhook(name, url_config(ca, url), extra)
}

/// One webhook entry `<label>.example.com` on configmaps that calls `url`
/// (trusting `ca`) and sees only those labelled `hook=<label>`: how a
/// test keeps its several hooks out of each other's way.
fn labelled_hook(ca: &TestCa, label: &str, url: String, extra: Value) -> Value {
    let mut hook = url_hook(ca, &format!("{label}.example.com"), url, extra);
    hook["objectSelector"] = json!({"matchLabels": {"hook": label}});
    hook
}

/// `entry` with rules matching every operation on every resource and
/// subresource: the widest hook a test can configure.
fn on_every_request(mut entry: Value) -> Value {
    entry["rules"] = json!([{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
        "resources": ["*/*"]}]);
    entry
}

fn url_config(ca: &TestCa, url: String) -> Value {
    json!({"url": url, "caBundle": ca.bundle()})
}

async fn configure(server: &TestServer, kind: &str, name: &str, hooks: Vec<Value>) {
    let resource = match kind {
        "MutatingWebhookConfiguration" => "mutatingwebhookconfigurations",
        _ => "validatingwebhookconfigurations",
    };
    server
        .created(
            &format!("/apis/admissionregistration.k8s.io/v1/{resource}"),
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                "metadata": {"name": name}, "webhooks": hooks}),
        )
        .await;
}

/// A ValidatingWebhookConfiguration `name` of the one `hook`.
async fn validating(server: &TestServer, name: &str, hook: Value) {
    configure(server, "ValidatingWebhookConfiguration", name, vec![hook]).await;
}

/// A MutatingWebhookConfiguration `name` of the one `hook`.
async fn mutating(server: &TestServer, name: &str, hook: Value) {
    configure(server, "MutatingWebhookConfiguration", name, vec![hook]).await;
}

/// A webhook's extra fields: an object selector on the one label `key`.
fn selecting(key: &str, value: &str) -> Value {
    json!({"objectSelector": {"matchLabels": {key: value}}})
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// A loopback port nobody listens on (bound, then let go): where the
/// tests put a webhook that is down.
async fn closed_port() -> u16 {
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    closed.local_addr().unwrap().port()
}

/// POSTs configmap `name` with `labels` (which the hooks select on).
async fn post_configmap(server: &TestServer, name: &str, labels: Value) -> (StatusCode, Value) {
    server.post(CMS, configmap(name, labels)).await
}

/// Creates configmap `name` with `labels`, which must be admitted.
async fn create_configmap(server: &TestServer, name: &str, labels: Value) -> Value {
    server.created(CMS, configmap(name, labels)).await
}

#[tokio::test]
async fn configurations_get_defaults_validation_and_their_table() {
    let server = TestServer::new().await;
    let ca = TestCa::new();
    mutating(
        &server,
        "defaults",
        webhook(
            "m.example.com",
            json!({"service": {"namespace": "default", "name": "hooks"}, "caBundle": ca.bundle()}),
            json!({}),
        ),
    )
    .await;
    let (_, stored) = server
        .get("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/defaults")
        .await;
    let hook = &stored["webhooks"][0];
    assert_eq!(hook["failurePolicy"], "Fail");
    assert_eq!(hook["matchPolicy"], "Equivalent");
    assert_eq!(hook["timeoutSeconds"], 10);
    assert_eq!(hook["reinvocationPolicy"], "Never");
    assert_eq!(hook["namespaceSelector"], json!({}));
    assert_eq!(hook["objectSelector"], json!({}));
    assert_eq!(hook["rules"][0]["scope"], "*");
    assert_eq!(hook["clientConfig"]["service"]["port"], 443);

    let bad = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "bad"},
        "webhooks": [webhook("v.example.com", json!({"url": "http://127.0.0.1/x"}),
                json!({"timeoutSeconds": 31})),
            webhook("v.example.com", json!({"url": "https://127.0.0.1/x"}), json!({}))]});
    let body = server
        .post(
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            bad,
        )
        .await
        .expect_failure(422, "Invalid");
    assert_mentions(
        &body,
        &[
            "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
            "webhooks[0].clientConfig.url: Invalid value: \"http://127.0.0.1/x\": 'https' is the only allowed URL scheme",
            "webhooks[1].name: Duplicate value: \"v.example.com\"",
        ],
    );

    let table = server
        .get_table("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations")
        .await;
    assert_eq!(columns(&table), ["Name", "Webhooks", "Age"]);
    assert_eq!(table["rows"][0]["cells"][0], "defaults");
    assert_eq!(table["rows"][0]["cells"][1], 1);
}

#[tokio::test]
async fn a_validating_webhook_refuses_in_upstreams_words_and_selects_by_labels() {
    let server = TestServer::new().await;
    let ca = TestCa::new();
    let hook = Hook::local(&ca, deny("no configmaps here")).await;
    validating(
        &server,
        "deny",
        url_hook(
            &ca,
            "deny.example.com",
            hook.url("/validate"),
            selecting("guarded", "yes"),
        ),
    )
    .await;
    forbidden(
        post_configmap(&server, "refused", json!({"guarded": "yes"})).await,
        "admission webhook \"deny.example.com\" denied the request: no configmaps here",
    );
    let (code, _) = server.get(&format!("{CMS}/refused")).await;
    assert_eq!(
        code,
        StatusCode::NOT_FOUND,
        "a refused object is not stored"
    );

    // The object selector leaves other objects alone.
    create_configmap(&server, "free", json!({"guarded": "no"})).await;
    // Labelling it into the selector is refused on update (new labels),
    // as is its deletion once the stored object carries them.
    server
        .put(
            &format!("{CMS}/free"),
            configmap("free", json!({"guarded": "yes"})),
        )
        .await
        .expect_failure(403, "Forbidden");

    let requests = hook.requests();
    assert_eq!(requests.len(), 2, "only selected writes reach the webhook");
    // Nothing of the caller's credentials or the server's travels along.
    let headers = hook.headers.lock().clone();
    assert_eq!(headers.len(), 2);
    for names in headers.iter() {
        let mut names = names.clone();
        names.sort();
        assert_eq!(
            names,
            [
                "accept",
                "content-length",
                "content-type",
                "host",
                "user-agent"
            ]
        );
    }
    let create = &requests[0];
    assert_eq!(create["operation"], "CREATE");
    assert_eq!(
        create["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        create["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(create["requestKind"], create["kind"]);
    assert_eq!(create["name"], "refused");
    assert_eq!(create["namespace"], "default");
    assert_eq!(create["userInfo"]["username"], "test-admin");
    assert_eq!(create["dryRun"], false);
    assert_eq!(create["options"]["kind"], "CreateOptions");
    assert!(create["oldObject"].is_null());
    assert_eq!(create["object"]["data"]["k"], "v");
    let update = &requests[1];
    assert_eq!(update["operation"], "UPDATE");
    assert_eq!(update["oldObject"]["metadata"]["labels"]["guarded"], "no");
    assert_eq!(update["object"]["metadata"]["labels"]["guarded"], "yes");
}

#[tokio::test]
async fn a_mutating_webhook_patches_creates_and_updates_and_relays_warnings() {
    let server = TestServer::new().await;
    let ca = TestCa::new();
    let patch_and_warn: Answer = Arc::new(|request| {
        let mut response = add_label("mutated", "yes")(request);
        response["warnings"] = json!(["configmaps are watched"]);
        response["auditAnnotations"] = json!({"decision": "labelled"});
        response
    });
    let hook = Hook::local(&ca, patch_and_warn).await;
    mutating(
        &server,
        "label",
        url_hook(&ca, "label.example.com", hook.url("/mutate"), json!({})),
    )
    .await;
    let created = created_answer(&server, CMS, configmap("one", json!({"app": "a"}))).await;
    assert_eq!(created.warnings, ["configmaps are watched"]);
    assert!(
        created
            .annotations
            .contains(&("label.example.com/decision".into(), "labelled".into())),
        "{:?}",
        created.annotations
    );
    let (_, stored) = server.get(&format!("{CMS}/one")).await;
    assert_eq!(stored["metadata"]["labels"]["mutated"], "yes");
    assert_eq!(stored["metadata"]["labels"]["app"], "a");

    // An update that drops the label gets it back from the webhook.
    let updated = server
        .put_ok(&format!("{CMS}/one"), configmap("one", json!({"app": "b"})))
        .await;
    assert_eq!(
        updated["metadata"]["labels"],
        json!({"app": "b", "mutated": "yes"})
    );
    // A merge patch goes through the same step.
    let patched = server
        .merge_patch_ok(
            &format!("{CMS}/one"),
            json!({"metadata": {"labels": {"mutated": null, "app": "c"}}}),
        )
        .await;
    assert_eq!(
        patched["metadata"]["labels"],
        json!({"app": "c", "mutated": "yes"})
    );
    assert_eq!(hook.requests().len(), 3);
}

#[tokio::test]
async fn failures_fail_closed_or_open_by_policy() {
    let server = TestServer::new().await;
    let ca = TestCa::new();
    let slow = Hook::start(ca.serving(&["127.0.0.1"]), Duration::from_secs(5), allow()).await;
    let closed_port = closed_port().await;
    let down = format!("https://127.0.0.1:{closed_port}/x");
    configure(
        &server,
        "ValidatingWebhookConfiguration",
        "failing",
        vec![
            labelled_hook(&ca, "slow", slow.url("/slow"), json!({"timeoutSeconds": 1})),
            labelled_hook(
                &ca,
                "slow-ignored",
                slow.url("/slow"),
                json!({"timeoutSeconds": 1, "failurePolicy": "Ignore"}),
            ),
            labelled_hook(&ca, "down", down.clone(), json!({})),
            labelled_hook(
                &ca,
                "down-ignored",
                down,
                json!({"failurePolicy": "Ignore"}),
            ),
        ],
    )
    .await;
    let started = std::time::Instant::now();
    refused(
        post_configmap(&server, "slow", json!({"hook": "slow"})).await,
        500,
        "InternalError",
        &format!(
            "Internal error occurred: failed calling webhook \"slow.example.com\": failed to call webhook: Post \"https://127.0.0.1:{}/slow?timeout=1s\": context deadline exceeded",
            slow.port
        ),
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the timeout is enforced"
    );

    refused(
        post_configmap(&server, "down", json!({"hook": "down"})).await,
        500,
        "InternalError",
        &format!(
            "Internal error occurred: failed calling webhook \"down.example.com\": failed to call webhook: Post \"https://127.0.0.1:{closed_port}/x?timeout=10s\": dial tcp 127.0.0.1:{closed_port}: connect: connection refused"
        ),
    );

    for name in ["slow-ignored", "down-ignored"] {
        let (code, body) = server
            .post(CMS, configmap(name, json!({"hook": name})))
            .await;
        assert_eq!(code, StatusCode::CREATED, "{name}: {body}");
    }
}

#[tokio::test]
async fn dry_runs_reach_only_webhooks_without_side_effects() {
    let server = TestServer::new().await;
    let ca = TestCa::new();
    let hook = Hook::local(&ca, add_label("seen", "yes")).await;
    mutating(
        &server,
        "dry",
        labelled_hook(
            &ca,
            "dry",
            hook.url("/m"),
            json!({"sideEffects": "NoneOnDryRun"}),
        ),
    )
    .await;
    let body = server
        .created(
            &format!("{CMS}?dryRun=All"),
            configmap("dry", json!({"hook": "dry"})),
        )
        .await;
    assert_eq!(body["metadata"]["labels"]["seen"], "yes");
    assert_eq!(hook.requests()[0]["dryRun"], true);
    assert_eq!(hook.requests()[0]["options"]["dryRun"], json!(["All"]));
    server.get_not_found(&format!("{CMS}/dry")).await;

    // v1 no longer accepts a webhook with side effects; one stored before
    // (written here straight to the store) refuses dry runs.
    let legacy = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "legacy", "uid": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "webhooks": [labelled_hook(&ca, "effects", hook.url("/v"), json!({"sideEffects": "Some", "failurePolicy": "Fail", "matchPolicy": "Equivalent",
                "timeoutSeconds": 10, "namespaceSelector": {}}))]});
    use skiff_store::Store;
    server
        .store
        .create(
            "/registry/admissionregistration.k8s.io/validatingwebhookconfigurations/legacy",
            serde_json::to_vec(&legacy).unwrap().into(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    refused(
        server
            .post(
                &format!("{CMS}?dryRun=All"),
                configmap("effects", json!({"hook": "effects"})),
            )
            .await,
        400,
        "BadRequest",
        "admission webhook \"effects.example.com\" does not support dry run",
    );
    assert_eq!(
        hook.requests().len(),
        1,
        "the hook with side effects was not called"
    );
}

#[tokio::test]
async fn the_namespace_selector_reads_the_namespaces_labels() {
    let server = TestServer::new().await;
    let ca = TestCa::new();
    let hook = Hook::local(&ca, deny("guarded namespace")).await;
    for (name, labels) in [("labelled", json!({"webhooks": "on"})), ("open", json!({}))] {
        server
            .created("/api/v1/namespaces", labelled_namespace(name, labels))
            .await;
    }
    let mut entry = url_hook(
        &ca,
        "ns.example.com",
        hook.url("/v"),
        json!({"namespaceSelector": {"matchLabels": {"webhooks": "on"}}}),
    );
    entry["rules"][0]["resources"] = json!(["configmaps", "namespaces"]);
    validating(&server, "ns", entry).await;

    server
        .post(
            "/api/v1/namespaces/labelled/configmaps",
            configmap("c", json!({})),
        )
        .await
        .expect_failure(403, "Forbidden");
    server
        .created(
            "/api/v1/namespaces/open/configmaps",
            configmap("c", json!({})),
        )
        .await;
    // A Namespace itself is judged by its own (new) labels.
    server
        .post(
            "/api/v1/namespaces",
            labelled_namespace("new-labelled", json!({"webhooks": "on"})),
        )
        .await
        .expect_failure(403, "Forbidden");
    server
        .created(
            "/api/v1/namespaces",
            labelled_namespace("new-open", json!({})),
        )
        .await;
    let (code, _) = server
        .merge_patch(
            "/api/v1/namespaces/open",
            json!({"metadata": {"labels": {"webhooks": "on"}}}),
        )
        .await;
    assert_eq!(
        code,
        StatusCode::FORBIDDEN,
        "labelling a namespace into the selector"
    );
    let namespaces: Vec<String> = hook
        .requests()
        .iter()
        .map(|r| r["namespace"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(namespaces, ["labelled", "new-labelled", "open"]);
}

#[tokio::test]
async fn reinvocation_calls_an_if_needed_webhook_again_after_a_later_change() {
    let server = TestServer::new().await;
    let ca = TestCa::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let first: Answer = Arc::new(move |request| {
        counted.fetch_add(1, Ordering::SeqCst);
        // Sees the second webhook's label on its second call.
        if request["object"]["metadata"]["labels"]["second"] == "yes" {
            add_label("first-saw-second", "yes")(request)
        } else {
            json!({"allowed": true})
        }
    });
    let first_hook = Hook::local(&ca, first).await;
    let second_hook = Hook::local(&ca, add_label("second", "yes")).await;
    // Configurations are called in name order: a-first before b-second.
    mutating(
        &server,
        "b-second",
        url_hook(&ca, "second.example.com", second_hook.url("/m"), json!({})),
    )
    .await;
    mutating(
        &server,
        "a-first",
        url_hook(
            &ca,
            "first.example.com",
            first_hook.url("/m"),
            json!({"reinvocationPolicy": "IfNeeded"}),
        ),
    )
    .await;
    let body = create_configmap(&server, "r", json!({})).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(body["metadata"]["labels"]["second"], "yes");
    assert_eq!(body["metadata"]["labels"]["first-saw-second"], "yes");
    assert_eq!(second_hook.requests().len(), 1, "Never: called once");
}

#[tokio::test]
async fn a_service_reference_reaches_a_ready_endpoint_under_the_services_name() {
    let server = TestServer::new().await;
    let ca = TestCa::new();
    let hook = Hook::start(
        ca.serving(&["hooks.webhooks.svc"]),
        Duration::ZERO,
        add_label("via", "service"),
    )
    .await;
    server.namespace("webhooks").await;
    let endpoints = json!([{"addresses": ["127.0.0.2"], "conditions": {"ready": false}},
        {"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]);
    server
        .https_service("webhooks", "hooks", hook.port, endpoints)
        .await;
    mutating(
        &server,
        "svc",
        webhook(
            "svc.example.com",
            json!({"service": {"namespace": "webhooks", "name": "hooks", "path": "/mutate"},
                "caBundle": ca.bundle()}),
            json!({}),
        ),
    )
    .await;
    let body = create_configmap(&server, "s", json!({})).await;
    assert_eq!(body["metadata"]["labels"]["via"], "service");
}

#[tokio::test]
async fn a_webhook_that_cannot_prove_its_name_gets_nothing() {
    let server = TestServer::new().await;
    let ca = TestCa::new();
    let other_ca = TestCa::new();
    // Signed by a CA the configuration does not trust.
    let impostor = Hook::start(other_ca.serving(&["127.0.0.1"]), Duration::ZERO, allow()).await;
    // Trusted CA, but the certificate names another host.
    let misnamed = Hook::start(
        ca.serving(&["elsewhere.example.com"]),
        Duration::ZERO,
        allow(),
    )
    .await;
    configure(
        &server,
        "ValidatingWebhookConfiguration",
        "tls",
        vec![
            labelled_hook(&ca, "impostor", impostor.url("/v"), json!({})),
            labelled_hook(&ca, "misnamed", misnamed.url("/v"), json!({})),
        ],
    )
    .await;
    for name in ["impostor", "misnamed"] {
        server
            .post(CMS, configmap(name, json!({"hook": name})))
            .await
            .expect_mentions(
                500,
                "InternalError",
                &[
                    &format!("failed calling webhook \"{name}.example.com\""),
                    "tls: invalid peer certificate",
                ],
            );
    }
    assert!(impostor.requests().is_empty() && misnamed.requests().is_empty());
}

#[tokio::test]
async fn webhooks_cannot_rename_objects_or_patch_as_validators() {
    let server = TestServer::new().await;
    let ca = TestCa::new();
    let rename: Answer = Arc::new(|_| {
        patching(&json!([{"op": "replace", "path": "/metadata/name", "value": "other"}]))
    });
    let renamer = Hook::local(&ca, rename).await;
    let patcher = Hook::local(&ca, add_label("x", "y")).await;
    mutating(
        &server,
        "rename",
        labelled_hook(&ca, "rename", renamer.url("/m"), json!({})),
    )
    .await;
    validating(
        &server,
        "patching-validator",
        labelled_hook(&ca, "patcher", patcher.url("/v"), json!({})),
    )
    .await;
    refused(
        post_configmap(&server, "mine", json!({"hook": "rename"})).await,
        500,
        "InternalError",
        "Internal error occurred: admission webhook \"rename.example.com\" attempted to change the object's name, which is not allowed",
    );
    refused(
        post_configmap(&server, "v", json!({"hook": "patcher"})).await,
        500,
        "InternalError",
        "Internal error occurred: failed calling webhook \"patcher.example.com\": received invalid webhook response: unsupported fields in response: patch",
    );
    server.get_not_found(&format!("{CMS}/other")).await;
}

#[tokio::test]
async fn no_webhook_locks_the_administrator_out_of_the_configurations() {
    let server = TestServer::new().await;
    let ca = TestCa::new();
    let hook = Hook::local(&ca, deny("nothing passes")).await;
    let everything = on_every_request(url_hook(&ca, "all.example.com", hook.url("/v"), json!({})));
    configure(
        &server,
        "ValidatingWebhookConfiguration",
        "lockout",
        vec![everything],
    )
    .await;
    let (code, _) = post_configmap(&server, "blocked", json!({})).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "the hook does refuse");
    server
        .delete_ok("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/lockout")
        .await;
    create_configmap(&server, "free", json!({})).await;
    assert!(
        hook.requests()
            .iter()
            .all(|r| r["resource"]["group"] != "admissionregistration.k8s.io")
    );
}

#[tokio::test]
async fn deletes_and_scale_writes_are_reviewed_as_what_they_are() {
    let server = TestServer::new().await;
    let ca = TestCa::new();
    let hook = Hook::local(&ca, deny("kept as it is")).await;
    let mut entry = url_hook(&ca, "keep.example.com", hook.url("/v"), json!({}));
    entry["rules"] = json!([
        {"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]},
        {"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments/scale"]}]);
    create_configmap(&server, "kept", json!({})).await;
    server
        .created(
            "/apis/apps/v1/namespaces/default/deployments",
            deployment("web", 1),
        )
        .await;
    configure(
        &server,
        "ValidatingWebhookConfiguration",
        "keep",
        vec![entry],
    )
    .await;

    server
        .delete(&format!("{CMS}/kept"))
        .await
        .expect_failure(403, "Forbidden");
    server
        .merge_patch(
            "/apis/apps/v1/namespaces/default/deployments/web/scale",
            json!({"spec": {"replicas": 3}}),
        )
        .await
        .expect_failure(403, "Forbidden");
    // Scaling the deployment object itself is no scale write.
    server
        .merge_patch_ok(
            "/apis/apps/v1/namespaces/default/deployments/web",
            json!({"spec": {"replicas": 2}}),
        )
        .await;

    let requests = hook.requests();
    assert_eq!(requests.len(), 2);
    let delete = &requests[0];
    assert_eq!(delete["operation"], "DELETE");
    assert!(delete["object"].is_null());
    assert_eq!(delete["oldObject"]["metadata"]["name"], "kept");
    assert_eq!(delete["options"]["kind"], "DeleteOptions");
    let scale = &requests[1];
    assert_eq!(scale["subResource"], "scale");
    assert_eq!(
        scale["kind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    assert_eq!(scale["object"]["kind"], "Scale");
    assert_eq!(scale["object"]["spec"]["replicas"], 3);
    assert_eq!(scale["oldObject"]["spec"]["replicas"], 1);
}

#[tokio::test]
async fn match_policy_equivalent_sends_the_version_the_rule_names() {
    let server = TestServer::new().await;
    let ca = TestCa::new();
    let equivalent = Hook::local(&ca, allow()).await;
    let exact = Hook::local(&ca, allow()).await;
    let rules = json!([{"operations": ["CREATE"], "apiGroups": ["events.k8s.io"],
        "apiVersions": ["v1"], "resources": ["events"]}]);
    let mut equivalent_entry = url_hook(
        &ca,
        "equivalent.example.com",
        equivalent.url("/v"),
        json!({}),
    );
    equivalent_entry["rules"] = rules.clone();
    let mut exact_entry = url_hook(
        &ca,
        "exact.example.com",
        exact.url("/v"),
        json!({"matchPolicy": "Exact"}),
    );
    exact_entry["rules"] = rules;
    configure(
        &server,
        "ValidatingWebhookConfiguration",
        "events",
        vec![equivalent_entry, exact_entry],
    )
    .await;
    // A core/v1 Event is the same stored resource as events.k8s.io/v1's.
    server
        .created(
            "/api/v1/namespaces/default/events",
            json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
                "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
                "reason": "Tested", "message": "hello", "type": "Normal"}),
        )
        .await;
    assert!(
        exact.requests().is_empty(),
        "Exact does not match another version"
    );
    let requests = equivalent.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(
        request["kind"],
        json!({"group": "events.k8s.io", "version": "v1", "kind": "Event"})
    );
    assert_eq!(
        request["requestKind"],
        json!({"group": "", "version": "v1", "kind": "Event"})
    );
    assert_eq!(
        request["resource"],
        json!({"group": "events.k8s.io", "version": "v1", "resource": "events"})
    );
    assert_eq!(request["object"]["apiVersion"], "events.k8s.io/v1");
    assert_eq!(request["object"]["note"], "hello");
    assert_eq!(request["object"]["regarding"]["name"], "p");
}

#[tokio::test]
async fn a_webhook_that_is_down_does_not_keep_the_server_from_starting() {
    let disk = KeptStore::new();
    let ca = TestCa::new();
    let down = format!("https://127.0.0.1:{}/x", closed_port().await);
    {
        let s = disk.start().await;
        for kind in [
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ] {
            let entry =
                on_every_request(url_hook(&ca, "down.example.com", down.clone(), json!({})));
            configure(&s, kind, "down", vec![entry]).await;
        }
        // Every write is refused now, a delete of a default binding too.
        s.delete(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:public-info-viewer",
        )
        .await
        .expect_code(StatusCode::INTERNAL_SERVER_ERROR);
        s.stop().await;
    }
    let s = disk.start().await;
    s.post(CMS, configmap("after", json!({})))
        .await
        .expect_mentions(
            500,
            "InternalError",
            &["failed calling webhook \"down.example.com\""],
        );
}
