//! Column definitions and the helpers cell functions share.

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use skiff_common::amount::Amount;

/// Upstream's description of every column printed from
/// `metadata.creationTimestamp` (AGE, CREATED AT, a CRD's default AGE).
pub(crate) const CREATION_TIMESTAMP: &str =
    "CreationTimestamp is a timestamp representing the server time when this object was created.";

/// One column of a Table, as announced in `columnDefinitions`.
#[derive(Debug)]
pub(crate) struct Column {
    pub name: &'static str,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub kind: &'static str,
    /// `name` for the NAME column; empty otherwise.
    pub format: &'static str,
    pub description: &'static str,
    /// 0: always shown; 1: shown with `-o wide`.
    pub priority: i32,
}

impl Column {
    /// A column of the given `kind`, as `columnDefinitions` names it.
    const fn new(name: &'static str, kind: &'static str, description: &'static str) -> Self {
        Self {
            name,
            kind,
            format: "",
            description,
            priority: 0,
        }
    }

    /// A column of text.
    pub(crate) const fn string(name: &'static str, description: &'static str) -> Self {
        Self::new(name, "string", description)
    }

    /// A column of whole numbers.
    pub(crate) const fn integer(name: &'static str, description: &'static str) -> Self {
        Self::new(name, "integer", description)
    }

    /// A column of `true`/`false`.
    pub(crate) const fn boolean(name: &'static str, description: &'static str) -> Self {
        Self::new(name, "boolean", description)
    }

    /// This column, shown with `-o wide` only.
    pub(crate) const fn wide(self) -> Self {
        Self {
            priority: 1,
            ..self
        }
    }

    pub(crate) const NAME: Column = Column {
        name: "Name",
        kind: "string",
        format: "name",
        description: "Name must be unique within a namespace.",
        priority: 0,
    };

    pub(crate) const AGE: Column = Column::string("Age", CREATION_TIMESTAMP);

    /// The creation time itself rather than an age, as upstream prints
    /// Roles and CustomResourceDefinitions.
    pub(crate) const CREATED_AT: Column = Column::new("Created At", "date", CREATION_TIMESTAMP);

    pub(crate) fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// The cells of a row between its NAME and AGE (see [`name_age_printer`]);
/// ages are counted to the time given (now).
pub(crate) type OwnCells = fn(&Value, Timestamp) -> Vec<Value>;

/// How one resource is printed.
#[derive(Debug)]
pub(crate) struct Printer {
    /// The column definitions, in order.
    pub columns: &'static [Column],
    /// The cells of an object's row; ages are counted to the time given (now).
    pub cells: fn(&Value, Timestamp) -> Vec<Value>,
}

/// A [`Printer`] of `NAME <columns> AGE`, the `columns`' cells being what
/// `own` (an [`OwnCells`]) gives for the row's object: the layout most
/// kinds print in, written once so each printer states only its own columns.
macro_rules! name_age_printer {
    ([$($column:expr),+ $(,)?], $own:expr $(,)?) => {
        $crate::table::columns::Printer {
            columns: &[
                $crate::table::columns::Column::NAME,
                $($column,)+
                $crate::table::columns::Column::AGE,
            ],
            cells: |object, now| {
                let own: $crate::table::columns::OwnCells = $own;
                $crate::table::columns::name_age_row(object, now, own(object, now))
            },
        }
    };
}
pub(crate) use name_age_printer;

/// A [`Printer`] of `NAME <column> AGE`, the one column's cell being
/// `$cell` of the row's object (bound to `$object`): the layout of every kind
/// with a single figure worth a column.
macro_rules! one_column_printer {
    ($column:expr, |$object:ident| $cell:expr $(,)?) => {
        $crate::table::columns::name_age_printer!([$column], |$object, _| vec![$cell])
    };
}
pub(crate) use one_column_printer;

/// The string at `path` (keys separated by `/`), if there is one.
pub(crate) fn text<'a>(object: &'a Value, path: &str) -> Option<&'a str> {
    at(object, path)?.as_str()
}

/// The value at `path` (keys separated by `/`).
pub(crate) fn at<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('/').try_fold(object, |v, key| v.get(key))
}

