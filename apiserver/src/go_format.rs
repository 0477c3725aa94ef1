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

/// A slice of strings (or of a named string type, `elem`) as Go's `%#v`
/// prints it: `[]string{"a", "b"}`, as upstream shows a whole list in an
/// Invalid message.
pub(crate) fn go_string_slice<'a>(elem: &str, items: impl IntoIterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = items.into_iter().map(go_quote).collect();
    format!("[]{elem}{{{}}}", quoted.join(", "))
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

/// A label selector as Go's `%#v` prints `metav1.LabelSelector`, which is
/// how upstream shows one in an Invalid message ("field is immutable").
pub(crate) fn go_label_selector(selector: &serde_json::Value) -> String {
    let labels = go_string_map(&selector["matchLabels"]);
    let requirements: Vec<String> = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                go_quote(r["key"].as_str().unwrap_or_default()),
                go_quote(r["operator"].as_str().unwrap_or_default()),
                string_slice(&r["values"]),
            )
        })
        .collect();
    let expressions = if selector["matchExpressions"].is_array() {
        format!(
            "[]v1.LabelSelectorRequirement{{{}}}",
            requirements.join(", ")
        )
    } else {
        "[]v1.LabelSelectorRequirement(nil)".to_string()
    };
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{expressions}}}")
}

/// A JSON object of strings as Go's `%#v` prints a `map[string]string`
/// (keys sorted; `nil` when absent).
pub(crate) fn go_string_map(map: &serde_json::Value) -> String {
    let Some(entries) = map.as_object() else {
        return "map[string]string(nil)".to_string();
    };
    let mut entries: Vec<(&String, &serde_json::Value)> = entries.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let entries: Vec<String> = entries
        .into_iter()
        .map(|(k, v)| {
            format!(
                "{}:{}",
                go_quote(k),
                go_quote(v.as_str().unwrap_or_default())
            )
        })
        .collect();
    format!("map[string]string{{{}}}", entries.join(", "))
}

/// Node selector terms as Go's `%#v` prints the internal
/// `[]core.NodeSelectorTerm` upstream's pod validation shows.
pub(crate) fn go_node_selector_terms(terms: &serde_json::Value) -> String {
    go_slice("core.NodeSelectorTerm", terms, go_node_selector_term)
}

/// One node selector term as Go's `%#v` prints `core.NodeSelectorTerm`.
pub(crate) fn go_node_selector_term(term: &serde_json::Value) -> String {
    let requirements = |field: &str| {
        go_slice("core.NodeSelectorRequirement", &term[field], |r| {
            format!(
                "core.NodeSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                go_quote(r["key"].as_str().unwrap_or_default()),
                go_quote(r["operator"].as_str().unwrap_or_default()),
                string_slice(&r["values"]),
            )
        })
    };
    format!(
        "core.NodeSelectorTerm{{MatchExpressions:{}, MatchFields:{}}}",
        requirements("matchExpressions"),
        requirements("matchFields")
    )
}

/// A JSON array as Go's `%#v` prints a slice of `elem`, each item by
/// `item` (`nil` when absent, as a field Go decoded nothing into).
fn go_slice(
    elem: &str,
    list: &serde_json::Value,
    item: impl Fn(&serde_json::Value) -> String,
) -> String {
    let Some(items) = list.as_array() else {
        return format!("[]{elem}(nil)");
    };
    let items: Vec<String> = items.iter().map(item).collect();
    format!("[]{elem}{{{}}}", items.join(", "))
}

/// A JSON array of strings as Go's `%#v` prints a `[]string`.
fn string_slice(list: &serde_json::Value) -> String {
    let Some(items) = list.as_array() else {
        return "[]string(nil)".to_string();
    };
    let items: Vec<String> = items
        .iter()
        .map(|v| go_quote(v.as_str().unwrap_or_default()))
        .collect();
    format!("[]string{{{}}}", items.join(", "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn label_selectors_print_as_go_prints_them() {
        assert_eq!(
            super::go_label_selector(&json!({"matchLabels": {"b": "2", "a": "1"}})),
            "v1.LabelSelector{MatchLabels:map[string]string{\"a\":\"1\", \"b\":\"2\"}, \
             MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"
        );
        assert_eq!(
            super::go_label_selector(&json!({"matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["x", "y"]},
                {"key": "gone", "operator": "DoesNotExist"}]})),
            "v1.LabelSelector{MatchLabels:map[string]string(nil), \
             MatchExpressions:[]v1.LabelSelectorRequirement{\
             v1.LabelSelectorRequirement{Key:\"tier\", Operator:\"In\", Values:[]string{\"x\", \"y\"}}, \
             v1.LabelSelectorRequirement{Key:\"gone\", Operator:\"DoesNotExist\", Values:[]string(nil)}}}"
        );
    }

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
