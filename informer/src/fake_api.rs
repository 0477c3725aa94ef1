//! A scripted stand-in for an API server, served to a real `kube::Client` as a
//! tower service (no socket): lists and watches answer from queues of canned
//! JSON bodies, and every request path is recorded. Paths containing `/leases`
//! are served from a small object store instead (get, create, replace with
//! resourceVersion conflicts), enough for leader election.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::client::Body;
use parking_lot::Mutex;
use serde_json::{Value, json};

#[derive(Clone, Default)]
pub(crate) struct FakeApi {
    requests: Arc<Mutex<Vec<String>>>,
    lists: Arc<Mutex<VecDeque<String>>>,
    watches: Arc<Mutex<VecDeque<String>>>,
    objects: Arc<Mutex<HashMap<String, Value>>>,
    next_rv: Arc<Mutex<u64>>,
    objects_unavailable: Arc<std::sync::atomic::AtomicBool>,
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

    /// The stored object at `path`, if any.
    pub(crate) fn object(&self, path: &str) -> Option<Value> {
        self.objects.lock().get(path).cloned()
    }

    /// Overwrites the stored object at `path` as another writer would.
    pub(crate) fn overwrite(&self, path: &str, edit: impl FnOnce(&mut Value)) {
        let rv = self.bump();
        let mut objects = self.objects.lock();
        if let Some(obj) = objects.get_mut(path) {
            edit(obj);
            obj["metadata"]["resourceVersion"] = json!(rv);
        }
    }

    /// Makes every object request fail with 503 (an unreachable store).
    pub(crate) fn set_objects_unavailable(&self, unavailable: bool) {
        self.objects_unavailable
            .store(unavailable, std::sync::atomic::Ordering::SeqCst);
    }

    /// Serves get / create / replace of single objects with optimistic concurrency.
    fn object_request(&self, method: &http::Method, path: &str, body: &[u8]) -> (u16, String) {
        if self
            .objects_unavailable
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return (503, status(503, "ServiceUnavailable"));
        }
        let mut objects = self.objects.lock();
        let sent: Option<Value> = serde_json::from_slice(body).ok();
        match *method {
            http::Method::GET => match objects.get(path) {
                Some(obj) => (200, obj.to_string()),
                None => (404, status(404, "NotFound")),
            },
            http::Method::POST => {
                let Some(mut obj) = sent else {
                    return (400, status(400, "BadRequest"));
                };
                let name = obj["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let key = format!("{path}/{name}");
                if objects.contains_key(&key) {
                    return (409, status(409, "AlreadyExists"));
                }
                obj["metadata"]["resourceVersion"] = json!(self.bump());
                objects.insert(key, obj.clone());
                (201, obj.to_string())
            }
            http::Method::PUT => {
                let Some(mut obj) = sent else {
                    return (400, status(400, "BadRequest"));
                };
                let Some(stored) = objects.get(path) else {
                    return (404, status(404, "NotFound"));
                };
                if obj["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"] {
                    return (409, status(409, "Conflict"));
                }
                obj["metadata"]["resourceVersion"] = json!(self.bump());
                objects.insert(path.to_owned(), obj.clone());
                (200, obj.to_string())
            }
            _ => (405, status(405, "MethodNotAllowed")),
        }
    }

    fn bump(&self) -> String {
        let mut rv = self.next_rv.lock();
        *rv += 1;
        rv.to_string()
    }

    pub(crate) fn client(&self) -> Client {
        let fake = self.clone();
        let service = tower::service_fn(move |req: http::Request<Body>| {
            let fake = fake.clone();
            async move {
                let uri = req.uri().to_string();
                fake.requests.lock().push(uri.clone());
                if uri.contains("/leases") {
                    let method = req.method().clone();
                    let path = req.uri().path().to_owned();
                    let bytes = req.into_body().collect_bytes().await.unwrap_or_default();
                    let (code, body) = fake.object_request(&method, &path, &bytes);
                    return Ok::<_, Infallible>(
                        http::Response::builder()
                            .status(code)
                            .header("content-type", "application/json")
                            .body(Body::from(body.into_bytes()))
                            .unwrap(),
                    );
                }
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

/// A failure Status as the API sends it, the reason doubling as the message.
fn status(code: u16, reason: &str) -> String {
    failure(code, reason, reason).to_string()
}

/// The body of a failure Status: what an erroring request answers, and what a
/// watch sends as an ERROR event.
fn failure(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
}

/// A ConfigMap as the API would send it.
pub(crate) fn config_map(namespace: &str, name: &str, resource_version: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"namespace": namespace, "name": name, "resourceVersion": resource_version},
    })
}

/// [`config_map`] in namespace `ns`, typed as watcher events carry it to an
/// informer (the cases that feed events without the fake API).
pub(crate) fn cm(name: &str, resource_version: impl std::fmt::Display) -> ConfigMap {
    serde_json::from_value(config_map("ns", name, &resource_version.to_string()))
        .expect("a ConfigMap")
}

/// A pod `ns/name`, on `node` when given, with `labels` (the cases that need no API).
pub(crate) fn pod(ns: &str, name: &str, node: Option<&str>, labels: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            labels: Some(skiff_common::labels::from_pairs(labels)),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: node.map(str::to_owned),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A node `name` and nothing else: a cluster-scoped object.
pub(crate) fn node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The Status a watch sends when its resourceVersion is too old.
pub(crate) fn gone() -> Value {
    failure(410, "Expired", "too old resource version")
}
