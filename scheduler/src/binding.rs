//! The API-facing side of the scheduler, as small traits the integration implements
//! over a `kube::Client`: binding through `pods/binding`, reporting results (the
//! `PodScheduled` condition, `nominatedNodeName`, events) and deleting preemption victims.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

/// Why a bind (or another API write) failed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ApiError {
    /// The object changed or is gone (409/404): the pod is requeued, not retried blindly.
    #[error("conflict: {0}")]
    Conflict(String),
    /// Any other failure.
    #[error("{0}")]
    Other(String),
}

/// `namespace/name` of a pod handed to these traits, a pod without a
/// namespace in `default` as the API would place it: how the `Scheduled`
/// event names the pod, and how the test double records the calls it gets.
pub(crate) fn full_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// Creates the `pods/binding` subresource.
#[async_trait]
pub trait Binder: Send + Sync {
    /// Binds `pod` to `node`.
    async fn bind(&self, pod: &Pod, node: &str) -> Result<(), ApiError>;
}

/// How a scheduling attempt ended, for the pod's condition and events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Bound: an event `Scheduled` "Successfully assigned ns/name to node".
    Scheduled {
        /// Node.
        node: String,
    },
    /// Not schedulable: `PodScheduled=False` with reason `Unschedulable` (or
    /// `SchedulerError`), an event `FailedScheduling` with the message, and
    /// `status.nominatedNodeName` when preemption nominated a node.
    Failed {
        /// `Unschedulable` or `SchedulerError`.
        reason: String,
        /// Upstream-worded message.
        message: String,
        /// Node nominated by preemption.
        nominated_node: Option<String>,
    },
}

/// Writes scheduling results back to the API (pod status and events).
#[async_trait]
pub trait StatusReporter: Send + Sync {
    /// Records the outcome for `pod`.
    async fn report(&self, pod: &Pod, outcome: &Outcome) -> Result<(), ApiError>;
}

/// Carries out preemption decisions.
#[async_trait]
pub trait Preemptor: Send + Sync {
    /// Deletes a victim (gracefully), recording a `Preempted` event on it.
    async fn delete_victim(&self, victim: &Pod, preemptor: &Pod) -> Result<(), ApiError>;
    /// Clears `status.nominatedNodeName` of a pod whose nomination was taken.
    async fn clear_nomination(&self, pod: &Pod) -> Result<(), ApiError>;
}

/// Annotation asking the provisioner to create a volume for a claim on a node.
pub(crate) const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";

/// Writes the scheduler's node choice onto `WaitForFirstConsumer` claims.
#[async_trait]
pub trait ClaimAnnotator: Send + Sync {
    /// Sets the `volume.kubernetes.io/selected-node` annotation on a claim.
    async fn select_node(&self, namespace: &str, claim: &str, node: &str) -> Result<(), ApiError>;
}

/// A `ClaimAnnotator` for clusters without dynamic provisioning: does nothing.
pub(crate) struct NoClaimAnnotator;

#[async_trait]
impl ClaimAnnotator for NoClaimAnnotator {
    async fn select_node(
        &self,
        _namespace: &str,
        _claim: &str,
        _node: &str,
    ) -> Result<(), ApiError> {
        Ok(())
    }
}
