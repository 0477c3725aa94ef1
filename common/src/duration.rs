//! Go's duration text (`1h2m3.5s`), as Kubernetes flags, query
//! parameters and API fields write durations, read and printed.

use std::time::Duration;

/// A non-negative Go duration string: numbers with units h, m, s, ms, us
/// (or µs) and ns, concatenated (`1h2m3.5s`). `None` when it is not one.
/// (How `?timeout=`, `skiff server --request-timeout` and the metrics
/// API's `window` are read.)
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    if text == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_end == 0 {
            return None;
        }
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit_end..];
        total += number * seconds;
    }
    Duration::try_from_secs_f64(total).ok()
}

/// A duration in nanoseconds as Go prints it (`1h2m3.5s`, `150ms`, `0s`).
pub fn format_go_duration(ns: i64) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_go_durations() {
        assert_eq!(parse_go_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_go_duration("30"), None);
        assert_eq!(parse_go_duration("s"), None);
        assert_eq!(parse_go_duration(""), None);
        assert_eq!(parse_go_duration("-5s"), None);
        assert_eq!(parse_go_duration("5 s"), None);
    }
}
