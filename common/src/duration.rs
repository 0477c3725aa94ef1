//! Go's duration text (`1h2m3.5s`), as Kubernetes flags, query
//! parameters and API fields write durations, read and printed.

use std::time::Duration;

use crate::quote::go_quote;

/// Why a text is not a Go duration, in the words of Go's
/// `time.ParseDuration` (which upstream's messages carry on).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GoDurationError {
    /// Not numbers with units, or out of `time.Duration`'s range.
    #[error("time: invalid duration {}", go_quote(.0))]
    Invalid(String),
    /// A number with no unit after it (`30`).
    #[error("time: missing unit in duration {}", go_quote(.0))]
    MissingUnit(String),
    /// A unit Go does not know (`5x`).
    #[error("time: unknown unit {} in duration {}", go_quote(.unit), go_quote(.text))]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole duration as written.
        text: String,
    },
}

/// Nanoseconds in each unit Go's durations take.
fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        // Go takes the micro sign and the Greek mu alike.
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// A Go duration string in nanoseconds, as Go's `time.ParseDuration` reads
/// it: an optional sign, then numbers (with an optional fraction) each
/// followed by a unit (`-1h2m3.5s`, `300ms`), or `0` alone.
pub fn go_duration_nanos(text: &str) -> Result<i64, GoDurationError> {
    let invalid = || GoDurationError::Invalid(text.to_owned());
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let limit = 1u64 << 63;
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
        let whole_len = digits(rest);
        let (whole, after) = rest.split_at(whole_len);
        let (fraction, after) = match after.strip_prefix('.') {
            Some(after) => after.split_at(digits(after)),
            None => ("", after),
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err(invalid());
        }
        let unit_len = after
            .bytes()
            .take_while(|b| *b != b'.' && !b.is_ascii_digit())
            .count();
        if unit_len == 0 {
            return Err(GoDurationError::MissingUnit(text.to_owned()));
        }
        let (unit, after) = after.split_at(unit_len);
        let nanos = unit_nanos(unit).ok_or_else(|| GoDurationError::UnknownUnit {
            unit: unit.to_owned(),
            text: text.to_owned(),
        })?;
        let whole: u64 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| invalid())?
        };
        let mut value = whole
            .checked_mul(nanos)
            .filter(|v| *v <= limit)
            .ok_or_else(invalid)?;
        // Go keeps the fraction's digits while they fit in 63 bits and
        // scales them by the unit in floating point.
        let (mut f, mut scale) = (0u64, 1f64);
        for b in fraction.bytes() {
            match f
                .checked_mul(10)
                .and_then(|x| x.checked_add(u64::from(b - b'0')))
            {
                Some(next) if next < limit => {
                    f = next;
                    scale *= 10.0;
                }
                _ => break,
            }
        }
        if f > 0 {
            value += (f as f64 * (nanos as f64 / scale)) as u64;
            if value > limit {
                return Err(invalid());
            }
        }
        total = total
            .checked_add(value)
            .filter(|t| *t <= limit)
            .ok_or_else(invalid)?;
        rest = after;
    }
    if negative {
        // -(1 << 63) is the one value only a negative duration reaches.
        return Ok((total as i128).wrapping_neg() as i64);
    }
    i64::try_from(total).map_err(|_| invalid())
}

/// A non-negative Go duration string (see [`go_duration_nanos`]); `None`
/// when it is not one. (How `?timeout=`, `skiff server --request-timeout`
/// and the metrics API's `window` are read.)
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let nanos = u64::try_from(go_duration_nanos(text).ok()?).ok()?;
    Some(Duration::from_nanos(nanos))
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
        assert_eq!(parse_go_duration("+.5s"), Some(Duration::from_millis(500)));
    }

    #[test]
    fn refuses_what_go_refuses_in_gos_words() {
        let cases = [
            ("", "time: invalid duration \"\""),
            ("-", "time: invalid duration \"-\""),
            (".s", "time: invalid duration \".s\""),
            ("30", "time: missing unit in duration \"30\""),
            ("1h30", "time: missing unit in duration \"1h30\""),
            ("5x", "time: unknown unit \"x\" in duration \"5x\""),
            ("5 s", "time: unknown unit \" s\" in duration \"5 s\""),
            ("9999999999h", "time: invalid duration \"9999999999h\""),
        ];
        for (text, want) in cases {
            let error = go_duration_nanos(text).expect_err(text);
            assert_eq!(error.to_string(), want, "{text:?}");
        }
        assert_eq!(go_duration_nanos("-1m30s"), Ok(-90_000_000_000));
        assert_eq!(go_duration_nanos("1.5\u{3bc}s"), Ok(1_500));
        assert_eq!(go_duration_nanos("2h45m"), Ok(9_900_000_000_000));
        assert_eq!(go_duration_nanos("-9223372036854775808ns"), Ok(i64::MIN));
        assert_eq!(
            go_duration_nanos("9223372036854775808ns"),
            Err(GoDurationError::Invalid("9223372036854775808ns".into()))
        );
    }
}
