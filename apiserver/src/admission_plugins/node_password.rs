//! k3s's node password, checked where a node's client certificate is asked
//! for: a CertificateSigningRequest for the signer
//! `kubernetes.io/kube-apiserver-client-kubelet` naming `system:node:<name>`,
//! created by anyone but that node itself (a joining agent, as a bootstrap
//! identity whose token every agent shares), must carry the agent's node
//! password in the annotation [`ANNOTATION`]. The first such request for a
//! name records a salted hash of the password in the Secret
//! `kube-system/<name>.node-password.skiff`; later ones must carry the same
//! password, so a second host cannot take over an existing node's name.
//!
//! The annotation is removed before the request is stored, so the password
//! is never readable by those who may list CertificateSigningRequests (every
//! bootstrap identity may); only the hash is kept, in a kube-system Secret
//! (encrypted at rest when Secrets are). A node renewing its own
//! certificate proves itself with that certificate and needs no password;
//! `system:masters` may ask for any node's certificate without one.
//! Deleting the Secret frees the name for another host; the controller
//! manager's `node-password` controller does so when the Node is deleted.

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::authn::UserInfo;
use crate::handlers::storage;
use crate::object::{meta_mut, now_rfc3339};
use crate::registry::ResourceInfo;
use crate::server::Inner;
use crate::status::ApiError;

/// The annotation a joining agent puts its node password in.
pub(crate) const ANNOTATION: &str = "skiff.io/node-password";
/// The signer of node client certificates.
pub(crate) const SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
use skiff_common::node_password::{NAMESPACE, SECRET_TYPE, secret_name};
const NODE_PREFIX: &str = "system:node:";

/// Takes the password out of a new CertificateSigningRequest and checks it
/// (recording it for a new node name unless `dry_run`).
pub(crate) async fn admit(
    inner: &Inner,
    info: &ResourceInfo,
    user: &UserInfo,
    object: &mut Value,
    dry_run: bool,
) -> Result<(), ApiError> {
    if !info.is(crate::kinds::CertificateSigningRequests::RESOURCE) {
        return Ok(());
    }
    let password = take_password(object);
    if object["spec"]["signerName"].as_str() != Some(SIGNER) {
        return Ok(());
    }
    let Some(node) = requested_node(object) else {
        // Not a node's request: the signer refuses it; nothing to guard.
        return Ok(());
    };
    if user.name == format!("{NODE_PREFIX}{node}")
        || user.groups.iter().any(|g| g == crate::authz::MASTERS_GROUP)
    {
        return Ok(());
    }
    let forbidden = |detail: String| storage::forbidden(info, "", detail);
    let Some(password) = password.filter(|p| !p.is_empty()) else {
        return Err(forbidden(format!(
            "a client certificate request for node {node:?} must carry the node password (annotation {ANNOTATION})"
        )));
    };
    let secrets = inner
        .registry
        .get("", "v1", "secrets")
        .ok_or_else(|| ApiError::Internal("secrets are not registered".into()))?;
    let name = secret_name(&node);
    let key = secrets.key(Some(NAMESPACE), &name);
    // Two attempts: a concurrent first registration may win the create.
    for _ in 0..2 {
        if let Some((stored, _)) = storage::read(inner, &secrets, &key).await? {
            return if verify(&stored, &password) {
                Ok(())
            } else {
                tracing::warn!(node = %node, user = %user.name, "node password mismatch: refused a client certificate request");
                Err(forbidden(format!(
                    "node {node:?} is already registered with another node password: a second host cannot take over its name (an administrator may delete Secret {NAMESPACE}/{name} to free it)"
                )))
            };
        }
        if dry_run {
            return Ok(());
        }
        match storage::create(inner, &secrets, &key, secret(&name, &password)).await {
            Ok(_) => {
                tracing::info!(node = %node, "node password recorded");
                return Ok(());
            }
            Err(storage::WriteError::Conflict) => continue,
            Err(storage::WriteError::Api(e)) => return Err(e),
        }
    }
    Err(ApiError::Internal(format!(
        "recording the node password of {node:?} kept conflicting"
    )))
}

/// Removes the password annotation (and an annotations map it leaves
/// empty); returns it.
fn take_password(object: &mut Value) -> Option<String> {
    let meta = meta_mut(object);
    let annotations = meta.get_mut("annotations")?.as_object_mut()?;
    let password = annotations.remove(ANNOTATION)?;
    if annotations.is_empty() {
        meta.remove("annotations");
    }
    password.as_str().map(String::from)
}

/// The node a request's subject names (`CN=system:node:<name>`).
fn requested_node(object: &Value) -> Option<String> {
    let text = object["spec"]["request"].as_str()?;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).ok()?;
    let (_, csr) =
        <x509_parser::certification_request::X509CertificationRequest as x509_parser::prelude::FromDer<_>>::from_der(&pem.contents).ok()?;
    let subject = &csr.certification_request_info.subject;
    let cn = subject.iter_common_name().next()?.as_str().ok()?;
    cn.strip_prefix(NODE_PREFIX)
        .filter(|n| !n.is_empty())
        .map(String::from)
}

fn digest(salt: &str, password: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(salt.as_bytes());
    hasher.update(b":");
    hasher.update(password.as_bytes());
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `sha256:<salt>:<digest>`: the password is random and long (the agent
/// makes it), so a salted SHA-256 is enough to keep it out of the Secret.
fn hash(password: &str) -> String {
    use rand::Rng;
    let salt: String = rand::rng()
        .sample_iter(&rand::distr::Alphanumeric)
        .take(16)
        .map(char::from)
        .collect();
    format!("sha256:{salt}:{}", digest(&salt, password))
}

fn verify(secret: &Value, password: &str) -> bool {
    let Some(stored) = secret["data"]["hash"]
        .as_str()
        .and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok())
        .and_then(|b| String::from_utf8(b).ok())
    else {
        return false;
    };
    let mut parts = stored.splitn(3, ':');
    let (Some("sha256"), Some(salt), Some(expected)) = (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let actual = digest(salt, password);
    actual.len() == expected.len()
        && actual
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

fn secret(name: &str, password: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": now_rfc3339(),
        },
        "type": SECRET_TYPE,
        "immutable": true,
        "data": {"hash": base64::engine::general_purpose::STANDARD.encode(hash(password))},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_only_its_password() {
        let stored = secret("n1.node-password.skiff", "right");
        assert!(verify(&stored, "right"));
        assert!(!verify(&stored, "wrong"));
        assert!(!verify(&json!({"data": {}}), "right"));
        // Salted: the same password hashes differently each time.
        assert_ne!(hash("p"), hash("p"));
    }

    #[test]
    fn the_annotation_is_taken_out() {
        let mut csr = json!({"metadata": {"annotations": {ANNOTATION: "pw"}}});
        assert_eq!(take_password(&mut csr).as_deref(), Some("pw"));
        assert!(csr["metadata"].get("annotations").is_none());
        let mut other = json!({"metadata": {"annotations": {ANNOTATION: "pw", "a": "b"}}});
        take_password(&mut other);
        assert_eq!(other["metadata"]["annotations"], json!({"a": "b"}));
    }
}
