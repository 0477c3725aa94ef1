//! CertificateSigningRequests: the requester (user, uid, groups) is recorded
//! from the authenticated user of the create, never taken from the body, and
//! the spec cannot change afterwards, as upstream — approvers and signers
//! decide on these fields.

use serde_json::{Value, json};

use super::KindStrategy;
use crate::authn::UserInfo;

named_kind! {
    /// `certificates.k8s.io/v1` CertificateSigningRequests.
    CertificateSigningRequests = k8s_openapi::api::certificates::v1::CertificateSigningRequest;
}

impl KindStrategy for CertificateSigningRequests {
    fn on_create_by(&self, object: &mut Value, user: &UserInfo) {
        let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
            return;
        };
        spec.insert("username".into(), json!(user.name));
        spec.insert("groups".into(), json!(user.groups));
        if user.uid.is_empty() {
            spec.remove("uid");
        } else {
            spec.insert("uid".into(), json!(user.uid));
        }
        spec.remove("extra");
    }

    fn carry_on_update(&self, old: &Value, new: &mut Value) {
        if let (Some(spec), Some(map)) = (old.get("spec"), new.as_object_mut()) {
            map.insert("spec".into(), spec.clone());
        }
    }
}
