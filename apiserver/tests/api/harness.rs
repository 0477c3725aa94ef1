//! A router over a fresh in-memory store, and helpers to call it.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, BodyDataStream};
use futures::StreamExt;
use http::{HeaderMap, Method, Request, StatusCode};
use serde_json::Value;
use skiff_apiserver::authn::UserInfo;
use skiff_apiserver::request_notes::AuditAnnotations;
use skiff_apiserver::tls::ClusterCerts;
use skiff_apiserver::{ApiServer, ApiServerConfig, ApiServerError};
use tower::ServiceExt;

use skiff_store::{SledConfig, SledStore, Store};

/// The `Accept` header that asks for a Table, as `kubectl get` does.
pub const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// The headers of a request presenting `token` as a bearer token, for
/// checks that hand them to an `Authenticator` directly.
pub fn bearer(token: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        http::header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    h
}

/// The server's router with every request made as a cluster admin (as
/// the HTTPS listener would attach an authenticated identity).
pub fn admin_router(server: &ApiServer) -> Router {
    server.router().layer(axum::Extension(UserInfo::new(
        "test-admin",
        ["system:masters".to_string()],
    )))
}

/// Requests under one identity: the admin's (a [`TestServer`]) or
/// another user's (a [`Caller`]). Each names the server and the user its
/// requests go out as; the verbs the tests send are written once.
pub trait Client {
    /// The server the requests go to, and the user they are made as
    /// (none: the admin, through the server's admin router).
    fn identity(&self) -> (&TestServer, Option<&UserInfo>);

    /// Sends `body` as `content_type`; returns code and JSON body
    /// (`Value::String` when the body is not JSON).
    async fn raw(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> (StatusCode, Value) {
        match self.identity() {
            (server, None) => {
                let request = request(method, path, content_type, &[AGENT], body);
                answer(server.router.clone().oneshot(request).await.unwrap()).await
            }
            (server, Some(user)) => {
                server
                    .send_as(user, method, path, content_type, &[], body)
                    .await
            }
        }
    }

    /// Sends a request with a JSON body (or none); returns code and JSON body.
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        self.raw(method, path, "application/json", json_bytes(body))
            .await
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, Some(body)).await
    }

    async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::PUT, path, Some(body)).await
    }

    async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::DELETE, path, None).await
    }

    async fn patch(&self, path: &str, content_type: &str, body: Value) -> (StatusCode, Value) {
        self.raw(Method::PATCH, path, content_type, json_bytes(Some(body)))
            .await
    }

    /// A JSON merge patch, the patch type most tests send.
    async fn merge_patch(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.patch(path, "application/merge-patch+json", body).await
    }

    /// A server-side apply of the YAML manifest `yaml` to `path`.
    async fn apply_yaml(&self, path: &str, yaml: &str) -> (StatusCode, Value) {
        let bytes = yaml.as_bytes().to_vec();
        self.raw(Method::PATCH, path, "application/apply-patch+yaml", bytes)
            .await
    }
}

/// The admin's requests.
impl Client for TestServer {
    fn identity(&self) -> (&TestServer, Option<&UserInfo>) {
        (self, None)
    }
}

pub struct TestServer {
    pub server: ApiServer,
    pub router: Router,
    pub store: Arc<SledStore>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    pub async fn new() -> Self {
        Self::with_config(ApiServerConfig::default()).await
    }

    pub async fn with_config(config: ApiServerConfig) -> Self {
        Self::in_dir(tempfile::tempdir().unwrap(), config).await
    }

    /// A server configured as by default but for what `configure` sets:
    /// the one setting a case is about.
    pub async fn configured(configure: impl FnOnce(&mut ApiServerConfig)) -> Self {
        let mut config = ApiServerConfig::default();
        configure(&mut config);
        Self::with_config(config).await
    }

    /// A server whose configuration `configure` makes from the cluster's
    /// certificates (its client to kubelets, to extension servers), created
    /// in the server's own directory; gives the certificates too, to sign
    /// the fakes' certificates or trust the server's clients.
    pub async fn with_certs(
        configure: impl FnOnce(&ClusterCerts) -> ApiServerConfig,
    ) -> (Self, ClusterCerts) {
        let dir = tempfile::tempdir().unwrap();
        let certs = ClusterCerts::load_or_create(dir.path(), &["localhost".to_string()]).unwrap();
        let config = configure(&certs);
        (Self::in_dir(dir, config).await, certs)
    }

