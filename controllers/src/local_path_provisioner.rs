//! skiff's `local-path` provisioner (k3s ships rancher's as a pod; skiff's
//! runs here): a claim of a class whose provisioner is `skiff.io/local-path`,
//! once the scheduler has placed its first pod and marked the claim with
//! the selected node, gets a hostPath PersistentVolume pinned to that node
//! in the directory the node published (`skiff_common::local_path`), and
//! the two are bound. It also makes sure the default `local-path`
//! StorageClass exists.
//!
//! It never touches a host: the node's agent makes the directory when the
//! volume is first mounted and removes it once the volume is Released.
//! So any node, the server's own or a joined agent, gets volumes the same
//! way, and no node needs the right to create volumes or bind claims.
//! It acts as k3s's `kube-system/local-path-provisioner-service-account`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use skiff_common::local_path::{
    self, PROVISIONER, SELECTED_NODE_ANNOTATION, STORAGE_DIR_ANNOTATION,
};
use skiff_informer::{Action, Cache, HandlerFns, ObjectKey};

use crate::controller_utils::unbound_claim as unbound;
use crate::events::{EventRecorder, object_reference};
use crate::manager::{Context, Reconciler, Stop, keyed_by, run_until_stopped};

/// The service account it acts as (k3s's provisioner's name).
pub const ACCOUNT: &str = "local-path-provisioner-service-account";
/// The name events carry, as the provisioner's own.
const COMPONENT: &str = PROVISIONER;
/// How soon a failed write of the default class is tried again.
const CLASS_RETRY: Duration = Duration::from_secs(2);

/// Why a claim was not provisioned (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProvisionError {
    /// A write to the API failed.
    #[error("provisioning claim {claim}: {what}: {source}")]
    Api {
        /// namespace/name.
        claim: String,
        /// Which write.
        what: &'static str,
        /// The API's error.
        #[source]
        source: kube::Error,
    },
    /// A volume of the provisioned name exists for another claim.
    #[error("provisioning claim {claim}: volume {volume} exists and is not this claim's")]
    Taken {
        /// namespace/name.
        claim: String,
        /// The volume.
        volume: String,
    },
}

struct Provisioner {
    client: kube::Client,
    events: EventRecorder,
    claims: Arc<Cache<PersistentVolumeClaim>>,
    classes: Arc<Cache<StorageClass>>,
    nodes: Arc<Cache<Node>>,
}

/// Runs the provisioner until `stop`.
pub async fn run(ctx: Context, stop: Stop) {
    let class_client = ctx.client.clone();
    let mut class_stop = stop.clone();
    let ensure_class = async move {
        loop {
            match ensure_default_class(&class_client).await {
                Ok(()) => return,
                Err(error) => tracing::warn!(%error, "creating the local-path StorageClass"),
            }
            tokio::select! {
                _ = class_stop.wait_for(|s| *s) => return,
                _ = tokio::time::sleep(CLASS_RETRY) => {}
            }
        }
    };
    let claims = ctx.factory.informer::<PersistentVolumeClaim>();
    let classes = ctx.factory.informer::<StorageClass>();
    let nodes = ctx.factory.informer::<Node>();
    let provisioner = Arc::new(Provisioner {
        client: ctx.client.clone(),
        events: EventRecorder::new(ctx.client.clone(), COMPONENT),
        claims: claims.cache().clone(),
        classes: classes.cache().clone(),
        nodes: nodes.cache().clone(),
    });
    let controller = keyed_by("local-path-provisioner", &claims);
    // A node publishing (or moving) its storage directory is what the
    // claims placed on it may be waiting for.
    let wake_placed = {
        let (queue, claims) = (controller.queue().clone(), claims.cache().clone());
        move |node: &Arc<Node>| {
            let name = node.name_any();
            for claim in claims
                .list()
                .iter()
                .filter(|c| selected_node(c) == Some(&name))
            {
                queue.add(ObjectKey::from_object(claim.as_ref()));
            }
        }
    };
    let on_update = wake_placed.clone();
    let node_handler = HandlerFns::new()
        .on_add(move |node: &Arc<Node>| wake_placed(node))
        .on_update(move |_, node: &Arc<Node>| on_update(node));
    let controller = controller.watch(&nodes, node_handler);
    tokio::join!(
        ensure_class,
        run_until_stopped(controller, provisioner, stop)
    );
}

