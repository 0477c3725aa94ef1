//! Upstream's defaulting, type by type: each case creates a representative
//! object (minimal, or with nested optional parts left out), reads it back,
//! and compares the defaulted fields with what kube-apiserver v1.33's
//! defaulting functions give for the same input. Values are compared at
//! JSON pointers; `Value::Null` means upstream writes nothing there.

mod core;
mod groups;
mod workloads;

use http::StatusCode;
use serde_json::Value;

use crate::harness::{Client, TestServer};

/// One input and the defaults upstream gives it.
pub struct Case {
    /// What the case shows.
    pub what: &'static str,
    /// The collection the object is created in.
    pub path: &'static str,
    pub body: Value,
    /// (JSON pointer, upstream's value there; null: absent).
    pub want: Vec<(&'static str, Value)>,
}

/// Creates every case's object and checks the create response and the
/// stored object alike; reports every mismatch at once.
pub async fn run(cases: Vec<Case>) {
    let s = TestServer::new().await;
    let mut failures = Vec::new();
    for case in cases {
        let name = case.body["metadata"]["name"].as_str().unwrap().to_string();
        let (code, created) = s.post(case.path, case.body.clone()).await;
        if code != StatusCode::CREATED {
            failures.push(format!("{}: create answered {code}: {created}", case.what));
            continue;
        }
        let stored = s.get_ok(&format!("{}/{name}", case.path)).await;
        for (label, object) in [("created", &created), ("stored", &stored)] {
            for (pointer, want) in &case.want {
                let got = object.pointer(pointer).cloned().unwrap_or(Value::Null);
                if &got != want {
                    failures.push(format!(
                        "{} ({label}): {pointer} is {got}, upstream: {want}",
                        case.what
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