    async fn in_dir(dir: tempfile::TempDir, config: ApiServerConfig) -> Self {
        let store = store_in(dir.path());
        let server = ApiServer::new(store.clone(), config).await.unwrap();
        let router = admin_router(&server);
        Self {
            server,
            router,
            store,
            _dir: dir,
        }
    }

    /// A server over `store`, whose directory the caller keeps (restarts).
    pub fn wrap(server: ApiServer, store: Arc<SledStore>) -> Self {
        let router = admin_router(&server);
        Self {
            server,
            router,
            store,
            _dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Every key stored under /registry/ (for "nothing was stored" checks).
    pub async fn keys(&self) -> Vec<String> {
        let listed = self.store.list("/registry/", None, 0).await.unwrap();
        listed.items.into_iter().map(|kv| kv.key).collect()
    }

    /// Sends a request and returns the response's code and exact bytes.
    pub async fn bytes(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, String) {
        self.bytes_accepting(method, path, "application/json", body)
            .await
    }

    /// As `bytes`, asking for the response as `accept` says (e.g. a Table).
    pub async fn bytes_accepting(
        &self,
        method: Method,
        path: &str,
        accept: &str,
        body: Option<Value>,
    ) -> (StatusCode, String) {
        let headers = [("accept", accept)];
        let request = request(method, path, "application/json", &headers, json_bytes(body));
        let response = self.router.clone().oneshot(request).await.unwrap();
        let code = response.status();
        let bytes = body_bytes(response).await;
        (code, String::from_utf8(bytes).unwrap())
    }

    /// Sends a JSON request as `user` (as the HTTPS listener would attach
    /// the identity it authenticated); returns code and JSON body.
    pub async fn call_as(
        &self,
        user: &UserInfo,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        self.call_with_headers(user, method, path, body, &[]).await
    }

    /// Sends a JSON request as `user` (as the HTTPS listener would attach
    /// that identity), with extra headers (e.g. `Impersonate-User`).
    pub async fn call_with_headers(
        &self,
        user: &UserInfo,
        method: Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> (StatusCode, Value) {
        self.send_as(
            user,
            method,
            path,
            "application/json",
            headers,
            json_bytes(body),
        )
        .await
    }

    /// Sends `body` as `content_type` as `user`, with extra headers: the
    /// one way a request goes out under an identity other than the admin.
    async fn send_as(
        &self,
        user: &UserInfo,
        method: Method,
        path: &str,
        content_type: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> (StatusCode, Value) {
        let headers = [&[AGENT], headers].concat();
        let mut request = request(method, path, content_type, &headers, body);
        request.extensions_mut().insert(user.clone());
        answer(self.server.router().oneshot(request).await.unwrap()).await
    }

    /// GETs `path` as `user`.
    pub async fn get_as(&self, user: &UserInfo, path: &str) -> (StatusCode, Value) {
        self.call_as(user, Method::GET, path, None).await
    }

    /// POSTs `body` as `user`.
    pub async fn post_as(&self, user: &UserInfo, path: &str, body: Value) -> (StatusCode, Value) {
        self.call_with_headers(user, Method::POST, path, Some(body), &[])
            .await
    }

    /// Starts a watch (path includes `watch=1`).
    pub async fn watch(&self, path: &str) -> WatchReader {
        self.watch_accepting(path, "application/json").await
    }

    /// Starts a watch whose events are one-row Tables (`kubectl get -w`).
    pub async fn watch_tables(&self, path: &str) -> WatchReader {
        self.watch_accepting(path, TABLE).await
    }

    /// GETs `path` as a Table (`kubectl get`), which must answer 200.
    pub async fn get_table(&self, path: &str) -> Value {
        let (code, body) = self.bytes_accepting(Method::GET, path, TABLE, None).await;
        assert_eq!(code, StatusCode::OK, "GET {path} as a Table: {body}");
        serde_json::from_str(&body).unwrap()
    }

    async fn watch_accepting(&self, path: &str, accept: &str) -> WatchReader {
        let request = Request::builder()
            .method(Method::GET)
            .uri(path)
            .header(http::header::ACCEPT, accept)
            .body(Body::empty())
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "watch {path}");
        WatchReader {
            stream: response.into_body().into_data_stream(),
            buffer: Vec::new(),
        }
    }

    /// POSTs `body` and returns what was created: most tests create their
    /// fixtures this way, and a refusal should fail with the server's reason.
    pub async fn created(&self, path: &str, body: Value) -> Value {
        answered(
            &format!("POST {path}"),
            self.post(path, body).await,
            StatusCode::CREATED,
        )
    }

    /// GETs `path`, which must answer 200, and returns the body (the read
    /// most tests make before checking fields).
    pub async fn get_ok(&self, path: &str) -> Value {
        answered(&format!("GET {path}"), self.get(path).await, StatusCode::OK)
    }

    /// GETs `path` every 50 ms until it answers 200 with a body `check`
    /// accepts, and returns that body (failing after 20 s): the wait for
    /// what a controller or a scrape fills in.
    pub async fn get_until(&self, path: &str, check: impl Fn(&Value) -> bool) -> Value {
        eventually(
            Duration::from_secs(20),
            Duration::from_millis(50),
            || async {
                match self.get(path).await {
                    (StatusCode::OK, body) if check(&body) => Ok(body),
                    (code, body) => Err(format!("{path}: still {code}: {body}")),
                }
            },
        )
        .await
    }

    /// The names of the items `path` lists (which must answer 200), in order.
    pub async fn list_names(&self, path: &str) -> Vec<String> {
        item_names(&self.get_ok(path).await)
    }

    /// GETs `path`, which must answer a NotFound Status (404), as upstream
    /// does for any object, resource or group it does not have: the check
    /// that something is gone.
    pub async fn get_not_found(&self, path: &str) -> Value {
        let body = answered(
            &format!("GET {path}"),
            self.get(path).await,
            StatusCode::NOT_FOUND,
        );
        assert_status(StatusCode::NOT_FOUND, &body, 404, "NotFound");
        body
    }

    /// PUTs `body`, which must answer 200; returns the stored object.
    pub async fn put_ok(&self, path: &str, body: Value) -> Value {
        answered(
            &format!("PUT {path}"),
            self.put(path, body).await,
            StatusCode::OK,
        )
    }

    /// DELETEs `path`, which must answer 200; returns the answer's body.
    pub async fn delete_ok(&self, path: &str) -> Value {
        answered(
            &format!("DELETE {path}"),
            self.delete(path).await,
            StatusCode::OK,
        )
    }

    /// A JSON merge patch that must answer 200; returns the patched object.
    pub async fn merge_patch_ok(&self, path: &str, body: Value) -> Value {
        answered(
            &format!("PATCH {path}"),
            self.merge_patch(path, body).await,
            StatusCode::OK,
        )
    }

    /// Creates namespace `name` (tests that need one of their own).
    pub async fn namespace(&self, name: &str) -> Value {
        self.created(
            "/api/v1/namespaces",
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )
        .await
    }

    /// Creates Service `name` in `ns` (port 443, `https`, to `port`) and
    /// its one EndpointSlice, holding `endpoints` on `port`: how a test puts
    /// its own HTTPS server (a webhook, an extension API server) behind a
    /// Service the server resolves.
    pub async fn https_service(&self, ns: &str, name: &str, port: u16, endpoints: Value) {
        self.created(
            &format!("/api/v1/namespaces/{ns}/services"),
            serde_json::json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}}),
        )
        .await;
        self.created(
            &format!("/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"),
            serde_json::json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": format!("{name}-1"),
                    "labels": {"kubernetes.io/service-name": name}},
                "addressType": "IPv4",
                "endpoints": endpoints,
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}),
        )
        .await;
    }

    /// Binds the user `user` to the ClusterRole `role` cluster-wide (a
    /// binding named `<user>-<role>`), as tests grant what they need.
    pub async fn grant(&self, user: &str, role: &str) -> Value {
        self.created(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            serde_json::json!({"metadata": {"name": format!("{user}-{role}")},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]}),
        )
        .await
    }

    /// Requests made as `user` rather than the admin, one line a call.
    pub fn as_user(&self, user: UserInfo) -> Caller<'_> {
        Caller { server: self, user }
    }

    /// Creates a configmap `name` in `ns` with labels; returns it.
    pub async fn configmap(&self, ns: &str, name: &str, labels: Value) -> Value {
        let path = format!("/api/v1/namespaces/{ns}/configmaps");
        self.created(&path, configmap(name, labels)).await
    }
}

