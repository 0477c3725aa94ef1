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
