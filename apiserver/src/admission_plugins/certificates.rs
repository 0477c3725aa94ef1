//! Upstream's admission plugins for CertificateSigningRequests, which keep
//! a signer from being used by whoever may merely write the object:
//! - CertificateApproval: approving or denying a request (its `approval`
//!   subresource) takes the `approve` verb on `signers`, named by the
//!   request's signer (or its domain, `kubernetes.io/*`);
//! - CertificateSigning: writing a certificate into a request's status
//!   takes the `sign` verb, the same way;
//! - CertificateSubjectRestriction: nobody may ask the
//!   `kubernetes.io/kube-apiserver-client` signer for a certificate in the
//!   `system:masters` group, which the API server would take for a
//!   cluster admin whoever approved it.

use serde_json::Value;

use super::{Operation, WriteRequest};
use crate::authz::{Attributes, Chain, RequestKind, ResourceAttributes};
use crate::handlers::storage;
use crate::object::meta_str;
use crate::registry::Subresource;
use crate::status::ApiError;

/// The signer of client certificates the API server trusts.
const API_SERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// The group whose members are always cluster admins.
const MASTERS: &str = "system:masters";

/// Checks one write of a CertificateSigningRequest.
pub(super) fn check(authorizer: &Chain, request: &WriteRequest<'_>) -> Result<(), ApiError> {
    let info = request.info;
    if info.group != "certificates.k8s.io" || info.resource != "certificatesigningrequests" {
        return Ok(());
    }
    let Some(new) = request.new else {
        return Ok(());
    };
    let name = meta_str(new, "name").unwrap_or("");
    let signer = new["spec"]["signerName"].as_str().unwrap_or("");
    let refuse = |detail: String| storage::forbidden(info, name, detail);
    match (request.operation, request.subresource) {
        (Operation::Create, None)
            if signer == API_SERVER_CLIENT_SIGNER && asks_for_masters(new) =>
        {
            Err(refuse(format!(
                "use of {API_SERVER_CLIENT_SIGNER} signer with {MASTERS} group is not allowed"
            )))
        }
        (Operation::Update, Some(Subresource::Approval))
            if !may(authorizer, request, "approve", signer) =>
        {
            Err(refuse(format!(
                "user not permitted to approve requests with signerName {signer:?}"
            )))
        }
        (Operation::Update, Some(Subresource::Status)) => {
            let certificate = |o: &Value| o["status"]["certificate"].clone();
            let changed = request
                .old
                .is_none_or(|old| certificate(old) != certificate(new));
            if changed && !may(authorizer, request, "sign", signer) {
                return Err(refuse(format!(
                    "user not permitted to sign requests with signerName {signer:?}"
                )));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Whether the request's PEM asks for an organization of `system:masters`.
/// One that does not parse is the signer's to refuse.
fn asks_for_masters(csr: &Value) -> bool {
    use base64::Engine;
    use x509_parser::prelude::FromDer;
    let Some(encoded) = csr["spec"]["request"].as_str() else {
        return false;
    };
    let Ok(pem) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
        return false;
    };
    let Ok((_, block)) = x509_parser::pem::parse_x509_pem(&pem) else {
        return false;
    };
    let Ok((_, parsed)) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&block.contents)
    else {
        return false;
    };
    parsed
        .certification_request_info
        .subject
        .iter_organization()
        .any(|o| o.as_str().is_ok_and(|o| o == MASTERS))
}

/// Whether the writer may `verb` the signer `signer`: by its name, or by
/// its domain with `/*` (upstream's two checks).
fn may(authorizer: &Chain, request: &WriteRequest<'_>, verb: &str, signer: &str) -> bool {
    let domain = signer.split_once('/').map(|(d, _)| format!("{d}/*"));
    std::iter::once(signer.to_string())
        .chain(domain)
        .any(|name| {
            let attributes = Attributes {
                user: request.user.clone(),
                verb: verb.into(),
                request: RequestKind::Resource(ResourceAttributes {
                    group: "certificates.k8s.io".into(),
                    version: "*".into(),
                    resource: "signers".into(),
                    subresource: String::new(),
                    namespace: String::new(),
                    name,
                }),
            };
            authorizer.decide(&attributes).is_ok()
        })
}