/// A response's code and JSON body (`Value::String` when the body is not
/// JSON), read the same way for every identity a request is sent as.
async fn answer(response: axum::response::Response) -> (StatusCode, Value) {
    let code = response.status();
    let bytes = body_bytes(response).await;
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (code, value)
}

/// What a request got back, with what admission says beside the body: the
/// form the admission tests (Pod Security, policies) read answers in.
pub struct Answer {
    pub code: StatusCode,
    /// `Null` when the body is not JSON.
    pub body: Value,
    /// The `Warning: 299 - "<text>"` headers' texts, unescaped.
    pub warnings: Vec<String>,
    /// The audit annotations admission attached to the response.
    pub annotations: Vec<(String, String)>,
}

impl Answer {
    /// Asserts a Status failure with code and reason (see [`assert_status`]).
    #[track_caller]
    pub fn assert_status(&self, want_code: u16, want_reason: &str) {
        assert_status(self.code, &self.body, want_code, want_reason);
    }

    /// Asserts a Status failure and its exact message (see
    /// [`assert_refused`]).
    #[track_caller]
    pub fn assert_refused(&self, want_code: u16, want_reason: &str, want_message: &str) {
        assert_refused(self.code, &self.body, want_code, want_reason, want_message);
    }
}

/// Sends `request` through `router` and reads the whole answer.
pub async fn answer_of(router: Router, request: Request<Body>) -> Answer {
    let response = router.oneshot(request).await.unwrap();
    let annotations = response
        .extensions()
        .get::<AuditAnnotations>()
        .map(|a| a.0.clone())
        .unwrap_or_default();
    let (code, headers, body) = read_response(response).await;
    let warnings = headers
        .get_all("warning")
        .iter()
        .map(|v| {
            let raw = v.to_str().unwrap();
            let quoted = raw.strip_prefix("299 - ").expect("299 warning");
            serde_json::from_str::<String>(quoted).expect("quoted warning text")
        })
        .collect();
    Answer {
        code,
        body,
        warnings,
        annotations,
    }
}

