//! The API-facing traits implemented over a `kube::Client` (in-process or HTTPS):
//! `pods/binding` for binds, `pods/status` patches for the `PodScheduled` condition and
//! `nominatedNodeName`, core/v1 Events (`Scheduled`, `FailedScheduling`, `Preempted`),
//! and graceful deletes of preemption victims. Events are written in the background.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};

use crate::binding::{
    ApiError, Binder, ClaimAnnotator, Outcome, Preemptor, SELECTED_NODE_ANNOTATION, StatusReporter,
    full_name,
};
use skiff_common::events::{EventRecorder, EventType, object_reference};

/// Scheduler writes through a kube client.
pub(crate) struct KubeApi {
    client: kube::Client,
    /// Reports as the event source component (upstream: the profile's
    /// scheduler name).
    events: EventRecorder,
}

impl KubeApi {
    /// Writes through `client`, reporting events as `component`. Inside a Tokio runtime,
    /// events are written in the background (see [`EventRecorder`]).
    pub(crate) fn new(client: kube::Client, component: impl Into<String>) -> Self {
        let component = component.into();
        KubeApi {
            events: EventRecorder::core(client.clone(), &component, None),
            client,
        }
    }

    #[cfg(test)]
    /// Waits until the events recorded so far are written.
    pub(crate) async fn flush_events(&self) {
        self.events.flush().await;
    }

    fn pods(&self, pod: &Pod) -> Api<Pod> {
        Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        )
    }

    /// Strategic-merges `status` into the pod's status subresource: the one way the
    /// scheduler writes a pod's condition and nominated node.
    async fn patch_status(&self, pod: &Pod, status: serde_json::Value) -> Result<(), ApiError> {
        self.pods(pod)
            .patch_status(
                pod.metadata.name.as_deref().unwrap_or(""),
                &PatchParams::default(),
                &Patch::Strategic(serde_json::json!({ "status": status })),
            )
            .await
            .map(|_| ())
            .map_err(map_err)
    }

    async fn event(
        &self,
        pod: &Pod,
        type_: &str,
        reason: &str,
        action: &str,
        message: &str,
    ) -> Result<(), ApiError> {
        let kind = match type_ {
            "Warning" => EventType::Warning,
            _ => EventType::Normal,
        };
        self.events
            .record(&object_reference(pod), kind, reason, action, message);
        Ok(())
    }
}

fn map_err(e: kube::Error) -> ApiError {
    match &e {
        kube::Error::Api(status) if status.code == 404 || status.code == 409 => {
            ApiError::Conflict(e.to_string())
        }
        _ => ApiError::Other(e.to_string()),
    }
}

#[async_trait]
impl Binder for KubeApi {
    async fn bind(&self, pod: &Pod, node: &str) -> Result<(), ApiError> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: pod.metadata.namespace.clone(),
                uid: pod.metadata.uid.clone(),
                ..Default::default()
            },
            target: ObjectReference {
                kind: Some("Node".into()),
                name: Some(node.into()),
                ..Default::default()
            },
        };
        self.pods(pod)
            .create_subresource::<Binding, serde_json::Value>(
                "binding",
                &name,
                &PostParams::default(),
                &binding,
            )
            .await
            .map(|_| ())
            .map_err(map_err)
    }
}

#[async_trait]
impl StatusReporter for KubeApi {
    async fn report(&self, pod: &Pod, outcome: &Outcome) -> Result<(), ApiError> {
        match outcome {
            // The binding subresource sets PodScheduled=True; only the event is ours.
            Outcome::Scheduled { node } => {
                let msg = format!("Successfully assigned {} to {node}", full_name(pod));
                self.event(pod, "Normal", "Scheduled", "Binding", &msg)
                    .await
            }
            Outcome::Failed {
                reason,
                message,
                nominated_node,
            } => {
                let mut status = serde_json::json!({
                    "conditions": [{
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": reason,
                        "message": message,
                        "lastProbeTime": null,
                        "lastTransitionTime": Timestamp::now().to_string(),
                    }]
                });
                if let Some(n) = nominated_node {
                    status["nominatedNodeName"] = serde_json::Value::String(n.clone());
                }
                self.patch_status(pod, status).await?;
                self.event(pod, "Warning", "FailedScheduling", "Scheduling", message)
                    .await
            }
        }
    }
}

