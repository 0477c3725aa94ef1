//! Go's duration text (`1h2m3.5s`), as Kubernetes flags, query
//! parameters and API fields write durations.

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