/// Sends a JSON request as the admin and reads the whole answer, the
/// warnings and audit annotations admission adds included.
pub async fn send_answer(
    ts: &TestServer,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Answer {
    let request = json_request(method, path, "application/json", body);
    answer_of(ts.router.clone(), request).await
}

/// POSTs `body` as the admin and reads the whole answer: the object an
/// admission test tries.
pub async fn post_answer(ts: &TestServer, path: &str, body: Value) -> Answer {
    send_answer(ts, Method::POST, path, Some(body)).await
}

/// PUTs `body` as the admin and reads the whole answer: the update an
/// admission test tries.
pub async fn put_answer(ts: &TestServer, path: &str, body: Value) -> Answer {
    send_answer(ts, Method::PUT, path, Some(body)).await
}

/// POSTs `body` as the admin, which must be created (warnings aside),
/// and reads the whole answer.
pub async fn created_answer(ts: &TestServer, path: &str, body: Value) -> Answer {
    let created = post_answer(ts, path, body).await;
    assert_eq!(created.code, StatusCode::CREATED, "{}", created.body);
    created
}

/// A request with `content_type` and a JSON body (or none), for the tests
/// that build their own (to attach an identity, or read headers back).
pub fn json_request(
    method: Method,
    path: &str,
    content_type: &str,
    body: Option<Value>,
) -> Request<Body> {
    request(method, path, content_type, &[], json_bytes(body))
}

/// The user agent the server's own calls carry (their managedFields
/// manager is `skiff-tests`).
const AGENT: (&str, &str) = ("user-agent", "skiff-tests/v0");

/// A request with `content_type`, the extra `headers` and `body`: the
/// one builder behind every way the tests send one.
fn request(
    method: Method,
    path: &str,
    content_type: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Request<Body> {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Body::from(body)).unwrap()
}

/// A JSON body's bytes (none: empty).
fn json_bytes(body: Option<Value>) -> Vec<u8> {
    body.map(|b| serde_json::to_vec(&b).unwrap())
        .unwrap_or_default()
}

/// A response's whole body.
async fn body_bytes(response: axum::response::Response) -> Vec<u8> {
    axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap()
        .to_vec()
}

/// Sends `request` through `router`: code, headers and JSON body (`Null`
/// when the body is not JSON), for tests that check headers too.
pub async fn exchange(router: Router, request: Request<Body>) -> (StatusCode, HeaderMap, Value) {
    read_response(router.oneshot(request).await.unwrap()).await
}

/// A response's code, headers and JSON body (`Null` when not JSON).
async fn read_response(response: axum::response::Response) -> (StatusCode, HeaderMap, Value) {
    let (code, headers, bytes) = read_bytes(response).await;
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (code, headers, body)
}

/// A response's code, headers and exact body bytes.
async fn read_bytes(response: axum::response::Response) -> (StatusCode, HeaderMap, Vec<u8>) {
    let code = response.status();
    let headers = response.headers().clone();
    (code, headers, body_bytes(response).await)
}

/// GETs `path` as the admin with extra headers: code, headers and the
/// exact bytes, for documents checked as served (OpenAPI, discovery,
/// metrics) rather than as JSON.
pub async fn fetch(
    ts: &TestServer,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, HeaderMap, Vec<u8>) {
    let request = request(Method::GET, path, "application/json", headers, Vec::new());
    read_bytes(ts.router.clone().oneshot(request).await.unwrap()).await
}

/// A `TestServer` seen from one non-admin identity, so tests of what a
/// user may do read as one call per request.
pub struct Caller<'a> {
    server: &'a TestServer,
    user: UserInfo,
}

