//! Text as Go's `fmt` and `time` packages print it — quoted strings and
//! durations — for messages and fields that must read as upstream's
//! (RBAC and Pod Security refusals, `metav1.Duration`s).

// Quoting is shared with the node's TOML writer, so it lives in skiff-common.
pub(crate) use skiff_common::quote::go_quote;

/// A list of strings as Go's `%q` prints a `[]string`: `["a" "b"]`.
pub(crate) fn go_quoted_list(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|s| go_quote(s)).collect();
    format!("[{}]", items.join(" "))
}

/// A duration in nanoseconds as Go prints it (`1h2m3.5s`, `150ms`, `0s`).
pub(crate) fn go_duration(ns: i64) -> String {
    if ns == 0 {
        return "0s".to_string();
    }
    let sign = if ns < 0 { "-" } else { "" };
    let u = ns.unsigned_abs();
    let body = if u < 1_000 {
        format!("{u}ns")
    } else if u < 1_000_000 {
        format!("{}µs", decimal(u, 1_000))
    } else if u < 1_000_000_000 {
        format!("{}ms", decimal(u, 1_000_000))
    } else {
        let secs = u / 1_000_000_000;
        let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
        let seconds = decimal(s * 1_000_000_000 + u % 1_000_000_000, 1_000_000_000);
        match (h, m) {
            (0, 0) => format!("{seconds}s"),
            (0, m) => format!("{m}m{seconds}s"),
            (h, m) => format!("{h}h{m}m{seconds}s"),
        }
    };
    format!("{sign}{body}")
}

/// `value / unit` with the fraction's trailing zeros dropped.
fn decimal(value: u64, unit: u64) -> String {
    let (whole, frac) = (value / unit, value % unit);
    if frac == 0 {
        return whole.to_string();
    }
    let digits = unit.ilog10() as usize;
    let frac = format!("{frac:0digits$}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}
