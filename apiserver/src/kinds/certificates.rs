//! CertificateSigningRequests: the requester (user, uid, groups) is recorded
//! from the authenticated user of the create, never taken from the body, and
//! the spec cannot change afterwards, as upstream — approvers and signers
//! decide on these fields. A new request is checked as upstream checks it:
//! a PEM certificate request signed by the key it names (proof that the
//! requester holds it), known usages each named once, and a signer name of
//! the form `example.com/signer-name`.

use base64::Engine;
use serde_json::{Value, json};
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::error::X509Error;
use x509_parser::oid_registry::{
    OID_SIG_ECDSA_WITH_SHA256, OID_SIG_ECDSA_WITH_SHA384, OID_SIG_ED25519,
};
use x509_parser::prelude::FromDer;
use x509_parser::public_key::PublicKey;

use super::{KindStrategy, Written};
use crate::authn::UserInfo;
use crate::status::FieldError;
use crate::validation::{NameRule, validate_name};

/// Key usages a request may ask for, sorted as upstream lists them.
const USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// Longest signer domain (a DNS subdomain).
const MAX_SIGNER_DOMAIN: usize = 253;
/// Longest signer name: a domain, a label and a subdomain with their `/`
/// and `.`.
const MAX_SIGNER_NAME: usize = 253 + 253 + 63 + 2;

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

    /// A new request's spec; the spec never changes after.
    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        if written.old.is_some() {
            return;
        }
        let spec = &written.object["spec"];
        request(spec["request"].as_str().unwrap_or(""), errors);
        let usages = spec["usages"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if usages.is_empty() {
            errors.push(FieldError::required("spec.usages", ""));
        }
        let mut seen: Vec<&str> = Vec::new();
        for (i, usage) in usages.iter().enumerate() {
            let usage = usage.as_str().unwrap_or("");
            let at = format!("spec.usages[{i}]");
            if !USAGES.contains(&usage) {
                errors.push(FieldError::not_supported(&at, usage, USAGES));
            }
            if seen.contains(&usage) {
                errors.push(FieldError::duplicate(&at, usage));
            }
            seen.push(usage);
        }
        signer_name(spec["signerName"].as_str().unwrap_or(""), errors);
    }

    fn carry_on_update(&self, old: &Value, new: &mut Value) {
        if let (Some(spec), Some(map)) = (old.get("spec"), new.as_object_mut()) {
            map.insert("spec".into(), spec.clone());
        }
    }
}

/// The request (base64 in JSON) is a PEM `CERTIFICATE REQUEST` holding a
/// PKCS#10 request signed by the key it asks a certificate for. The refusal
/// shows the bytes as Go prints a `[]byte`.
fn request(encoded: &str, errors: &mut Vec<FieldError>) {
    // Bad base64 was refused when the body was decoded.
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
        return;
    };
    let why = match x509_parser::pem::parse_x509_pem(&bytes) {
        Ok((_, pem)) if pem.label == "CERTIFICATE REQUEST" => {
            match X509CertificationRequest::from_der(&pem.contents) {
                Ok((_, csr)) => match signature_refusal(&csr) {
                    None => return,
                    Some(why) => why.to_owned(),
                },
                Err(e) => format!("x509: malformed certificate request: {e}"),
            }
        }
        _ => "PEM block type must be CERTIFICATE REQUEST".to_owned(),
    };
    errors.push(FieldError::invalid("spec.request", "", why).shown_as(go_bytes(&bytes)));
}

