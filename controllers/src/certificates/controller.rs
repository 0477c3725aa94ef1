//! The csrapproving and csrsigning controllers for the signers skiff
//! serves, with the cluster CA:
//!
//! - `kubernetes.io/kubelet-serving` (remote nodes' serving certificates):
//!   approved when the requester is the node it names — the API server
//!   recorded the requester as `system:node:<name>` in `system:nodes`, the
//!   request's subject is that same user, it asks only for serving usages,
//!   and every name it asks for is an address that Node publishes
//!   ([`super::kubelet_serving`]);
//! - `kubernetes.io/kube-apiserver-client-kubelet` (nodes' client
//!   certificates, the kubelet TLS bootstrap): approved, as upstream's
//!   csrapproving controller, when the request is a node client request
//!   ([`super::kubelet_client`], client usages only) and a
//!   SubjectAccessReview allows its requester to create
//!   `certificatesigningrequests/selfnodeclient` (the node itself, renewing)
//!   or `certificatesigningrequests/nodeclient` (anyone else: by default
//!   the bootstrap identities).
//!
//! - `kubernetes.io/kube-apiserver-client` (users' client certificates):
//!   never approved here; once a human has, signed
//!   ([`super::api_server_client`]).
//!
//! Approved requests are signed and the certificate written to the status.
//! A request that does not qualify is left pending for a human (approvers
//! do not deny, as upstream); one the signer's rules refuse gets a `Failed`
//! condition.
//!
//! It runs only when the manager was given the cluster CA; it never writes
//! the CA key anywhere and never touches requests of other signers.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use tracing::Instrument;

