//! `metadata.managedFields`: one entry per manager, operation (and, for
//! updates, apiVersion) and subresource, each holding the set of fields that
//! writer owns.

use serde_json::{Value, json};

use super::set::FieldSet;

/// How a manager wrote its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Server-side apply: the manager states the fields it wants.
    Apply,
    /// Create, update or non-apply patch: the manager owns what it changed.
    Update,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Who is writing: the identity of a managedFields entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer {
    pub manager: String,
    pub operation: Operation,
    /// The version the writer spoke (`v1`, `apps/v1`).
    pub api_version: String,
    pub subresource: Option<String>,
}

impl Writer {
    /// Whether `entry` belongs to this writer. Appliers keep one entry
    /// whatever version they apply in; updaters have one per version.
    fn owns(&self, entry: &Entry) -> bool {
        entry.manager == self.manager
            && entry.operation == self.operation
            && entry.subresource == self.subresource
            && (self.operation == Operation::Apply || entry.api_version == self.api_version)
    }
}

/// One managedFields entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub subresource: Option<String>,
    /// RFC 3339, seconds precision.
    pub time: Option<String>,
    pub fields: FieldSet,
}

impl Entry {
    /// The manager as upstream names it in conflict messages: `"name"`,
    /// with `with subresource "scale"` when set, and for an updater (not an
    /// applier, whose identity leaves the version out) `using apps/v1`.
    pub fn describe(&self) -> String {
        let mut named = skiff_common::quote::go_quote(&self.manager);
        if let Some(sub) = &self.subresource {
            named.push_str(" with subresource ");
            named.push_str(&skiff_common::quote::go_quote(sub));
        }
        if self.operation == Operation::Update {
            named.push_str(" using ");
            named.push_str(&self.api_version);
        }
        named
    }

    fn decode(value: &Value) -> Option<Entry> {
        let text = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_string);
        let operation = match value.get("operation").and_then(Value::as_str) {
            Some("Apply") => Operation::Apply,
            Some("Update") => Operation::Update,
            // An entry without an operation (as `[{}]`, upstream's way of
            // clearing managedFields) owns nothing.
            None => Operation::Update,
            Some(_) => return None,
        };
        if text("fieldsType").is_some_and(|t| t != "FieldsV1") {
            return None;
        }
        let fields = match value.get("fieldsV1") {
            Some(v) => FieldSet::from_fields_v1(v).ok()?,
            None => FieldSet::new(),
        };
        Some(Entry {
            manager: text("manager").unwrap_or_default(),
            operation,
            api_version: text("apiVersion").unwrap_or_default(),
            subresource: text("subresource").filter(|s| !s.is_empty()),
            time: text("time"),
            fields,
        })
    }

    fn encode(&self) -> Value {
        let mut entry = json!({
            "manager": self.manager,
            "operation": self.operation.as_str(),
            "apiVersion": self.api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": self.fields.to_fields_v1(),
        });
        if let Some(time) = &self.time {
            entry["time"] = json!(time);
        }
        if let Some(sub) = &self.subresource {
            entry["subresource"] = json!(sub);
        }
        entry
    }
}

/// All entries of one object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Managers {
    pub entries: Vec<Entry>,
}

impl Managers {
    /// Reads `metadata.managedFields`; `None` when absent, empty or not
    /// well-formed (upstream then falls back to the stored entries).
    pub fn decode(value: Option<&Value>) -> Option<Managers> {
        let list = value?.as_array().filter(|l| !l.is_empty())?;
        let entries = list.iter().map(Entry::decode).collect::<Option<Vec<_>>>()?;
        Some(Managers { entries })
    }

