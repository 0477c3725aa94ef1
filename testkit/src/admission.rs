//! What the fake admission webhooks of the API server's and the CLI's
//! tests send back.

use serde_json::{Value, json};

/// The `admission.k8s.io/v1` AdmissionReview answering `review` with
/// `response`, which gets the request's uid as the API server requires.
pub fn review_answer(review: &Value, mut response: Value) -> Value {
    response["uid"] = review["request"]["uid"].clone();
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}
