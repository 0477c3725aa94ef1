//! Table output for custom resources: NAME plus the version's
//! `additionalPrinterColumns` (AGE when it has none). Cells come from a
//! JSONPath subset: dotted fields with optional `[index]` steps, such as
//! `.spec.replicas`, `.status.conditions[0].type` or
//! `.metadata.creationTimestamp`; `date` columns print as ages.

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::status::FieldError;
use crate::table::{TableRequest, human_duration};

const COLUMN_TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];

/// One `additionalPrinterColumns` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    /// The column's header.
    pub name: String,
    /// `type`: `boolean`, `date`, `integer`, `number` or `string`.
    pub ty: String,
    /// The OpenAPI format, e.g. `int64`.
    pub format: String,
    /// A human-readable description.
    pub description: String,
    /// 0 for the default view; higher only with `-o wide`.
    pub priority: i64,
    /// The JSONPath the cell is read from.
    pub json_path: String,
}

impl PrinterColumn {
    pub(crate) fn parse(v: &Value) -> Self {
        let text = |k: &str| v[k].as_str().unwrap_or("").to_string();
        Self {
            name: text("name"),
            ty: text("type"),
            format: text("format"),
            description: text("description"),
            priority: v["priority"].as_i64().unwrap_or(0),
            json_path: text("jsonPath"),
        }
    }

    /// The AGE column a version without printer columns gets.
    fn age() -> Self {
        Self {
            name: "Age".into(),
            ty: "date".into(),
            format: String::new(),
            description: crate::table::columns::CREATION_TIMESTAMP.into(),
            priority: 0,
            json_path: ".metadata.creationTimestamp".into(),
        }
    }

    fn definition(&self) -> Value {
        json!({"name": self.name, "type": self.ty, "format": self.format,
            "description": self.description, "priority": self.priority})
    }

    fn cell(&self, object: &Value, now: Timestamp) -> Value {
        let Some(value) = lookup(object, &self.json_path) else {
            return Value::Null;
        };
        match (self.ty.as_str(), value) {
            ("date", Value::String(s)) => match s.parse::<Timestamp>() {
                Ok(t) => json!(human_duration(now.as_second() - t.as_second())),
                Err(_) => json!(s),
            },
            (_, Value::String(_) | Value::Number(_) | Value::Bool(_)) => value.clone(),
            (_, Value::Null) => Value::Null,
            (_, other) => json!(other.to_string()),
        }
    }
}

/// The value at a simple JSONPath (`.a.b[0].c`), if present.
pub(crate) fn lookup<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut current = object;
    for step in path
        .trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
    {
        let (field, indexes) = match step.find('[') {
            Some(i) => (&step[..i], &step[i..]),
            None => (step, ""),
        };
        if !field.is_empty() {
            current = current.get(field)?;
        }
        for index in indexes.split('[').filter(|s| !s.is_empty()) {
            let n: usize = index.trim_end_matches(']').parse().ok()?;
            current = current.get(n)?;
        }
    }
    Some(current)
}

/// Checks one printer column of a CRD version.
pub(crate) fn validate_column(column: &Value, path: &str, errors: &mut Vec<FieldError>) {
    if column["name"].as_str().is_none_or(str::is_empty) {
        errors.push(FieldError::required(format!("{path}.name"), ""));
    }
    match column["type"].as_str() {
        None | Some("") => errors.push(FieldError::required(format!("{path}.type"), "")),
        Some(t) if !COLUMN_TYPES.contains(&t) => errors.push(FieldError::not_supported(
            format!("{path}.type"),
            t,
            COLUMN_TYPES,
        )),
        _ => {}
    }
    match column["jsonPath"].as_str() {
        None | Some("") => errors.push(FieldError::required(format!("{path}.jsonPath"), "")),
        Some(p) if !p.starts_with('.') => errors.push(FieldError::invalid(
            format!("{path}.jsonPath"),
            p,
            "must be a simple json path starting with .",
        )),
        _ => {}
    }
}

/// The Table of custom objects for one version's columns.
pub(crate) fn table(columns: &[PrinterColumn], request: TableRequest<'_>) -> Value {
    let age = [PrinterColumn::age()];
    let columns = if columns.is_empty() {
        &age[..]
    } else {
        columns
    };
    let mut definitions = vec![json!({"name": "Name", "type": "string", "format": "name",
        "description": "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
        "priority": 0})];
    definitions.extend(columns.iter().map(PrinterColumn::definition));
    request.render(definitions, |object, now| {
        let mut cells = vec![object["metadata"]["name"].clone()];
        cells.extend(columns.iter().map(|c| c.cell(object, now)));
        cells
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::IncludeObject;

    #[test]
    fn columns_follow_json_paths_and_dates_print_as_ages() {
        let columns = vec![
            PrinterColumn::parse(
                &json!({"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}),
            ),
            PrinterColumn::parse(
                &json!({"name": "Phase", "type": "string", "jsonPath": ".status.phase"}),
            ),
            PrinterColumn::parse(
                &json!({"name": "First", "type": "string", "jsonPath": ".spec.items[0].name"}),
            ),
            PrinterColumn::parse(
                &json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),
            ),
        ];
        let w = json!({"metadata": {"name": "w1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"replicas": 3, "items": [{"name": "a"}]}});
        let now: Timestamp = "2026-01-01T02:00:00Z".parse().unwrap();
        let request = |objects, include| TableRequest {
            api_version: "meta.k8s.io/v1",
            objects,
            include,
            list_metadata: json!({}),
            now,
        };
        let t = table(
            &columns,
            request(std::slice::from_ref(&w), IncludeObject::None),
        );
        assert_eq!(t["rows"][0]["cells"], json!(["w1", 3, null, "a", "120m"]));
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["Name", "Replicas", "Phase", "First", "Age"]);
        let plain = table(
            &[],
            request(std::slice::from_ref(&w), IncludeObject::Metadata),
        );
        assert_eq!(plain["rows"][0]["cells"], json!(["w1", "120m"]));
        assert_eq!(plain["rows"][0]["object"]["metadata"]["name"], "w1");
    }
}