    /// The managedFields list, sorted as upstream sorts it (Apply entries
    /// first, then by time and name); entries owning nothing are left out.
    pub fn encode(&self) -> Value {
        let mut entries: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| !e.fields.is_empty())
            .collect();
        entries.sort_by(|a, b| {
            (
                a.operation,
                &a.time,
                &a.manager,
                &a.api_version,
                &a.subresource,
            )
                .cmp(&(
                    b.operation,
                    &b.time,
                    &b.manager,
                    &b.api_version,
                    &b.subresource,
                ))
        });
        Value::Array(entries.into_iter().map(Entry::encode).collect())
    }

    pub fn is_empty(&self) -> bool {
        self.entries.iter().all(|e| e.fields.is_empty())
    }

    /// The writer's entry, if it has one.
    pub fn get(&self, writer: &Writer) -> Option<&Entry> {
        self.entries.iter().find(|e| writer.owns(e))
    }

    /// The writer's entry, created empty when missing.
    pub fn entry(&mut self, writer: &Writer) -> &mut Entry {
        let index = match self.entries.iter().position(|e| writer.owns(e)) {
            Some(i) => i,
            None => {
                self.entries.push(Entry {
                    manager: writer.manager.clone(),
                    operation: writer.operation,
                    api_version: writer.api_version.clone(),
                    subresource: writer.subresource.clone(),
                    time: None,
                    fields: FieldSet::new(),
                });
                self.entries.len() - 1
            }
        };
        &mut self.entries[index]
    }

    /// Every field some manager owns.
    pub fn all_fields(&self) -> FieldSet {
        self.entries.iter().fold(FieldSet::new(), |mut acc, e| {
            acc.union_with(&e.fields);
            acc
        })
    }

    /// Takes `fields` away from every manager but `except`.
    pub fn release(&mut self, fields: &FieldSet, except: Option<&Writer>) {
        for entry in &mut self.entries {
            if except.is_some_and(|w| w.owns(entry)) {
                continue;
            }
            entry.fields = entry.fields.difference(fields);
        }
    }

    /// Drops entries that own nothing.
    pub fn prune(&mut self) {
        self.entries.retain(|e| !e.fields.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_sorts_apply_first() {
        let stored = json!([
            {"manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1",
             "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}},
            {"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
             "time": "2026-01-02T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:b": {}}}},
            {"manager": "gone", "operation": "Update", "apiVersion": "v1",
             "time": "2026-01-02T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {}}
        ]);
        let managers = Managers::decode(Some(&stored)).unwrap();
        let encoded = managers.encode();
        let names: Vec<&str> = encoded
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["kubectl", "kubectl-edit"]);
        assert_eq!(encoded[1], stored[0]);
        assert_eq!(managers.entries[0].describe(), "\"kubectl-edit\" using v1");
        // An applier's identity leaves its version out, as upstream's does.
        assert_eq!(managers.entries[1].describe(), "\"kubectl\"");
        let scaler = Entry {
            subresource: Some("scale".into()),
            ..managers.entries[0].clone()
        };
        assert_eq!(
            scaler.describe(),
            "\"kubectl-edit\" with subresource \"scale\" using v1"
        );
    }

    #[test]
    fn malformed_or_empty_lists_decode_to_none() {
        assert!(Managers::decode(None).is_none());
        assert!(Managers::decode(Some(&json!([]))).is_none());
        assert!(Managers::decode(Some(&json!([{"operation": "Bogus"}]))).is_none());
        assert!(Managers::decode(Some(&json!([{"fieldsV1": {"x": {}}}]))).is_none());
        let reset = Managers::decode(Some(&json!([{}]))).unwrap();
        assert!(reset.is_empty(), "[{{}}] clears managedFields as upstream");
    }

    #[test]
    fn appliers_keep_one_entry_across_versions() {
        let mut managers = Managers::default();
        let v1 = Writer {
            manager: "m".into(),
            operation: Operation::Apply,
            api_version: "v1".into(),
            subresource: None,
        };
        managers.entry(&v1).api_version = "v1".into();
        let v2 = Writer {
            api_version: "v2".into(),
            ..v1.clone()
        };
        assert!(managers.get(&v2).is_some());
        let update = Writer {
            operation: Operation::Update,
            ..v2
        };
        assert!(managers.get(&update).is_none());
    }
}