/// Makes sure the default `local-path` StorageClass exists.
async fn ensure_default_class(client: &kube::Client) -> Result<(), kube::Error> {
    let classes: Api<StorageClass> = Api::all(client.clone());
    match classes
        .create(&PostParams::default(), &local_path::default_class())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// The node the scheduler placed `claim` on.
fn selected_node(claim: &PersistentVolumeClaim) -> Option<&String> {
    claim.annotations().get(SELECTED_NODE_ANNOTATION)
}

/// The directory `node` keeps its volumes in, if it published a usable one.
fn storage_dir(node: &Node) -> Option<&Path> {
    node.annotations()
        .get(STORAGE_DIR_ANNOTATION)
        .map(Path::new)
        .filter(|dir| dir.is_absolute())
}

impl Provisioner {
    /// The class of `claim`, when it is one this provisioner serves.
    fn our_class(&self, claim: &PersistentVolumeClaim) -> Option<Arc<StorageClass>> {
        let name = claim.spec.as_ref()?.storage_class_name.as_deref()?;
        self.classes
            .get("", name)
            .filter(|class| class.provisioner == PROVISIONER)
    }

    /// Creates `volume` for `claim`, or finds it made by an earlier sync.
    async fn create_volume(
        &self,
        claim_key: &str,
        claim: &PersistentVolumeClaim,
        volume: &PersistentVolume,
    ) -> Result<(), ProvisionError> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        let name = volume.name_any();
        let api_err = |what| {
            move |source| ProvisionError::Api {
                claim: claim_key.to_string(),
                what,
                source,
            }
        };
        match api.create(&PostParams::default(), volume).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(source) => return Err(api_err("creating its volume")(source)),
        }
        let existing = api
            .get(&name)
            .await
            .map_err(api_err("reading its volume"))?;
        let claimed_by = existing
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .and_then(|r| r.uid.as_deref());
        if claimed_by != claim.metadata.uid.as_deref() {
            return Err(ProvisionError::Taken {
                claim: claim_key.to_string(),
                volume: name,
            });
        }
        Ok(())
    }

    /// Marks `volume` and `claim` bound to each other.
    async fn bind(
        &self,
        claim_key: &str,
        claim: &PersistentVolumeClaim,
        volume: &PersistentVolume,
    ) -> Result<(), ProvisionError> {
        let api_err = |what| {
            move |source| ProvisionError::Api {
                claim: claim_key.to_string(),
                what,
                source,
            }
        };
        let params = PatchParams::default();
        let volume_name = volume.name_any();
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        let bound = serde_json::json!({"status": {"phase": "Bound"}});
        volumes
            .patch_status(&volume_name, &params, &Patch::Merge(&bound))
            .await
            .map_err(api_err("marking its volume Bound"))?;
        let namespace = claim.namespace().unwrap_or_default();
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &namespace);
        let binding = serde_json::json!({
            "metadata": {
                "resourceVersion": claim.resource_version(),
                "annotations": {
                    "pv.kubernetes.io/bind-completed": "yes",
                    "pv.kubernetes.io/bound-by-controller": "yes",
                    "volume.kubernetes.io/storage-provisioner": PROVISIONER,
                    "volume.beta.kubernetes.io/storage-provisioner": PROVISIONER,
                }
            },
            "spec": {"volumeName": volume_name},
        });
        claims
            .patch(&claim.name_any(), &params, &Patch::Merge(&binding))
            .await
            .map_err(api_err("binding the claim"))?;
        let spec = volume.spec.clone().unwrap_or_default();
        let status = serde_json::json!({"status": {
            "phase": "Bound",
            "accessModes": spec.access_modes,
            "capacity": spec.capacity,
        }});
        claims
            .patch_status(&claim.name_any(), &params, &Patch::Merge(&status))
            .await
            .map_err(api_err("writing the claim's status"))?;
        Ok(())
    }
}