/// Why a request's signature does not prove its requester holds the key,
/// in Go's words for each kind of key (upstream checks it before anything
/// is stored). A request this check cannot verify (an algorithm or key size
/// ring does not take, such as P-521 or RSA under 2048 bits) is let through
/// rather than refused, since upstream would verify it.
fn signature_refusal(csr: &X509CertificationRequest<'_>) -> Option<&'static str> {
    let key = &csr.certification_request_info.subject_pki;
    if let Ok(PublicKey::RSA(rsa)) = key.parsed()
        && rsa.key_size() < 2048
    {
        return None;
    }
    match csr.verify_signature() {
        Err(X509Error::SignatureVerificationError) => {
            let algorithm = &csr.signature_algorithm.algorithm;
            Some(if *algorithm == OID_SIG_ED25519 {
                "x509: Ed25519 verification failure"
            } else if [OID_SIG_ECDSA_WITH_SHA256, OID_SIG_ECDSA_WITH_SHA384].contains(algorithm) {
                "x509: ECDSA verification failure"
            } else {
                "crypto/rsa: verification error"
            })
        }
        _ => None,
    }
}

/// Bytes as Go's `%#v` prints a `[]byte`.
fn go_bytes(bytes: &[u8]) -> String {
    let items: Vec<String> = bytes.iter().map(|b| format!("0x{b:x}")).collect();
    format!("[]byte{{{}}}", items.join(", "))
}

/// The errors of the first of `labels` that breaks `rule`, shown as
/// upstream shows them: on the whole `segment`, naming the label (later
/// labels would only repeat them).
fn first_bad_label(labels: &[&str], rule: NameRule, segment: &str, errors: &mut Vec<FieldError>) {
    let found = labels
        .iter()
        .map(|label| (label, validate_name(rule, label, "")))
        .find(|(_, found)| !found.is_empty());
    for error in found.iter().flat_map(|(label, found)| {
        found
            .iter()
            .map(move |e| format!("validating label {label:?}: {}", e.detail))
    }) {
        errors.push(FieldError::invalid("spec.signerName", segment, error));
    }
}

/// Upstream's ValidateSignerName: `<domain>/<path>`, the domain of at
/// least two DNS labels and the path of dot-separated DNS subdomains.
fn signer_name(name: &str, errors: &mut Vec<FieldError>) {
    const AT: &str = "spec.signerName";
    if name.is_empty() {
        errors.push(FieldError::required(AT, ""));
        return;
    }
    let Some((domain, path)) = name.split_once('/').filter(|(_, p)| !p.contains('/')) else {
        errors.push(FieldError::invalid(
            AT,
            name,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
        return;
    };
    if domain.len() > MAX_SIGNER_DOMAIN {
        errors.push(FieldError::too_long(AT, MAX_SIGNER_DOMAIN));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    first_bad_label(&labels, NameRule::Label, domain, errors);
    if labels.len() < 2 {
        errors.push(FieldError::invalid(
            AT,
            domain,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    let parts: Vec<&str> = path.split('.').collect();
    first_bad_label(&parts, NameRule::Subdomain, path, errors);
    if name.len() > MAX_SIGNER_NAME {
        errors.push(FieldError::too_long(AT, MAX_SIGNER_NAME));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer_errors(name: &str) -> Vec<String> {
        let mut errors = Vec::new();
        signer_name(name, &mut errors);
        errors.iter().map(FieldError::render).collect()
    }

    #[test]
    fn signer_names_are_a_domain_and_a_path() {
        assert!(signer_errors("kubernetes.io/kube-apiserver-client").is_empty());
        assert!(signer_errors("example.com/ns.resource-name").is_empty());
        assert_eq!(
            signer_errors("bad"),
            [
                "spec.signerName: Invalid value: \"bad\": must be a fully qualified domain and path of the form 'example.com/signer-name'"
            ]
        );
        assert_eq!(
            signer_errors("local/signer"),
            [
                "spec.signerName: Invalid value: \"local\": should be a domain with at least two segments separated by dots"
            ]
        );
        let errors = signer_errors("Example.com/x");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("spec.signerName: Invalid value: \"Example.com\": validating label \"Example\": a lowercase RFC 1123 label"),
            "{errors:?}"
        );
    }

    #[test]
    fn a_request_that_is_not_pem_is_shown_as_go_bytes() {
        let mut errors = Vec::new();
        request("bm90", &mut errors);
        assert_eq!(
            errors.iter().map(FieldError::render).collect::<Vec<_>>(),
            [
                "spec.request: Invalid value: []byte{0x6e, 0x6f, 0x74}: PEM block type must be CERTIFICATE REQUEST"
            ]
        );
    }
}