/// The integer at `path`, 0 when absent (as Go's zero values print).
pub(crate) fn int(object: &Value, path: &str) -> i64 {
    at(object, path).and_then(Value::as_i64).unwrap_or(0)
}

/// The array at `path`, empty when absent.
pub(crate) fn list<'a>(object: &'a Value, path: &str) -> &'a [Value] {
    at(object, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The strings of the array at `path`, none when absent.
pub(crate) fn strings(object: &Value, path: &str) -> Vec<String> {
    list(object, path)
        .iter()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect()
}

/// The boolean at `path`, or `unset` (the field's default) when absent.
pub(crate) fn flag(object: &Value, path: &str, unset: bool) -> bool {
    at(object, path).and_then(Value::as_bool).unwrap_or(unset)
}

/// `first/second`, the strings at the two paths, when both are set: how a
/// reference (`namespace/name`, `apiVersion/kind`) prints.
pub(crate) fn joined(object: &Value, first: &str, second: &str) -> Option<String> {
    Some(format!(
        "{}/{}",
        text(object, first)?,
        text(object, second)?
    ))
}

/// Whether the object's deletion began (`metadata.deletionTimestamp` set):
/// what turns the status printers show into `Terminating`.
pub(crate) fn deleting(object: &Value) -> bool {
    at(object, "metadata/deletionTimestamp").is_some_and(|d| !d.is_null())
}

/// A quantity in upstream's canonical form ("1Gi" for "1024Mi"), as it
/// prints once stored; text that does not parse is shown as it is.
pub(crate) fn canonical(quantity: &str) -> String {
    Amount::parse(quantity).map_or_else(|| quantity.to_string(), |a| a.to_string())
}

/// The string at `path` as a cell, `unset` when absent: the field's
/// default as kubectl shows it, `""` for a field without one.
pub(crate) fn text_cell(object: &Value, path: &str, unset: &str) -> Value {
    Value::from(text(object, path).unwrap_or(unset))
}

pub(crate) fn name(object: &Value) -> Value {
    text_cell(object, "metadata/name", "")
}

pub(crate) fn age(object: &Value, now: Timestamp) -> Value {
    Value::from(super::age::age(
        at(object, "metadata/creationTimestamp").unwrap_or(&Value::Null),
        now,
    ))
}

/// A row of the object's name, its `own` cells, then its age: the layout
/// of [`name_age_printer`]'s printers and the start of a workload's row.
pub(crate) fn name_age_row(object: &Value, now: Timestamp, own: Vec<Value>) -> Vec<Value> {
    let mut row = vec![name(object)];
    row.extend(own);
    row.push(age(object, now));
    row
}

/// `<none>` for an empty string, as kubectl prints missing values.
pub(crate) fn or_none(value: impl Into<String>) -> Value {
    let value = value.into();
    Value::from(if value.is_empty() {
        "<none>".to_string()
    } else {
        value
    })
}

/// A label selector (`matchLabels` and `matchExpressions`) in its string form.
pub(crate) fn selector_string(selector: Option<&Value>) -> String {
    let Some(selector) = selector else {
        return String::new();
    };
    let mut parts = label_pairs(selector.get("matchLabels"));
    for expr in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = text(expr, "key").unwrap_or("");
        let values: Vec<&str> = list(expr, "values")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        parts.push(match text(expr, "operator").unwrap_or("") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other} ({})", values.join(",")),
        });
    }
    parts.sort();
    parts.join(",")
}

/// A map selector (`spec.selector` of Services and RCs) in its string form.
pub(crate) fn map_selector_string(selector: Option<&Value>) -> String {
    let mut parts = label_pairs(selector);
    parts.sort();
    parts.join(",")
}

/// `key=value` for each entry of a label map (none when it is not one).
fn label_pairs(map: Option<&Value>) -> Vec<String> {
    map.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default()
}

/// Container names and images of a pod template, comma separated.
pub(crate) fn containers_and_images(pod_spec: Option<&Value>) -> (String, String) {
    let containers = pod_spec.map(|s| list(s, "containers")).unwrap_or(&[]);
    let names: Vec<&str> = containers.iter().filter_map(|c| text(c, "name")).collect();
    let images: Vec<&str> = containers.iter().filter_map(|c| text(c, "image")).collect();
    (names.join(","), images.join(","))
}
