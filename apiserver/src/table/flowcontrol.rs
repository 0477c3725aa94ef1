//! FlowSchemas and PriorityLevelConfigurations, with upstream's columns.

use serde_json::Value;

use super::columns::{Column, Printer, age, at, list, name, name_age_printer, text_cell};

pub(crate) static FLOW_SCHEMAS: Printer = Printer {
    columns: &[
        Column::NAME,
        Column::string(
            "PriorityLevel",
            "The priority level configuration this schema's requests go to",
        ),
        Column::string("MatchingPrecedence", "Lower values are matched first"),
        Column::string("DistinguisherMethod", "How requests are split into flows"),
        Column::AGE,
        Column::string(
            "MissingPL",
            "Whether the referenced priority level is missing (the Dangling condition)",
        ),
    ],
    cells: |schema, now| {
        let missing = list(schema, "status/conditions")
            .iter()
            .find(|c| c["type"] == "Dangling")
            .and_then(|c| c["status"].as_str())
            .unwrap_or("?");
        vec![
            name(schema),
            text_cell(schema, "spec/priorityLevelConfiguration/name", ""),
            at(schema, "spec/matchingPrecedence")
                .cloned()
                .unwrap_or(Value::from(0)),
            text_cell(schema, "spec/distinguisherMethod/type", "<none>"),
            age(schema, now),
            Value::from(missing),
        ]
    },
};

pub(crate) static PRIORITY_LEVELS: Printer = name_age_printer!(
    [
        Column::string("Type", "Exempt or Limited"),
        Column::string(
            "NominalConcurrencyShares",
            "The level's share of the server's concurrency limit",
        ),
        Column::string("Queues", "Number of queues"),
        Column::string("HandSize", "Queues a flow is dealt"),
        Column::string("QueueLengthLimit", "Requests one queue may hold"),
    ],
    |level, _| {
        let none = || Value::from("<none>");
        let field = |path: &str| at(level, path).cloned().unwrap_or_else(none);
        let limited = at(level, "spec/limited").is_some_and(Value::is_object);
        let queuing = "spec/limited/limitResponse/queuing";
        vec![
            text_cell(level, "spec/type", ""),
            if limited {
                field("spec/limited/nominalConcurrencyShares")
            } else {
                none()
            },
            field(&format!("{queuing}/queues")),
            field(&format!("{queuing}/handSize")),
            field(&format!("{queuing}/queueLengthLimit")),
        ]
    },
);