#[async_trait]
impl Preemptor for KubeApi {
    async fn delete_victim(&self, victim: &Pod, preemptor: &Pod) -> Result<(), ApiError> {
        let node = victim
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let msg = format!(
            "Preempted by pod {} on node {node}",
            preemptor.metadata.uid.as_deref().unwrap_or("")
        );
        self.event(victim, "Normal", "Preempted", "Preempting", &msg)
            .await?;
        let dp = DeleteParams {
            preconditions: victim.metadata.uid.clone().map(|uid| Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        self.pods(victim)
            .delete(victim.metadata.name.as_deref().unwrap_or(""), &dp)
            .await
            .map(|_| ())
            .map_err(map_err)
    }

    async fn clear_nomination(&self, pod: &Pod) -> Result<(), ApiError> {
        self.patch_status(pod, serde_json::json!({ "nominatedNodeName": null }))
            .await
    }
}

#[async_trait]
impl ClaimAnnotator for KubeApi {
    async fn select_node(&self, namespace: &str, claim: &str, node: &str) -> Result<(), ApiError> {
        let patch = serde_json::json!({ "metadata": { "annotations": { SELECTED_NODE_ANNOTATION: node } } });
        Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), namespace)
            .patch(claim, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(|_| ())
            .map_err(map_err)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http::{Request, Response};
    use kube::client::Body;
    use parking_lot::Mutex;

    use super::*;
    use crate::testing::PodBuilder;

    type Seen = Arc<Mutex<Vec<(String, String, serde_json::Value)>>>;

    /// A client whose "API server" records each request and answers with `status`.
    fn client(status: u16) -> (kube::Client, Seen) {
        let seen: Seen = Arc::default();
        let rec = seen.clone();
        let svc = tower::service_fn(move |req: Request<Body>| {
            let rec = rec.clone();
            async move {
                let (parts, body) = req.into_parts();
                let bytes = body.collect_bytes().await.unwrap_or_default();
                let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
                let path = parts.uri.path().to_string();
                rec.lock()
                    .push((parts.method.to_string(), path.clone(), json));
                let body = if status < 300 && path.ends_with("/events") {
                    // Created objects echo back.
                    String::from_utf8_lossy(&bytes).into_owned()
                } else if status < 300 && path.contains("/persistentvolumeclaims/") {
                    r#"{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data","namespace":"default"}}"#.to_string()
                } else if status < 300 {
                    r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"}}"#.to_string()
                } else {
                    format!(
                        r#"{{"apiVersion":"v1","kind":"Status","status":"Failure","message":"nope","reason":"Conflict","code":{status}}}"#
                    )
                };
                Ok::<_, std::convert::Infallible>(
                    Response::builder()
                        .status(status)
                        .body(Body::from(body.into_bytes()))
                        .unwrap(),
                )
            }
        });
        (kube::Client::new(svc, "default"), seen)
    }

    #[tokio::test]
    async fn bind_posts_the_binding_subresource() {
        let (c, seen) = client(201);
        let api = KubeApi::new(c, "default-scheduler");
        api.bind(&PodBuilder::new("p").build(), "n1").await.unwrap();
        let seen = seen.lock();
        assert_eq!(seen[0].0, "POST");
        assert_eq!(seen[0].1, "/api/v1/namespaces/default/pods/p/binding");
        assert_eq!(seen[0].2["target"]["name"], "n1");
        assert_eq!(seen[0].2["target"]["kind"], "Node");
        assert_eq!(seen[0].2["metadata"]["uid"], "uid-p");
    }

    #[tokio::test]
    async fn bind_conflict_maps_to_conflict() {
        let (c, _) = client(409);
        let err = KubeApi::new(c, "default-scheduler")
            .bind(&PodBuilder::new("p").build(), "n1")
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::Conflict(_)), "{err:?}");
    }

