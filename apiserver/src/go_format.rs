//! Text as Go's `fmt` and `time` packages print it — quoted strings and
//! durations — for messages and fields that must read as upstream's
//! (RBAC and Pod Security refusals, `metav1.Duration`s).

// Quoting is shared with the node's TOML writer, and duration text with the
// node's events, so both live in skiff-common.
pub(crate) use skiff_common::duration::format_go_duration as go_duration;
pub(crate) use skiff_common::quote::go_quote;

/// A list of strings as Go's `%q` prints a `[]string`: `["a" "b"]`.
pub(crate) fn go_quoted_list(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|s| go_quote(s)).collect();
    format!("[{}]", items.join(" "))
}

/// A decoded JSON value as Go's `%v` prints the `map[string]interface{}`
/// it unmarshals into: `map[a:1 b:[x y]]`, keys sorted, strings bare,
/// null as `<nil>`.
pub(crate) fn go_value(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_value).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(entries) => {
            let mut entries: Vec<(&String, &Value)> = entries.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let entries: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{k}:{}", go_value(v)))
                .collect();
            format!("map[{}]", entries.join(" "))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn values_print_as_go_prints_unmarshalled_json() {
        let patch =
            json!({"spec": {"hard": {"pods": "ten", "cpu": 2}, "scopes": ["A", null, true]}});
        assert_eq!(
            super::go_value(&patch),
            "map[spec:map[hard:map[cpu:2 pods:ten] scopes:[A <nil> true]]]"
        );
    }
}
