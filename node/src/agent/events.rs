//! Pod events the agent reports (FailedMount, Failed image pulls...), as the
//! kubelet does: one Event object per pod, reason and message, whose count
//! grows when the same problem happens again.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use std::sync::Mutex;

/// Upstream's event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Things going as they should.
    Normal,
    /// Something the user should look at.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// (pod uid, reason, message): what makes two occurrences the same event.
type EventKey = (String, String, String);

/// Records pod events under the `kubelet` component of one node.
pub struct EventRecorder {
    client: kube::Client,
    node_name: String,
    /// Each event recorded → (its name, count).
    seen: Mutex<HashMap<EventKey, (String, i32)>>,
}

impl EventRecorder {
    /// A recorder writing through `client` as the agent of `node_name`.
    pub fn new(client: kube::Client, node_name: impl Into<String>) -> Self {
        Self {
            client,
            node_name: node_name.into(),
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Records `reason`/`message` about `pod`; failures to write are logged
    /// only (events are best effort, as upstream).
    pub async fn record(&self, pod: &Pod, kind: EventType, reason: &str, message: &str) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let key = (uid.clone(), reason.to_string(), message.to_string());
        let previous = self
            .seen
            .lock()
            .ok()
            .and_then(|seen| seen.get(&key).cloned());
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let result = match previous {
            Some((name, count)) => {
                let patch = serde_json::json!({"count": count + 1, "lastTimestamp": now});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| (name, count + 1))
            }
            None => {
                let pod_name = pod.metadata.name.clone().unwrap_or_default();
                let event = Event {
                    metadata: ObjectMeta {
                        generate_name: Some(format!("{pod_name}.")),
                        namespace: Some(namespace.clone()),
                        ..Default::default()
                    },
                    involved_object: ObjectReference {
                        api_version: Some("v1".into()),
                        kind: Some("Pod".into()),
                        name: Some(pod_name),
                        namespace: Some(namespace.clone()),
                        uid: Some(uid.clone()),
                        resource_version: pod.metadata.resource_version.clone(),
                        ..Default::default()
                    },
                    reason: Some(reason.to_string()),
                    message: Some(message.to_string()),
                    type_: Some(kind.as_str().to_string()),
                    count: Some(1),
                    first_timestamp: Some(now.clone()),
                    last_timestamp: Some(now),
                    source: Some(EventSource {
                        component: Some("kubelet".into()),
                        host: Some(self.node_name.clone()),
                    }),
                    reporting_component: Some("kubelet".into()),
                    reporting_instance: Some(self.node_name.clone()),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &event)
                    .await
                    .map(|e| (e.metadata.name.unwrap_or_default(), 1))
            }
        };
        match result {
            Ok(entry) => {
                if let Ok(mut seen) = self.seen.lock() {
                    seen.insert(key, entry);
                }
            }
            Err(error) => {
                // A reaped or deleted event is created afresh next time.
                if let Ok(mut seen) = self.seen.lock() {
                    seen.remove(&key);
                }
                tracing::debug!(%error, reason, "recording a pod event failed");
            }
        }
    }

    /// Forgets what was recorded about a pod that is gone.
    pub fn forget(&self, uid: &str) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.retain(|(u, _, _), _| u != uid);
        }
    }
}
