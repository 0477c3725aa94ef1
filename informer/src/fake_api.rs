//! A scripted stand-in for an API server, served to a real `kube::Client` as a
//! tower service (no socket): lists and watches answer from queues of canned
//! JSON bodies, and every request path is recorded.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use kube::Client;
use kube::client::Body;
use parking_lot::Mutex;
use serde_json::{Value, json};

#[derive(Clone, Default)]
pub(crate) struct FakeApi {
    requests: Arc<Mutex<Vec<String>>>,
    lists: Arc<Mutex<VecDeque<String>>>,
    watches: Arc<Mutex<VecDeque<String>>>,
}

impl FakeApi {
    /// Queues a list response; the last one queued is repeated for later lists.
    pub(crate) fn push_list(&self, kind: &str, resource_version: &str, items: Vec<Value>) {
        let body = json!({
            "apiVersion": "v1",
            "kind": format!("{kind}List"),
            "metadata": {"resourceVersion": resource_version},
            "items": items,
        });
        self.lists.lock().push_back(body.to_string());
    }

    /// Queues one watch response made of `events` (type, object); the watch ends
    /// after them. When no response is queued, a watch never answers.
    pub(crate) fn push_watch(&self, events: Vec<(&str, Value)>) {
        let body: String = events
            .into_iter()
            .map(|(kind, object)| format!("{}\n", json!({"type": kind, "object": object})))
            .collect();
        self.watches.lock().push_back(body);
    }

    /// Request paths with queries, in arrival order.
    pub(crate) fn requests(&self) -> Vec<String> {
        self.requests.lock().clone()
    }

    pub(crate) fn client(&self) -> Client {
        let fake = self.clone();
        let service = tower::service_fn(move |req: http::Request<Body>| {
            let fake = fake.clone();
            async move {
                let uri = req.uri().to_string();
                fake.requests.lock().push(uri.clone());
                let body = if uri.contains("watch=true") {
                    let next = fake.watches.lock().pop_front();
                    match next {
                        Some(body) => body,
                        None => std::future::pending::<String>().await,
                    }
                } else {
                    let mut lists = fake.lists.lock();
                    if lists.len() > 1 {
                        lists.pop_front().unwrap_or_default()
                    } else {
                        lists.front().cloned().unwrap_or_default()
                    }
                };
                Ok::<_, Infallible>(
                    http::Response::builder()
                        .status(200)
                        .header("content-type", "application/json")
                        .body(Body::from(body.into_bytes()))
                        .unwrap(),
                )
            }
        });
        Client::new(service, "default")
    }
}

/// A ConfigMap as the API would send it.
pub(crate) fn config_map(namespace: &str, name: &str, resource_version: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"namespace": namespace, "name": name, "resourceVersion": resource_version},
    })
}

/// The Status a watch sends when its resourceVersion is too old.
pub(crate) fn gone() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "message": "too old resource version",
        "reason": "Expired",
        "code": 410,
    })
}
