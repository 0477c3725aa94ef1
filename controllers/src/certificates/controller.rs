//! Kubelet serving certificates for remote nodes: approves a
//! CertificateSigningRequest for `kubernetes.io/kubelet-serving` when its
//! requester is the node it names — the API server recorded the requester
//! as `system:node:<name>` in `system:nodes`, the request's subject is that
//! same user, it asks only for serving usages, and every name it asks for is
//! an address that Node publishes — and then signs approved ones with the
//! cluster CA ([`super::kubelet_serving`]), writing the certificate to the
//! request's status. A request that does not qualify is left pending for a
//! human (approvers do not deny, as upstream); one the signer's rules refuse
//! gets a `Failed` condition.
//!
//! It runs only when the manager was given the cluster CA; it never writes
//! the CA key anywhere and never touches requests of other signers.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;

use super::kubelet_serving::{
    ClusterSigner, NODE_USER_PREFIX, NODES_GROUP, SIGNER_NAME, names_address, parse_request,
};
use crate::manager::{Context, Stop};

/// How often pending requests are looked at.
const PERIOD: Duration = Duration::from_secs(1);

/// The usages a kubelet serving certificate may ask for.
const ALLOWED_USAGES: &[&str] = &["digital signature", "key encipherment", "server auth"];

/// Runs the approver and signer until `stop`.
pub async fn run(ctx: Context, mut stop: Stop) {
    let Some(signer) = ctx.cluster_signer.clone() else {
        tracing::debug!("no cluster CA given: kubelet serving requests are not signed");
        return;
    };
    let csrs = ctx.factory.informer::<CertificateSigningRequest>();
    let nodes = ctx.factory.informer::<Node>();
    csrs.wait_for_sync().await;
    nodes.wait_for_sync().await;
    let api: Api<CertificateSigningRequest> = Api::all(ctx.client.clone());
    loop {
        for csr in csrs.cache().list() {
            if csr.spec.signer_name != SIGNER_NAME {
                continue;
            }
            let name = csr.metadata.name.clone().unwrap_or_default();
            if let Err(error) = reconcile(&api, &csr, &nodes.cache().list(), &signer).await {
                tracing::warn!(csr = %name, %error, "kubelet serving request");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(PERIOD) => {}
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
            }
        }
    }
}

fn has_condition(csr: &CertificateSigningRequest, kind: &str) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == kind && c.status == "True"))
}

async fn reconcile(
    api: &Api<CertificateSigningRequest>,
    csr: &CertificateSigningRequest,
    nodes: &[Arc<Node>],
    signer: &ClusterSigner,
) -> Result<(), kube::Error> {
    if has_condition(csr, "Denied") || has_condition(csr, "Failed") {
        return Ok(());
    }
    let signed = csr
        .status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|c| !c.0.is_empty());
    if signed {
        return Ok(());
    }
    let name = csr.metadata.name.clone().unwrap_or_default();
    if !has_condition(csr, "Approved") {
        match approval(csr, nodes) {
            Ok(()) => {
                let mut approved = csr.clone();
                add_condition(
                    &mut approved,
                    "Approved",
                    "AutoApproved",
                    "approved: the requesting node asked for a serving certificate for its own addresses",
                );
                api.replace_subresource("approval", &name, &PostParams::default(), &approved)
                    .await?;
                tracing::info!(csr = %name, "kubelet serving request approved");
            }
            Err(why) => tracing::debug!(csr = %name, %why, "kubelet serving request left pending"),
        }
        // The approval comes back through the informer; sign on a later pass.
        return Ok(());
    }
    let pem = String::from_utf8_lossy(&csr.spec.request.0).into_owned();
    let mut updated = csr.clone();
    match signer.sign_kubelet_serving(&pem) {
        Ok((certificate, _)) => {
            updated
                .status
                .get_or_insert_with(Default::default)
                .certificate = Some(k8s_openapi::ByteString(certificate.into_bytes()));
            tracing::info!(csr = %name, "kubelet serving certificate signed");
        }
        Err(error) => add_condition(
            &mut updated,
            "Failed",
            "SignerValidationFailure",
            &error.to_string(),
        ),
    }
    api.replace_status(&name, &PostParams::default(), &updated)
        .await?;
    Ok(())
}

fn add_condition(csr: &mut CertificateSigningRequest, kind: &str, reason: &str, message: &str) {
    let now = Time(Timestamp::now());
    csr.status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(CertificateSigningRequestCondition {
            type_: kind.to_string(),
            status: "True".to_string(),
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            last_update_time: Some(now.clone()),
            last_transition_time: Some(now),
        });
}

/// Whether the request may be approved; the error says why not.
pub fn approval(csr: &CertificateSigningRequest, nodes: &[Arc<Node>]) -> Result<(), String> {
    let requester = csr.spec.username.as_deref().unwrap_or_default();
    let Some(node_name) = requester.strip_prefix(NODE_USER_PREFIX) else {
        return Err(format!("requester {requester:?} is not a node"));
    };
    let groups = csr.spec.groups.as_deref().unwrap_or_default();
    if !groups.iter().any(|g| g == NODES_GROUP) {
        return Err(format!("requester {requester:?} is not in {NODES_GROUP}"));
    }
    let usages: BTreeSet<&str> = csr
        .spec
        .usages
        .iter()
        .flatten()
        .map(String::as_str)
        .collect();
    if !usages.contains("server auth") || usages.iter().any(|u| !ALLOWED_USAGES.contains(u)) {
        return Err(format!("usages {usages:?} are not a serving certificate's"));
    }
    let pem = String::from_utf8_lossy(&csr.spec.request.0).into_owned();
    let (_, request) = parse_request(&pem).map_err(|e| e.to_string())?;
    if request.node_name != node_name {
        return Err(format!(
            "node {node_name} asks for a certificate of node {}",
            request.node_name
        ));
    }
    let node = nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(node_name))
        .ok_or_else(|| format!("node {node_name} is not registered"))?;
    let addresses: Vec<String> = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .map(|a| a.address.clone())
        .collect();
    if let Some(foreign) = request.names.iter().find(|n| !names_address(n, &addresses)) {
        return Err(format!(
            "{foreign} is not an address of node {node_name} ({addresses:?})"
        ));
    }
    Ok(())
}
