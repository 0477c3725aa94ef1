//! A router over a fresh in-memory store, and helpers to call it.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, BodyDataStream};
use futures::StreamExt;
use http::{Method, Request, StatusCode};
use serde_json::Value;
use skiff_apiserver::authn::UserInfo;
use skiff_apiserver::{ApiServer, ApiServerConfig};
use tower::ServiceExt;

use skiff_store::{SledConfig, SledStore, Store};

/// The server's router with every request made as a cluster admin (as
/// the HTTPS listener would attach an authenticated identity).
pub fn admin_router(server: &ApiServer) -> Router {
    server.router().layer(axum::Extension(UserInfo::new(
        "test-admin",
        ["system:masters".to_string()],
    )))
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
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SledStore::open(SledConfig::new(dir.path().join("store"))).unwrap());
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

    /// Sends a request with a JSON body (or none); returns code and JSON body
    /// (`Value::String` when the body is not JSON).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let bytes = body
            .map(|b| serde_json::to_vec(&b).unwrap())
            .unwrap_or_default();
        self.raw(method, path, "application/json", bytes).await
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
        let body = body
            .map(|b| serde_json::to_vec(&b).unwrap())
            .unwrap_or_default();
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .header(http::header::ACCEPT, accept)
            .body(Body::from(body))
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let code = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (code, String::from_utf8(bytes.to_vec()).unwrap())
    }

    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> (StatusCode, Value) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .header("user-agent", "skiff-tests/v0")
            .body(Body::from(body))
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let code = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (code, value)
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
        let bytes = body
            .map(|b| serde_json::to_vec(&b).unwrap())
            .unwrap_or_default();
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .header("user-agent", "skiff-tests/v0");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let mut request = builder.body(Body::from(bytes)).unwrap();
        request.extensions_mut().insert(user.clone());
        let response = self.server.router().oneshot(request).await.unwrap();
        let code = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (code, value)
    }

    /// POSTs `body` as `user`.
    pub async fn post_as(&self, user: &UserInfo, path: &str, body: Value) -> (StatusCode, Value) {
        self.call_with_headers(user, Method::POST, path, Some(body), &[])
            .await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::PUT, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::DELETE, path, None).await
    }

    pub async fn patch(&self, path: &str, content_type: &str, body: Value) -> (StatusCode, Value) {
        self.raw(
            Method::PATCH,
            path,
            content_type,
            serde_json::to_vec(&body).unwrap(),
        )
        .await
    }

    /// Starts a watch (path includes `watch=1`).
    pub async fn watch(&self, path: &str) -> WatchReader {
        self.watch_accepting(path, "application/json").await
    }

    /// Starts a watch whose events are one-row Tables (`kubectl get -w`).
    pub async fn watch_tables(&self, path: &str) -> WatchReader {
        self.watch_accepting(path, "application/json;as=Table;v=v1;g=meta.k8s.io")
            .await
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

    /// Creates a configmap `name` in `ns` with labels; returns it.
    pub async fn configmap(&self, ns: &str, name: &str, labels: Value) -> Value {
        let (code, body) = self
            .post(
                &format!("/api/v1/namespaces/{ns}/configmaps"),
                serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}),
            )
            .await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
        body
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

/// The names of a list's items, in order.
pub fn item_names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// A `Status` body's message.
pub fn message_of(body: &Value) -> &str {
    body["message"].as_str().unwrap()
}

/// Asserts a Status failure with code and reason.
pub fn assert_status(code: StatusCode, body: &Value, want_code: u16, want_reason: &str) {
    assert_eq!(code.as_u16(), want_code, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["status"], "Failure", "{body}");
    assert_eq!(body["code"], want_code, "{body}");
    assert_eq!(body["reason"], want_reason, "{body}");
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