use super::kubelet_serving::{
    ClusterSigner, NODE_USER_PREFIX, NODES_GROUP, SIGNER_NAME, names_address, parse_request,
};
use super::{api_server_client, kubelet_client};
use crate::controller_utils::node_addresses;
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
    let reviews: Api<SubjectAccessReview> = Api::all(ctx.client.clone());
    loop {
        for csr in csrs.cache().list() {
            let name = csr.metadata.name.clone().unwrap_or_default();
            let kind = if csr.spec.signer_name == SIGNER_NAME {
                Kind::Serving
            } else if csr.spec.signer_name == kubelet_client::SIGNER_NAME {
                Kind::Client
            } else if csr.spec.signer_name == api_server_client::SIGNER_NAME {
                Kind::User
            } else {
                continue;
            };
            let span = tracing::info_span!("reconcile", controller = "certificates", key = %name);
            let done = reconcile(&api, &reviews, kind, &csr, &nodes.cache().list(), &signer)
                .instrument(span)
                .await;
            if let Err(error) = done {
                tracing::warn!(csr = %name, %error, signer = %csr.spec.signer_name, "certificate request");
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

/// Which of the signers a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A node's serving certificate.
    Serving,
    /// A node's client certificate.
    Client,
    /// A user's client certificate (approved by a human only).
    User,
}

async fn reconcile(
    api: &Api<CertificateSigningRequest>,
    reviews: &Api<SubjectAccessReview>,
    kind: Kind,
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
        let decided = match kind {
            Kind::Serving => approval(csr, nodes).map(|()| {
                "approved: the requesting node asked for a serving certificate for its own addresses"
            }),
            Kind::Client => match client_approval(csr) {
                Ok(subresource) => {
                    if allowed(reviews, csr, subresource).await? {
                        Ok(if subresource == "selfnodeclient" {
                            "Auto approving self kubelet client certificate after SubjectAccessReview."
                        } else {
                            "Auto approving kubelet client certificate after SubjectAccessReview."
                        })
                    } else {
                        Err(format!(
                            "the requester may not create certificatesigningrequests/{subresource}"
                        ))
                    }
                }
                Err(why) => Err(why),
            },
            Kind::User => Err("a user's certificate waits for a human approver".to_string()),
        };
        match decided {
            Ok(message) => {
                let mut approved = csr.clone();
                add_condition(&mut approved, "Approved", "AutoApproved", message);
                api.replace_subresource("approval", &name, &PostParams::default(), &approved)
                    .await?;
                tracing::info!(csr = %name, ?kind, "certificate request approved");
            }
            Err(why) => {
                tracing::debug!(csr = %name, %why, ?kind, "certificate request left pending")
            }
        }
        // The approval comes back through the informer; sign on a later pass.
        return Ok(());
    }
    let pem = String::from_utf8_lossy(&csr.spec.request.0).into_owned();
    let mut updated = csr.clone();
    let expiration = csr
        .spec
        .expiration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map(Duration::from_secs);
    let signed = match kind {
        Kind::Serving => signer.sign_kubelet_serving(&pem).map(|(c, _)| c),
        Kind::Client => signer.sign_kubelet_client(&pem, expiration).map(|(c, _)| c),
        Kind::User => api_server_client::check_usages(usages(csr))
            .and_then(|()| signer.sign_api_server_client(&pem, expiration)),
    };
    match signed {
        Ok(certificate) => {
            updated
                .status
                .get_or_insert_with(Default::default)
                .certificate = Some(k8s_openapi::ByteString(certificate.into_bytes()));
            tracing::info!(csr = %name, ?kind, "certificate signed");
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

/// The key usages a request asks for.
fn usages(csr: &CertificateSigningRequest) -> BTreeSet<&str> {
    csr.spec
        .usages
        .iter()
        .flatten()
        .map(String::as_str)
        .collect()
}

/// Whether a client request is a node client request, and which
/// subresource its requester must be allowed to create for it to be
/// approved: `selfnodeclient` when the node asks for itself, `nodeclient`
/// otherwise (upstream's csrapproving recognizers). The error says why it
/// is not one.
pub fn client_approval(csr: &CertificateSigningRequest) -> Result<&'static str, String> {
    let usages = usages(csr);
    if !usages.contains("client auth")
        || usages
            .iter()
            .any(|u| !kubelet_client::ALLOWED_USAGES.contains(u))
    {
        return Err(format!(
            "usages {usages:?} are not a node client certificate's"
        ));
    }
    let pem = String::from_utf8_lossy(&csr.spec.request.0).into_owned();
    let (_, node) = kubelet_client::parse_request(&pem).map_err(|e| e.to_string())?;
    let requester = csr.spec.username.as_deref().unwrap_or_default();
    let groups = csr.spec.groups.as_deref().unwrap_or_default();
    let is_node = requester.strip_prefix(NODE_USER_PREFIX) == Some(node.as_str())
        && groups.iter().any(|g| g == NODES_GROUP);
    Ok(if is_node {
        "selfnodeclient"
    } else {
        "nodeclient"
    })
}

/// Whether the request's requester may create
/// `certificatesigningrequests/<subresource>`, asked as a
/// SubjectAccessReview with the identity the API server recorded.
async fn allowed(
    reviews: &Api<SubjectAccessReview>,
    csr: &CertificateSigningRequest,
    subresource: &str,
) -> Result<bool, kube::Error> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: csr.spec.username.clone(),
            groups: csr.spec.groups.clone(),
            uid: csr.spec.uid.clone(),
            extra: csr.spec.extra.clone(),
            resource_attributes: Some(ResourceAttributes {
                group: Some("certificates.k8s.io".into()),
                resource: Some("certificatesigningrequests".into()),
                subresource: Some(subresource.into()),
                verb: Some("create".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = reviews.create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
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
    let usages = usages(csr);
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
    let addresses: Vec<String> = node_addresses(node)
        .iter()
        .map(|a| a.address.clone())
        .collect();
    if let Some(foreign) = request.names.iter().find(|n| !names_address(n, &addresses)) {
        return Err(format!(
            "{foreign} is not an address of node {node_name} ({addresses:?})"
        ));
    }
    Ok(())
}
