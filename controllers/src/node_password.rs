//! k3s's node-password cleanup: when a Node is deleted, the Secret holding
//! its password hash (`kube-system/<node>.node-password.skiff`, recorded by
//! the API server at the node's first join) is deleted too, so a
//! re-provisioned host (a new password) can join under the same name once
//! an administrator has deleted the old Node. While the Node exists, the
//! Secret stays and another host stays refused.
//!
//! Only deletions are acted on, never a Secret without a Node: a joining
//! agent's password is recorded before its Node is created. It acts as the
//! `node-password-controller` service account, which may only read and
//! delete Secrets in kube-system.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Api;
use kube::ResourceExt;
use skiff_common::node_password::{NAMESPACE, SECRET_TYPE, secret_name};
use skiff_informer::{Action, Controller, HandlerFns, WorkQueue};

use crate::manager::{Context, Stop, stopped};

/// The service account the controller acts as.
pub const ACCOUNT: &str = "node-password-controller";

/// Why a node's password Secret could not be removed (retried).
#[derive(Debug, thiserror::Error)]
pub enum NodePasswordError {
    /// Reading or deleting the Secret failed.
    #[error("removing the node password of {node:?}: {source}")]
    Api {
        /// The deleted node.
        node: String,
        /// The API's answer.
        source: kube::Error,
    },
}

/// Runs until `stop`.
pub async fn run(ctx: Context, stop: Stop) {
    let nodes = ctx.factory.informer::<Node>();
    let queue = WorkQueue::<String>::new();
    let deleted = queue.clone();
    // A relist after a lost watch reports the Nodes deleted meanwhile as
    // deletions too, so none is missed while the server stays up.
    let handler = HandlerFns::new().on_delete(move |n: &Arc<Node>| deleted.add(n.name_any()));
    let cache = nodes.cache().clone();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    Controller::new("node-password", queue)
        .watch(&nodes, handler)
        .run_until(
            move |node: String| {
                // Registered again meanwhile (same host re-registering):
                // its password still guards the name.
                let exists = cache.get("", &node).is_some();
                let secrets = secrets.clone();
                async move {
                    if exists {
                        return Ok(Action::Done);
                    }
                    forget(&secrets, &node).await
                }
            },
            stopped(stop),
        )
        .await;
}

/// Deletes `node`'s password Secret if there is one.
async fn forget(secrets: &Api<Secret>, node: &str) -> Result<Action, NodePasswordError> {
    let name = secret_name(node);
    let error = |source| NodePasswordError::Api {
        node: node.to_string(),
        source,
    };
    let Some(secret) = secrets.get_opt(&name).await.map_err(error)? else {
        return Ok(Action::Done);
    };
    if secret.type_.as_deref() != Some(SECRET_TYPE) {
        return Ok(Action::Done);
    }
    let params = crate::controller_utils::delete_exactly(&secret.metadata);
    match secrets.delete(&name, &params).await {
        Ok(_) => {
            tracing::info!(%node, "node deleted: its node password was removed");
            Ok(Action::Done)
        }
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(Action::Done),
        Err(source) => Err(error(source)),
    }
}
