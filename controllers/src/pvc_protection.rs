//! Upstream's `pvc-protection` controller: a claim keeps its
//! `kubernetes.io/pvc-protection` finalizer while a pod uses it, so deleting
//! a claim a running pod mounts leaves it Terminating, its volume and data
//! in place, until the pod is gone. Claims made before the API server added
//! the finalizer get it here.
//!
//! A pod uses a claim when it is scheduled, not finished (Succeeded or
//! Failed: its containers are stopped), and names the claim in a
//! `persistentVolumeClaim` volume or owns it through an `ephemeral` one
//! (`<pod>-<volume>`). Before it lets a claim go the controller asks the
//! API server for the namespace's pods, as its cache may not hold a pod
//! created a moment ago. It acts as `pvc-protection-controller`, which may
//! read pods and update claims.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use skiff_informer::{Action, Cache, HandlerFns, ObjectKey};

use crate::controller_utils::{done_or_gone, write_finalizers};
use crate::manager::{Context, Reconciler, Stop, keyed_by, run_until_stopped};

use skiff_common::claims::PROTECTION_FINALIZER as FINALIZER;

/// Why a claim's finalizer could not be changed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProtectionError {
    /// Listing the namespace's pods failed.
    #[error("listing the pods of namespace {namespace}: {source}")]
    ListPods {
        /// The claim's namespace.
        namespace: String,
        /// The API's error.
        #[source]
        source: kube::Error,
    },
    /// The claim's update failed (a conflict is retried).
    #[error("updating the finalizers of claim {claim}: {source}")]
    Update {
        /// namespace/name.
        claim: String,
        /// The API's error.
        #[source]
        source: kube::Error,
    },
}

struct Protector {
    client: kube::Client,
    claims: Arc<Cache<PersistentVolumeClaim>>,
    pods: Arc<Cache<Pod>>,
}

/// Runs the controller until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    let claims = ctx.factory.informer::<PersistentVolumeClaim>();
    let pods = ctx.factory.informer::<Pod>();
    let protector = Arc::new(Protector {
        client: ctx.client.clone(),
        claims: claims.cache().clone(),
        pods: pods.cache().clone(),
    });
    let controller = keyed_by("pvc-protection", &claims);
    // A pod that ends or goes may be what a deleted claim waits for.
    let queue = controller.queue().clone();
    let wake = move |pod: &Arc<Pod>| {
        let namespace = pod.namespace().unwrap_or_default();
        for claim in claims_of(pod) {
            queue.add(ObjectKey::new(Some(&namespace), &claim));
        }
    };
    let on_update = wake.clone();
    let pod_handler = HandlerFns::new()
        .on_update(move |_, pod: &Arc<Pod>| on_update(pod))
        .on_delete(move |pod: &Arc<Pod>| wake(pod));
    let controller = controller.watch(&pods, pod_handler);
    run_until_stopped(controller, protector, stop).await;
}

/// The claims `pod` names: its `persistentVolumeClaim` volumes' and the
/// ones its `ephemeral` volumes own.
fn claims_of(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .map(|spec| skiff_common::claims::claim_names(&pod.name_any(), spec))
        .unwrap_or_default()
}

/// Whether `pod` holds claim `name` (its namespace's) now.
fn uses(pod: &Pod, name: &str) -> bool {
    let scheduled = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let finished = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed");
    scheduled && !finished && claims_of(pod).iter().any(|c| c == name)
}

impl Protector {
    /// Whether a pod uses the claim: the cache first, then, before the
    /// claim is let go, the API server.
    async fn in_use(&self, namespace: &str, name: &str) -> Result<bool, ProtectionError> {
        let cached = self.pods.list_namespace(namespace);
        if cached.iter().any(|pod| uses(pod, name)) {
            return Ok(true);
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let live =
            api.list(&ListParams::default())
                .await
                .map_err(|source| ProtectionError::ListPods {
                    namespace: namespace.to_string(),
                    source,
                })?;
        Ok(live.items.iter().any(|pod| uses(pod, name)))
    }

    /// Writes `finalizers` to the claim, guarded by the version judged.
    async fn set_finalizers(
        &self,
        claim: &PersistentVolumeClaim,
        finalizers: Vec<String>,
    ) -> Result<Action, ProtectionError> {
        let namespace = claim.namespace().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &namespace);
        let written = write_finalizers(&api, claim, finalizers).await;
        done_or_gone(written, |source| ProtectionError::Update {
            claim: format!("{namespace}/{}", claim.name_any()),
            source,
        })
    }
}

impl Reconciler for Protector {
    type Error = ProtectionError;

    /// Adds the finalizer to a live claim that lacks it; takes it off a
    /// deleted claim no pod uses.
    async fn sync(&self, key: ObjectKey) -> Result<Action, ProtectionError> {
        let namespace = key.namespace.clone().unwrap_or_default();
        let Some(claim) = self.claims.get(&namespace, &key.name) else {
            return Ok(Action::Done);
        };
        let finalizers = claim.finalizers().to_vec();
        let protected = finalizers.iter().any(|f| f == FINALIZER);
        match (claim.metadata.deletion_timestamp.is_some(), protected) {
            (false, false) => {
                let mut with = finalizers;
                with.push(FINALIZER.to_string());
                self.set_finalizers(&claim, with).await
            }
            (true, true) => {
                if self.in_use(&namespace, &key.name).await? {
                    tracing::debug!(claim = %key, "claim still in use; kept");
                    return Ok(Action::Done);
                }
                let rest = finalizers.into_iter().filter(|f| f != FINALIZER).collect();
                let action = self.set_finalizers(&claim, rest).await?;
                tracing::info!(claim = %key, "no pod uses the deleted claim; released");
                Ok(action)
            }
            _ => Ok(Action::Done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(node: Option<&str>, phase: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"nodeName": node, "containers": [], "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                {"name": "tmp", "emptyDir": {}}]},
            "status": {"phase": phase}
        }))
        .expect("pod")
    }

    #[test]
    fn a_scheduled_unfinished_pod_uses_its_named_and_ephemeral_claims() {
        let running = pod(Some("n1"), "Running");
        assert_eq!(claims_of(&running), ["data", "web-scratch"]);
        assert!(uses(&running, "data") && uses(&running, "web-scratch"));
        assert!(!uses(&running, "other") && !uses(&running, "web-tmp"));
        assert!(!uses(&pod(None, "Pending"), "data"), "not scheduled");
        assert!(!uses(&pod(Some("n1"), "Succeeded"), "data"), "finished");
        assert!(!uses(&pod(Some("n1"), "Failed"), "data"), "finished");
    }
}