/// This caller's requests, as the HTTPS listener would pass them on
/// after authenticating its user.
impl Client for Caller<'_> {
    fn identity(&self) -> (&TestServer, Option<&UserInfo>) {
        (self.server, Some(&self.user))
    }
}

/// Asserts an answer's code, naming the request and showing the body in the
/// failure message: the check behind `created`, `get_ok` and the like.
fn answered(request: &str, (code, body): (StatusCode, Value), want: StatusCode) -> Value {
    assert_eq!(code, want, "{request}: {body}");
    body
}

/// Checks on a call's `(code, body)` chained onto the call itself, in place
/// of `let (code, body) = ...;` followed by the same assertions in every test.
pub trait Expect: Sized {
    /// The body as the call read it (JSON, or the exact text).
    type Body: std::fmt::Display;

    /// The call's code and body, for the checks below.
    fn into_parts(self) -> (StatusCode, Self::Body);

    /// Asserts the code (the body in the failure message); gives the body.
    #[track_caller]
    fn expect_code(self, want: StatusCode) -> Self::Body {
        let (code, body) = self.into_parts();
        assert_eq!(code, want, "{body}");
        body
    }

    /// Asserts a Status failure with code and reason; gives the Status.
    #[track_caller]
    fn expect_failure(self, want_code: u16, want_reason: &str) -> Value
    where
        Self: Expect<Body = Value>,
    {
        let (code, body) = self.into_parts();
        assert_status(code, &body, want_code, want_reason);
        body
    }

    /// Asserts a Status failure with code and reason whose message
    /// mentions each of `parts`; gives the Status. The check of most
    /// refusals whose exact words are not the point.
    #[track_caller]
    fn expect_mentions(self, want_code: u16, want_reason: &str, parts: &[&str]) -> Value
    where
        Self: Expect<Body = Value>,
    {
        let body = self.expect_failure(want_code, want_reason);
        assert_mentions(&body, parts);
        body
    }
}

impl Expect for (StatusCode, Value) {
    type Body = Value;

    fn into_parts(self) -> (StatusCode, Value) {
        self
    }
}

impl Expect for (StatusCode, String) {
    type Body = String;

    fn into_parts(self) -> (StatusCode, String) {
        self
    }
}

/// Polls `probe` every `every` until it gives `Ok`, failing with its last
/// `Err` after `within`: the one deadline loop for what a test waits for.
pub async fn eventually<T, F, Fut>(within: Duration, every: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match probe().await {
            Ok(done) => return done,
            Err(why) => assert!(tokio::time::Instant::now() < deadline, "{why}"),
        }
        tokio::time::sleep(every).await;
    }
}

