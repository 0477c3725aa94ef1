//! Ages and durations as kubectl prints them ("45s", "3m20s", "5h2m", "12d").

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// A duration in seconds, shortened the way upstream's human-readable
/// durations are: more precision for short spans, less for long ones.
pub(crate) fn human_duration(seconds: i64) -> String {
    // Clocks that disagree by a second still count as "now".
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return with_rest(minutes, "m", seconds % 60, "s");
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return with_rest(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return with_rest(days, "d", hours % 24, "h");
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        return with_rest(years, "y", days % 365, "d");
    }
    format!("{years}y")
}

/// `big` of `big_unit`, followed by `rest` of `small_unit` unless that is
/// zero: "3m20s", "5h".
fn with_rest(big: i64, big_unit: &str, rest: i64, small_unit: &str) -> String {
    if rest == 0 {
        format!("{big}{big_unit}")
    } else {
        format!("{big}{big_unit}{rest}{small_unit}")
    }
}

/// Seconds from the RFC 3339 time in `value` until `now`, if it is one.
pub(super) fn seconds_since(value: &Value, now: Timestamp) -> Option<i64> {
    let then: Timestamp = value.as_str()?.parse().ok()?;
    Some(now.as_second() - then.as_second())
}

/// The age of a timestamp as kubectl shows it, `<unknown>` when absent.
pub(super) fn age(value: &Value, now: Timestamp) -> String {
    seconds_since(value, now).map_or_else(|| "<unknown>".to_string(), human_duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_lose_precision_as_they_grow() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 2 * 60, "5h2m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (2 * 86400, "2d"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (30 * 86400, "30d"),
            (730 * 86400, "2y"),
            (800 * 86400, "2y70d"),
            (3000 * 86400, "8y"),
        ];
        for (seconds, want) in cases {
            assert_eq!(human_duration(seconds), want, "{seconds}s");
        }
    }
}