    #[tokio::test]
    async fn failure_patches_condition_and_records_event() {
        let (c, seen) = client(200);
        let api = KubeApi::new(c, "default-scheduler");
        let outcome = Outcome::Failed {
            reason: "Unschedulable".into(),
            message: "0/1 nodes are available: 1 Insufficient cpu.".into(),
            nominated_node: Some("n1".into()),
        };
        api.report(&PodBuilder::new("p").build(), &outcome)
            .await
            .unwrap();
        api.flush_events().await;
        let seen = seen.lock();
        assert_eq!(
            (seen[0].0.as_str(), seen[0].1.as_str()),
            ("PATCH", "/api/v1/namespaces/default/pods/p/status")
        );
        let cond = &seen[0].2["status"]["conditions"][0];
        assert_eq!(
            (cond["type"].as_str(), cond["status"].as_str()),
            (Some("PodScheduled"), Some("False"))
        );
        assert_eq!(cond["reason"], "Unschedulable");
        assert_eq!(seen[0].2["status"]["nominatedNodeName"], "n1");
        assert_eq!(
            (seen[1].0.as_str(), seen[1].1.as_str()),
            ("POST", "/api/v1/namespaces/default/events")
        );
        assert_eq!(seen[1].2["reason"], "FailedScheduling");
        assert_eq!(seen[1].2["type"], "Warning");
        assert_eq!(
            seen[1].2["message"],
            "0/1 nodes are available: 1 Insufficient cpu."
        );
        assert_eq!(seen[1].2["involvedObject"]["name"], "p");
    }

    #[tokio::test]
    async fn selected_node_annotation_is_a_merge_patch() {
        let (c, seen) = client(200);
        KubeApi::new(c, "default-scheduler")
            .select_node("default", "data", "n1")
            .await
            .unwrap();
        let seen = seen.lock();
        assert_eq!(
            (seen[0].0.as_str(), seen[0].1.as_str()),
            (
                "PATCH",
                "/api/v1/namespaces/default/persistentvolumeclaims/data"
            )
        );
        assert_eq!(
            seen[0].2["metadata"]["annotations"]["volume.kubernetes.io/selected-node"],
            "n1"
        );
    }

    #[tokio::test]
    async fn scheduled_event_and_victim_deletion() {
        let (c, seen) = client(200);
        let api = KubeApi::new(c, "default-scheduler");
        api.report(
            &PodBuilder::new("p").build(),
            &Outcome::Scheduled { node: "n1".into() },
        )
        .await
        .unwrap();
        api.flush_events().await;
        let victim = PodBuilder::new("v").node("n1").build();
        api.delete_victim(&victim, &PodBuilder::new("p").build())
            .await
            .unwrap();
        api.flush_events().await;
        let seen = seen.lock();
        // The Preempted event is written in the background, so it may land after the
        // delete; both are there.
        let mut seen: Vec<_> = seen.iter().cloned().collect();
        if seen[1].0 == "DELETE" {
            seen.swap(1, 2);
        }
        assert_eq!(seen[0].2["reason"], "Scheduled");
        assert_eq!(
            seen[0].2["message"],
            "Successfully assigned default/p to n1"
        );
        assert_eq!(seen[1].2["reason"], "Preempted");
        assert_eq!(seen[1].2["message"], "Preempted by pod uid-p on node n1");
        assert_eq!(
            (seen[2].0.as_str(), seen[2].1.as_str()),
            ("DELETE", "/api/v1/namespaces/default/pods/v")
        );
        assert_eq!(seen[2].2["preconditions"]["uid"], "uid-v");
    }
}
