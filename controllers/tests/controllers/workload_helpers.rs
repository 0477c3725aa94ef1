//! Helpers the workload controller tests share: pod templates, creating and
//! reading workloads and their conditions, listing a controller's pods,
//! playing the node (pod status patches) and waiting for events.

use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::serde::Serialize;
use k8s_openapi::serde::de::DeserializeOwned;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use super::support::eventually;

/// How long a controller gets to react in these tests.
pub const WAIT: Duration = Duration::from_secs(20);

/// What the workload helpers take: a namespaced object kube can write and
/// decode (a Deployment, Job, StatefulSet ...).
pub trait Workload:
    Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + DeserializeOwned
    + Serialize
    + std::fmt::Debug
{
}
impl<K> Workload for K where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug
{
}

/// A pod template with `labels` and one container running `image`.
pub fn template(labels: Value, image: &str) -> Value {
    json!({
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "main", "image": image}]}
    })
}

/// Creates workload `name` in `default` from `spec`, with the test's
/// `extra` fields laid over it (replacing those of the same name).
pub async fn create_workload<K: Workload>(
    client: &Client,
    name: &str,
    mut spec: Value,
    extra: Value,
) -> K {
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    let object: K =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
    Api::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &object)
        .await
        .unwrap()
}

/// Pods in `ns` whose controller owner has `uid`, sorted by name.
pub async fn pods_owned_by(client: &Client, ns: &str, uid: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut pods: Vec<Pod> = api
        .list(&ListParams::default())
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(|p| {
            p.owner_references()
                .iter()
                .any(|r| r.uid == uid && r.controller == Some(true))
        })
        .collect();
    pods.sort_by_key(|p| p.name_any());
    pods
}

/// Every pod in `ns`, sorted by name.
pub async fn all_pods(client: &Client, ns: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut pods = api
        .list(&ListParams::default())
        .await
        .expect("list pods")
        .items;
    pods.sort_by_key(|p| p.name_any());
    pods
}

/// Plays the node: sets the pod's phase and Ready condition.
pub async fn set_pod_status(client: &Client, ns: &str, name: &str, phase: &str, ready: bool) {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let ready_str = if ready { "True" } else { "False" };
    let patch = json!({"status": {
        "phase": phase,
        "conditions": [
            {"type": "Ready", "status": ready_str, "lastTransitionTime": now},
            {"type": "ContainersReady", "status": ready_str, "lastTransitionTime": now},
        ],
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patch pod status");
}

/// True when the pod's Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Plays the node for `pods`: marks each one that is not ready yet and not
/// being deleted Running and Ready. Returns how many it marked.
pub async fn make_all_ready(client: &Client, pods: &[Pod]) -> usize {
    let mut marked = 0;
    for pod in pods {
        if !is_ready(pod) && pod.metadata.deletion_timestamp.is_none() {
            make_ready(client, "default", &pod.name_any()).await;
            marked += 1;
        }
    }
    marked
}

/// The workload `name` in `default`, as the API has it now.
pub async fn get_workload<K: Workload>(client: &Client, name: &str) -> K {
    Api::<K>::namespaced(client.clone(), "default")
        .get(name)
        .await
        .unwrap()
}

/// The status and reason of the workload's condition `type_`, read from
/// its JSON form so one reader serves Deployments, Jobs and the rest.
pub fn condition<K: Serialize>(workload: &K, type_: &str) -> Option<(String, String)> {
    let value = serde_json::to_value(workload).ok()?;
    let found = value["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?;
    let reason = found["reason"].as_str().unwrap_or_default();
    Some((found["status"].as_str()?.to_owned(), reason.to_owned()))
}

/// Waits until the condition `type_` of the workload `name` in `default`
/// has `status` and `reason` (which also name the wait when it times out);
/// returns the workload as it was then.
pub async fn wait_for_condition<K: Workload>(
    client: &Client,
    name: &str,
    type_: &str,
    (status, reason): (&str, &str),
) -> K {
    let expected = Some((status.to_owned(), reason.to_owned()));
    let what = format!("{name}'s {type_} condition at {status} ({reason})");
    eventually(WAIT, &what, || async {
        let workload: K = get_workload(client, name).await;
        (condition(&workload, type_) == expected).then_some(workload)
    })
    .await
}

/// Waits until the events about the object `name` in `default` give every
/// one of `reasons` (which also name the wait when it times out).
pub async fn wait_for_events(client: &Client, name: &str, reasons: &[&str]) {
    let what = format!("events {reasons:?} about {name}");
    eventually(WAIT, &what, || async {
        let seen = event_reasons(client, "default", name).await;
        reasons
            .iter()
            .all(|r| seen.iter().any(|s| s == r))
            .then_some(())
    })
    .await;
}

/// Marks the pod Running and Ready.
pub async fn make_ready(client: &Client, ns: &str, name: &str) {
    set_pod_status(client, ns, name, "Running", true).await;
}

/// Reasons of the events.k8s.io/v1 events about the object named `name`.
pub async fn event_reasons(client: &Client, ns: &str, name: &str) -> Vec<String> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    api.list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| e.reason)
        .collect()
}

/// Asserts that `event` is of `type_` (Normal or Warning) and says `note`:
/// what a user reads of it in `kubectl describe`.
#[track_caller]
pub fn assert_event(event: &k8s_openapi::api::events::v1::Event, type_: &str, note: &str) {
    assert_eq!(event.type_.as_deref(), Some(type_), "{event:?}");
    assert_eq!(event.note.as_deref(), Some(note), "{event:?}");
}

/// Waits for the events.k8s.io/v1 event with `reason` about the object named
/// `name` in `default`, and returns it: for checking its type and note.
pub async fn event_about(
    client: &Client,
    name: &str,
    reason: &str,
) -> k8s_openapi::api::events::v1::Event {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), "default");
    eventually(WAIT, &format!("a {reason} event about {name}"), || async {
        api.list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                    && e.reason.as_deref() == Some(reason)
            })
    })
    .await
}
