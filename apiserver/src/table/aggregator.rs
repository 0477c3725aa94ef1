//! APIServices with upstream's columns: where requests go (`Local` or the
//! Service) and whether it is available (`False (Reason)` when not).

use serde_json::Value;

use super::columns::{Column, Printer, joined, name_age_printer};

pub(crate) static API_SERVICES: Printer = name_age_printer!(
    [
        Column::string(
            "Service",
            "The reference to the service that hosts this API endpoint.",
        ),
        Column::string("Available", "Whether this service is available."),
    ],
    |service, _| {
        let target = joined(service, "spec/service/namespace", "spec/service/name")
            .unwrap_or_else(|| "Local".to_string());
        vec![Value::from(target), Value::from(available(service))]
    },
);

/// `True`, `False (Reason)`, or `Unknown` without the condition.
fn available(service: &Value) -> String {
    let condition = service["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"));
    match condition {
        None => "Unknown".to_string(),
        Some(c) if c["status"] == "True" => "True".to_string(),
        Some(c) => format!(
            "{} ({})",
            c["status"].as_str().unwrap_or("Unknown"),
            c["reason"].as_str().unwrap_or("")
        ),
    }
}
