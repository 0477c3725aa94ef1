//! One sync of one ReplicaSet: claim pods, create or delete towards
//! `spec.replicas` (unless earlier writes are still unobserved), write status.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::{Client, ResourceExt};
use skiff_informer::{Action, Cache, ObjectKey};

use super::owner::ReplicaOwner;
use super::status::{self, ManageFailure};
use crate::controller_utils::api_message;
use crate::controller_utils::{controller_owner_ref, now, write_status};
use crate::events::{EventRecorder, object_reference};
use crate::manager::Reconciler;
use crate::pod_control::{
    BURST_REPLICAS, Expectations, PodControlError, claim, create_pods, is_active,
    pod_from_template, pods_to_delete, report_deleted, requeue_when_available,
};

/// Why a ReplicaSet sync failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReplicaSetError {
    /// Adopting, releasing, creating or deleting a pod failed.
    #[error(transparent)]
    Pods(#[from] PodControlError),
    /// Writing the owner's status failed.
    #[error("updating status of {key}: {source}")]
    Status {
        /// The owner's namespace/name.
        key: String,
        #[source]
        /// The API's error.
        source: kube::Error,
    },
    /// Creating or deleting pods failed; status was still written.
    #[error("{}: {}", .0.reason, .0.message)]
    Manage(ManageFailure),
}

/// What a sync needs: the API, the caches and the expectations.
pub(super) struct Syncer<K> {
    pub client: Client,
    pub owners: Arc<Cache<K>>,
    pub pods: Arc<Cache<Pod>>,
    pub expectations: Expectations,
    pub events: EventRecorder,
}

impl<K: ReplicaOwner> Reconciler for Syncer<K> {
    type Error = ReplicaSetError;

    /// Syncs the owner under `key`.
    async fn sync(&self, key: ObjectKey) -> Result<Action, ReplicaSetError> {
        let ns = key.namespace.clone().unwrap_or_default();
        let key_str = key.to_string();
        let Some(owner) = self.owners.get(&ns, &key.name) else {
            self.expectations.forget(&key_str);
            return Ok(Action::Done);
        };
        let Some(selector) = owner.pod_selector() else {
            tracing::warn!(owner = %key_str, "invalid or empty selector; not managing pods");
            return Ok(Action::Done);
        };
        let needs_sync = self.expectations.satisfied(&key_str);
        let pod_api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let active: Vec<Arc<Pod>> = self
            .pods
            .list_namespace(&ns)
            .into_iter()
            .filter(|p| is_active(p))
            .collect();
        let deleting = owner.meta().deletion_timestamp.is_some();
        let pods = claim(&pod_api, owner.as_ref(), &selector, active).await?;

        let failure = if needs_sync && !deleting {
            self.manage(&owner, &key_str, &pods, &pod_api).await
        } else {
            None
        };
        let at = now();
        let new_status = status::calculate(owner.as_ref(), &pods, failure.as_ref(), &at);
        if status::changed(&owner.status_json(), &new_status) {
            let api: Api<K> = Api::namespaced(self.client.clone(), &ns);
            let written = write_status(&api, &owner.name_any(), new_status)
                .await
                .map_err(|source| ReplicaSetError::Status {
                    key: key_str.clone(),
                    source,
                })?;
            if !written {
                return Ok(Action::Done);
            }
        }
        if let Some(f) = failure {
            return Err(ReplicaSetError::Manage(f));
        }
        // Wake up when the next ready pod turns available.
        let min_ready = owner.min_ready_seconds();
        Ok(requeue_when_available(&pods, min_ready, &at))
    }
}

impl<K: ReplicaOwner> Syncer<K> {
    /// Creates or deletes pods towards the desired count.
    async fn manage(
        &self,
        owner: &Arc<K>,
        key: &str,
        pods: &[Arc<Pod>],
        api: &Api<Pod>,
    ) -> Option<ManageFailure> {
        let desired = owner.desired().max(0) as usize;
        if pods.len() < desired {
            let count = (desired - pods.len()).min(BURST_REPLICAS);
            let template = owner.pod_template()?;
            let pod = pod_from_template(
                template,
                &owner.namespace().unwrap_or_default(),
                &format!("{}-", owner.name_any()),
                Some(controller_owner_ref(owner.as_ref())),
            );
            let error = create_pods(
                api,
                &self.events,
                &self.expectations,
                key,
                &object_reference(owner.as_ref()),
                vec![pod; count],
            )
            .await;
            return error.map(|e| ManageFailure {
                reason: "FailedCreate",
                message: api_message(&e),
            });
        }
        if pods.len() > desired {
            let count = (pods.len() - desired).min(BURST_REPLICAS);
            let victims = pods_to_delete(pods, pods, count);
            let ns = owner.namespace().unwrap_or_default();
            let keys: Vec<String> = victims
                .iter()
                .map(|p| format!("{ns}/{}", p.name_any()))
                .collect();
            self.expectations.expect_deletions(key, keys.clone());
            let results = futures::future::join_all(victims.iter().map(|p| {
                let name = p.name_any();
                async move {
                    let result = crate::pod_control::delete_pod(api, &name).await;
                    (name, result)
                }
            }))
            .await;
            let mut failure = None;
            for ((name, result), pod_key) in results.into_iter().zip(keys) {
                match result {
                    Ok(existed) => {
                        if !existed {
                            self.expectations.deletion_observed(key, &pod_key);
                        }
                        report_deleted(&self.events, &object_reference(owner.as_ref()), &name);
                    }
                    Err(e) => {
                        self.expectations.deletion_observed(key, &pod_key);
                        self.events.warning(
                            &object_reference(owner.as_ref()),
                            "FailedDelete",
                            "Delete",
                            format!("Error deleting: {e}"),
                        );
                        failure.get_or_insert(ManageFailure {
                            reason: "FailedDelete",
                            message: e.to_string(),
                        });
                    }
                }
            }
            return failure;
        }
        None
    }
}