impl Reconciler for Provisioner {
    type Error = ProvisionError;

    /// Provisions and binds the claim under `key` once it is placed on a
    /// node that published its storage directory.
    async fn sync(&self, key: ObjectKey) -> Result<Action, ProvisionError> {
        let namespace = key.namespace.clone().unwrap_or_default();
        let Some(claim) = self.claims.get(&namespace, &key.name) else {
            return Ok(Action::Done);
        };
        if !unbound(&claim) {
            return Ok(Action::Done);
        }
        let (Some(class), Some(node_name)) = (self.our_class(&claim), selected_node(&claim)) else {
            return Ok(Action::Done);
        };
        let reference = object_reference(claim.as_ref());
        // The node's own updates (its annotation arriving) wake this claim.
        let Some(node) = self.nodes.get("", node_name) else {
            tracing::info!(claim = %key, node = %node_name, "waiting for the selected node to exist");
            return Ok(Action::Done);
        };
        let Some(dir) = storage_dir(&node) else {
            self.events.normal(
                &reference,
                "WaitForNode",
                "Provision",
                format!("waiting for node {node_name} to publish its local-path storage directory"),
            );
            return Ok(Action::Done);
        };
        let claim_key = key.to_string();
        let volume = local_path::volume_for(
            &claim,
            &class,
            &local_path::claim_dir(dir, &claim),
            node_name,
        );
        self.events.normal(
            &reference,
            "Provisioning",
            "Provision",
            format!("External provisioner is provisioning volume for claim \"{claim_key}\""),
        );
        self.create_volume(&claim_key, &claim, &volume).await?;
        self.bind(&claim_key, &claim, &volume).await?;
        let volume_name = volume.name_any();
        self.events.normal(
            &reference,
            "ProvisioningSucceeded",
            "Provision",
            format!("Successfully provisioned volume {volume_name}"),
        );
        tracing::info!(claim = %key, node = %node_name, volume = %volume_name, "provisioned a local-path volume");
        Ok(Action::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_live_claim_naming_no_volume_is_provisioned() {
        let claim = |extra: serde_json::Value| -> PersistentVolumeClaim {
            let mut c = json!({"metadata": {"name": "c", "namespace": "d"}, "spec": {}});
            if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
                for (k, v) in extra {
                    c.insert(k.clone(), v.clone());
                }
            }
            serde_json::from_value(c).expect("claim")
        };
        assert!(unbound(&claim(json!({}))));
        assert!(!unbound(&claim(json!({"spec": {"volumeName": "pv"}}))));
        assert!(!unbound(&claim(json!({"metadata": {
            "name": "c", "namespace": "d", "deletionTimestamp": "2026-12-06T00:00:00Z"}}))));
    }

    #[test]
    fn a_node_is_ready_for_volumes_once_it_names_an_absolute_directory() {
        let node = |dir: Option<&str>| -> Node {
            serde_json::from_value(json!({"metadata": {"name": "n",
                "annotations": dir.map(|d| json!({STORAGE_DIR_ANNOTATION: d}))}}))
            .expect("node")
        };
        assert_eq!(storage_dir(&node(None)), None);
        assert_eq!(storage_dir(&node(Some("relative/dir"))), None);
        assert_eq!(
            storage_dir(&node(Some("/var/lib/skiff/storage"))),
            Some(Path::new("/var/lib/skiff/storage"))
        );
    }
}
