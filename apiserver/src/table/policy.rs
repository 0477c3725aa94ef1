//! PodDisruptionBudgets: `NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED
//! DISRUPTIONS AGE`, the bound a budget does not set shown as `N/A`.

use serde_json::Value;

use super::columns::{Column, Printer, at, int, name_age_printer};

pub(crate) static PODDISRUPTIONBUDGETS: Printer = name_age_printer!(
    [
        Column::string(
            "Min Available",
            "How many of the selected pods (or what percentage) must stay available.",
        ),
        Column::string(
            "Max Unavailable",
            "How many of the selected pods (or what percentage) may be unavailable.",
        ),
        Column::integer(
            "Allowed Disruptions",
            "How many pods may be evicted now, as last counted.",
        ),
    ],
    |pdb, _| {
        vec![
            Value::from(bound(pdb, "spec/minAvailable")),
            Value::from(bound(pdb, "spec/maxUnavailable")),
            Value::from(int(pdb, "status/disruptionsAllowed")),
        ]
    },
);

/// A number or a percentage as written, `N/A` when unset.
fn bound(pdb: &Value, path: &str) -> String {
    match at(pdb, path) {
        Some(Value::String(percent)) => percent.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "N/A".into(),
    }
}