/// Reads newline-delimited watch events from a streaming body.
pub struct WatchReader {
    stream: BodyDataStream,
    buffer: Vec<u8>,
}

impl WatchReader {
    /// The next event, or `None` when the stream ended; panics after 5 s.
    pub async fn next(&mut self) -> Option<Value> {
        self.next_within(Duration::from_secs(5))
            .await
            .expect("no watch event within 5s")
    }

    /// The next event within `wait`: `Err(())` on timeout, `Ok(None)` at the end.
    pub async fn next_within(&mut self, wait: Duration) -> Result<Option<Value>, ()> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(pos) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=pos).collect();
                return Ok(Some(serde_json::from_slice(&line).unwrap()));
            }
            match tokio::time::timeout_at(deadline, self.stream.next()).await {
                Err(_) => return Err(()),
                Ok(None) => return Ok(None),
                Ok(Some(chunk)) => self.buffer.extend_from_slice(&chunk.unwrap()),
            }
        }
    }

    /// (type, name) of the next event.
    pub async fn next_summary(&mut self) -> (String, String) {
        let e = self.next().await.expect("watch ended");
        (
            e["type"].as_str().unwrap().to_string(),
            e["object"]["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        )
    }
}

/// A store in a directory of its own that outlives the servers on it, for
/// tests of what a restart keeps, repairs or refuses.
pub struct KeptStore {
    dir: tempfile::TempDir,
}

impl KeptStore {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A server with the default configuration on the store (once the
    /// previous server has let go of it).
    pub async fn start(&self) -> TestServer {
        let store = open_store(self.dir.path().join("store")).await;
        let server = ApiServer::new(store.clone(), ApiServerConfig::default())
            .await
            .expect("the server starts on the kept store");
        TestServer::wrap(server, store)
    }
}

/// A Namespace `name` with `labels`, which admission (Pod Security,
/// webhooks' and policies' namespace selectors) reads.
pub fn labelled_namespace(name: &str, labels: Value) -> Value {
    serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels}})
}

/// A ConfigMap `name` with `labels` and the one datum `k: v`: what
/// `TestServer::configmap` creates, for tests that send it themselves.
pub fn configmap(name: &str, labels: Value) -> Value {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

/// A one-container Pod `name`, bound to `node` if given: the pod most
/// tests create (to bind, evict, delete, select by node).
pub fn pod(name: &str, node: Option<&str>) -> Value {
    let mut spec = serde_json::json!({"containers": [{"name": "c", "image": "i"}]});
    if let Some(node) = node {
        spec["nodeName"] = serde_json::json!(node);
    }
    serde_json::json!({"metadata": {"name": name}, "spec": spec})
}

/// A Deployment `name` of `replicas` busybox pods labelled `app=<name>`:
/// the workload fixture of the tests that need any deployment at all.
pub fn deployment(name: &str, replicas: i64) -> Value {
    serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
}

/// A fresh store in `dir`/store, for a server whose directory holds more
/// (a policy file, a log, keys) or outlives it.
pub fn store_in(dir: &std::path::Path) -> Arc<SledStore> {
    Arc::new(SledStore::open(SledConfig::new(dir.join("store"))).unwrap())
}

/// The error a server on a fresh store refuses to start with under
/// `config` (a configuration or policy file it cannot read).
pub async fn start_error(config: ApiServerConfig) -> ApiServerError {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    start_error_on(store, config).await
}

/// The error a server on `store` refuses to start with under `config`.
pub async fn start_error_on(store: Arc<SledStore>, config: ApiServerConfig) -> ApiServerError {
    match ApiServer::new(store, config).await {
        Ok(_) => panic!("the server started"),
        Err(err) => err,
    }
}

impl TestServer {
    /// Shuts the server down and closes its store, as a stopped process
    /// would leave it.
    pub async fn stop(self) {
        self.server.shutdown();
        let store = self.store.clone();
        drop(self);
        store.close().await.unwrap();
    }
}

/// The `field` of every element of the JSON array `array` (names of
/// columns, resources, causes), in order.
pub fn strings<'a>(array: &'a Value, field: &str) -> Vec<&'a str> {
    array
        .as_array()
        .unwrap()
        .iter()
        .map(|element| element[field].as_str().unwrap())
        .collect()
}

