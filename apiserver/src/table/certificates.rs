//! CertificateSigningRequests: `NAME AGE SIGNERNAME REQUESTOR
//! REQUESTEDDURATION CONDITION`, the condition as kubectl users read it
//! (`Pending`, `Approved,Issued`, `Denied`, with `,Failed` when signing failed).

use serde_json::Value;

use super::columns::{Column, Printer, age, at, list, name, or_none, text, text_cell};

pub(crate) static CERTIFICATESIGNINGREQUESTS: Printer = Printer {
    columns: &[
        Column::NAME,
        Column::AGE,
        Column::string("SignerName", "Who is asked to sign the request."),
        Column::string("Requestor", "The user who made the request."),
        Column::string(
            "RequestedDuration",
            "How long the requested certificate should be valid.",
        ),
        Column::string(
            "Condition",
            "Whether the request is pending, approved, denied or failed, and issued.",
        ),
    ],
    cells: |csr, now| {
        let duration = at(csr, "spec/expirationSeconds")
            .and_then(Value::as_i64)
            .map(super::human_duration)
            .unwrap_or_default();
        vec![
            name(csr),
            age(csr, now),
            text_cell(csr, "spec/signerName", ""),
            text_cell(csr, "spec/username", ""),
            or_none(duration),
            Value::from(condition(csr)),
        ]
    },
};

/// Denied over Approved over Pending, then `,Failed` and `,Issued`.
fn condition(csr: &Value) -> String {
    let has = |kind: &str| {
        list(csr, "status/conditions")
            .iter()
            .any(|c| text(c, "type") == Some(kind))
    };
    let mut shown = if has("Denied") {
        "Denied".to_string()
    } else if has("Approved") {
        "Approved".to_string()
    } else {
        "Pending".to_string()
    };
    if has("Failed") {
        shown.push_str(",Failed");
    }
    if text(csr, "status/certificate").is_some_and(|c| !c.is_empty()) {
        shown.push_str(",Issued");
    }
    shown
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_condition_reads_as_kubectl_shows_it() {
        let csr = |conditions: Value, certificate: &str| json!({"status": {"conditions": conditions, "certificate": certificate}});
        assert_eq!(condition(&json!({})), "Pending");
        let approved = json!([{"type": "Approved", "status": "True"}]);
        assert_eq!(condition(&csr(approved.clone(), "")), "Approved");
        assert_eq!(condition(&csr(approved, "LS0t")), "Approved,Issued");
        let denied = json!([{"type": "Approved"}, {"type": "Denied"}]);
        assert_eq!(condition(&csr(denied, "")), "Denied");
        let failed = json!([{"type": "Approved"}, {"type": "Failed"}]);
        assert_eq!(condition(&csr(failed, "")), "Approved,Failed");
    }

    #[test]
    fn a_row_names_signer_requestor_and_duration() {
        let csr = json!({"metadata": {"name": "node-csr"},
            "spec": {"signerName": "kubernetes.io/kubelet-serving", "username": "system:node:a",
                "expirationSeconds": 3600}});
        let cells = (CERTIFICATESIGNINGREQUESTS.cells)(&csr, k8s_openapi::jiff::Timestamp::now());
        assert_eq!(
            cells[2..],
            [
                json!("kubernetes.io/kubelet-serving"),
                json!("system:node:a"),
                json!("60m"),
                json!("Pending")
            ]
        );
    }
}
