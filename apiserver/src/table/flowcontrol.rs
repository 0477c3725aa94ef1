//! FlowSchemas and PriorityLevelConfigurations, with upstream's columns.

use serde_json::Value;

use super::columns::{Column, Printer, age, at, list, name, name_age_printer, text_cell};

pub(crate) static FLOW_SCHEMAS: Printer = Printer {
    columns: &[
        Column::NAME,
        Column::new(
            "PriorityLevel",
            "string",
            "The priority level configuration this schema's requests go to",
        ),
        Column::new(
            "MatchingPrecedence",
            "string",
            "Lower values are matched first",
        ),
        Column::new(
            "DistinguisherMethod",
            "string",
            "How requests are split into flows",
        ),
        Column::AGE,
        Column::new(
            "MissingPL",
            "string",
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
        Column::new("Type", "string", "Exempt or Limited"),
        Column::new(
            "NominalConcurrencyShares",
            "string",
            "The level's share of the server's concurrency limit",
        ),
        Column::new("Queues", "string", "Number of queues"),
        Column::new("HandSize", "string", "Queues a flow is dealt"),
        Column::new("QueueLengthLimit", "string", "Requests one queue may hold"),
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