/// The element of the JSON array `array` that `matches`, which must be
/// there (`what` names it when it is not): the lookup in discovery
/// documents, conditions and lists that many tests make.
#[track_caller]
pub fn find_in<'a>(array: &'a Value, matches: impl Fn(&Value) -> bool, what: &str) -> &'a Value {
    array
        .as_array()
        .unwrap()
        .iter()
        .find(|element| matches(element))
        .unwrap_or_else(|| panic!("{what} not in {array}"))
}

/// A Table's column names, in order.
pub fn columns(table: &Value) -> Vec<&str> {
    strings(&table["columnDefinitions"], "name")
}

/// The cells of the Table row whose first cell is `name`, which must be
/// there.
#[track_caller]
pub fn row<'a>(table: &'a Value, name: &str) -> &'a Value {
    &find_in(
        &table["rows"],
        |r| r["cells"][0] == name,
        &format!("row {name}"),
    )["cells"]
}

/// The element of the JSON array `array` whose `key` is `value`, which
/// must be there: a condition by type, a resource or group by name.
#[track_caller]
pub fn find_by<'a>(array: &'a Value, key: &str, value: &str) -> &'a Value {
    find_in(array, |element| element[key] == value, value)
}

/// The names of a list's items, in order.
pub fn item_names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// Asserts `now` is at `before`'s resourceVersion: the check that a
/// write which changed nothing, or only ran dry, stored no new revision.
#[track_caller]
pub fn assert_same_version(now: &Value, before: &Value) {
    assert_eq!(
        now["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
}

/// A `Status` body's message.
pub fn message_of(body: &Value) -> &str {
    body["message"].as_str().unwrap()
}

/// Asserts a Status body's message contains each of `parts` (the body in
/// the failure message): for refusals listing several causes, or whose
/// exact words are not the point.
#[track_caller]
pub fn assert_mentions(body: &Value, parts: &[&str]) {
    let message = message_of(body);
    for part in parts {
        assert!(message.contains(part), "no {part:?} in {body}");
    }
}

/// Asserts a Status failure with code and reason.
#[track_caller]
pub fn assert_status(code: StatusCode, body: &Value, want_code: u16, want_reason: &str) {
    assert_eq!(code.as_u16(), want_code, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["status"], "Failure", "{body}");
    assert_eq!(body["code"], want_code, "{body}");
    assert_eq!(body["reason"], want_reason, "{body}");
}

/// Asserts a Status failure and its exact message: most refusals a test
/// checks must also say what was refused in upstream's words.
#[track_caller]
pub fn assert_refused(
    code: StatusCode,
    body: &Value,
    want_code: u16,
    want_reason: &str,
    want_message: &str,
) {
    assert_status(code, body, want_code, want_reason);
    assert_eq!(body["message"], want_message, "{body}");
}

/// A call's `(code, body)` that must be a Status failure with this code,
/// reason and exact message; gives the Status. A function rather than an
/// `Expect` method: the messages are long, and rustfmt cannot lay out a
/// chain whose last link does not fit a line.
#[track_caller]
pub fn refused(
    (code, body): (StatusCode, Value),
    want_code: u16,
    want_reason: &str,
    want_message: &str,
) -> Value {
    assert_refused(code, &body, want_code, want_reason, want_message);
    body
}

/// Checks that `answer` is upstream's 403 `Forbidden` with `message` (an
/// authorizer's, an admission plugin's or a quota's refusal); gives the
/// Status.
#[track_caller]
pub fn forbidden(answer: (StatusCode, Value), message: &str) -> Value {
    refused(answer, 403, "Forbidden", message)
}

/// Opens the store at `path`, waiting (up to ten seconds) for a previous
/// opening's database lock: after a restart's shutdown, the old server's
/// background tasks let go of the store shortly after, not at once — and
/// only if the runtime gets to run them, so the wait yields to it.
pub async fn open_store(path: std::path::PathBuf) -> Arc<SledStore> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match SledStore::open(SledConfig::new(&path)) {
            Ok(store) => return Arc::new(store),
            Err(e)
                if format!("{e:?}").contains("WouldBlock")
                    && std::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("opening the store at {}: {e:?}", path.display()),
        }
    }
}
