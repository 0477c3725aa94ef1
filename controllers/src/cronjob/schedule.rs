//! Cron schedules as CronJobs use them: five fields (minute, hour, day of
//! month, month, day of week) with lists, ranges, steps and names, the
//! `@hourly`-style shorthands, and a time zone (`spec.timeZone` or a
//! `CRON_TZ=`/`TZ=` prefix). Times are computed in that zone, so schedules
//! follow daylight-saving changes.

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan, Zoned};

/// Why a schedule could not be parsed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum ScheduleError {
    /// Not five fields (or a known shorthand).
    #[error("expected exactly 5 fields, found {0}: {1:?}")]
    FieldCount(usize, String),
    /// A field did not parse.
    #[error("invalid {field} field {value:?}")]
    Field {
        /// Which of the five fields (minute, hour, ...).
        field: &'static str,
        /// The field as written.
        value: String,
    },
    /// The time zone is unknown.
    #[error("unknown time zone {0:?}")]
    TimeZone(String),
}

/// A parsed schedule.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// True when day-of-month or day-of-week was `*`/`?`: then both must
    /// match; otherwise either may (cron's rule).
    day_star: bool,
    zone: TimeZone,
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

fn value(text: &str, names: &[&str], offset: u32) -> Option<u32> {
    if let Ok(n) = text.parse::<u32>() {
        return Some(n);
    }
    names
        .iter()
        .position(|n| n.eq_ignore_ascii_case(text))
        .map(|i| i as u32 + offset)
}

/// Parses one field into a bit set over [min, max]; also says whether it
/// was a star.
fn field(
    text: &str,
    name: &'static str,
    min: u32,
    max: u32,
    names: &[&str],
    name_offset: u32,
) -> Result<(u64, bool), ScheduleError> {
    let bad = || ScheduleError::Field {
        field: name,
        value: text.to_owned(),
    };
    let mut bits = 0u64;
    let star = text.starts_with('*') || text.starts_with('?');
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (r, s.parse::<u32>().ok().filter(|s| *s > 0).ok_or_else(bad)?),
            None => (part, 1),
        };
        let (lo, hi) = if range == "*" || range == "?" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (
                value(a, names, name_offset).ok_or_else(bad)?,
                value(b, names, name_offset).ok_or_else(bad)?,
            )
        } else {
            let v = value(range, names, name_offset).ok_or_else(bad)?;
            // "a/n" means from a to the end, every n
            (v, if part.contains('/') { max } else { v })
        };
        if lo < min || hi > max || lo > hi {
            return Err(bad());
        }
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, star))
}

impl Schedule {
    /// Parses `spec` in `time_zone` (UTC when None); a `CRON_TZ=` or `TZ=`
    /// prefix in the schedule wins over it.
    pub(crate) fn parse(spec: &str, time_zone: Option<&str>) -> Result<Self, ScheduleError> {
        let mut spec = spec.trim();
        let mut zone_name = time_zone.map(str::to_owned);
        for prefix in ["CRON_TZ=", "TZ="] {
            if let Some(rest) = spec.strip_prefix(prefix) {
                let (tz, tail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                zone_name = Some(tz.to_owned());
                spec = tail.trim();
            }
        }
        let zone = match zone_name.as_deref() {
            None | Some("UTC") | Some("Etc/UTC") => TimeZone::UTC,
            Some(name) => {
                TimeZone::get(name).map_err(|_| ScheduleError::TimeZone(name.to_owned()))?
            }
        };
        let expanded = match spec {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(ScheduleError::FieldCount(fields.len(), spec.to_owned()));
        }
        let (minutes, _) = field(fields[0], "minute", 0, 59, &[], 0)?;
        let (hours, _) = field(fields[1], "hour", 0, 23, &[], 0)?;
        let (days, dom_star) = field(fields[2], "day of month", 1, 31, &[], 0)?;
        let (months, _) = field(fields[3], "month", 1, 12, &MONTHS, 1)?;
        let (mut weekdays, dow_star) = field(fields[4], "day of week", 0, 7, &WEEKDAYS, 0)?;
        if weekdays & (1 << 7) != 0 {
            weekdays |= 1; // 7 is Sunday too
        }
        Ok(Self {
            minutes,
            hours,
            days,
            months,
            weekdays,
            day_star: dom_star || dow_star,
            zone,
        })
    }

    fn day_matches(&self, date: Date) -> bool {
        let dom = self.days & (1 << date.day()) != 0;
        let dow = self.weekdays & (1 << date.weekday().to_sunday_zero_offset()) != 0;
        if self.day_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The first scheduled time strictly after `after`.
    pub(crate) fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let start = after.to_zoned(self.zone.clone());
        // Start at the next whole minute.
        let mut t: Zoned = start
            .with()
            .second(0)
            .subsec_nanosecond(0)
            .build()
            .ok()?
            .checked_add(1.minute())
            .ok()?;
        let limit = after.as_second() + 5 * 366 * 24 * 3600;
        while t.timestamp().as_second() <= limit {
            if self.months & (1 << t.month()) == 0 {
                let first = t.date().first_of_month().checked_add(1.month()).ok()?;
                t = first.to_zoned(self.zone.clone()).ok()?;
                continue;
            }
            if !self.day_matches(t.date()) {
                t = t.date().tomorrow().ok()?.to_zoned(self.zone.clone()).ok()?;
                continue;
            }
            if self.hours & (1 << t.hour()) == 0 {
                t = t
                    .with()
                    .minute(0)
                    .build()
                    .ok()?
                    .checked_add(1.hour())
                    .ok()?;
                continue;
            }
            if self.minutes & (1 << t.minute()) == 0 {
                t = t.checked_add(1.minute()).ok()?;
                continue;
            }
            return Some(t.timestamp());
        }
        None
    }

    /// The latest scheduled time in (`earliest`, `now`], with how many
    /// scheduled times fell in that window (counting stops past 100).
    pub(crate) fn most_recent(
        &self,
        earliest: Timestamp,
        now: Timestamp,
    ) -> Option<(Timestamp, usize)> {
        let mut last = None;
        let mut count = 0;
        let mut t = earliest;
        while let Some(next) = self.next_after(t) {
            if next > now {
                break;
            }
            last = Some(next);
            count += 1;
            if count > 100 {
                // Too many missed: jump straight to the latest before now.
                let mut probe = now
                    .checked_sub(jiff::SignedDuration::from_hours(24 * 8))
                    .ok()?;
                probe = probe.max(next);
                while let Some(n) = self.next_after(probe) {
                    if n > now {
                        break;
                    }
                    last = Some(n);
                    probe = n;
                }
                break;
            }
            t = next;
        }
        last.map(|l| (l, count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn next(spec: &str, tz: Option<&str>, after: &str) -> String {
        Schedule::parse(spec, tz)
            .unwrap()
            .next_after(ts(after))
            .unwrap()
            .to_string()
    }

    /// The next run after a time, by schedule: (schedule, time zone field,
    /// after, next).
    #[rustfmt::skip]
    const NEXT: &[(&str, Option<&str>, &str, &str)] = &[
        // Steps, ranges, lists and names.
        ("*/15 * * * *", None, "2025-01-10T10:07:30Z", "2025-01-10T10:15:00Z"),
        ("*/15 * * * *", None, "2025-01-10T10:15:00Z", "2025-01-10T10:30:00Z"),
        ("5,35 9-17 * * *", None, "2025-01-10T17:40:00Z", "2025-01-11T09:05:00Z"),
        // Friday 2025-01-10 → Monday 09:00
        ("0 9 * * MON-FRI", None, "2025-01-10T10:00:00Z", "2025-01-13T09:00:00Z"),
        ("0 0 1 feb *", None, "2025-03-01T00:00:00Z", "2026-02-01T00:00:00Z"),
        ("0 0 * * 7", None, "2025-01-10T00:00:00Z", "2025-01-12T00:00:00Z"),
        ("10/20 * * * *", None, "2025-01-10T10:31:00Z", "2025-01-10T10:50:00Z"),
        // Shorthands.
        ("@hourly", None, "2025-01-10T10:07:00Z", "2025-01-10T11:00:00Z"),
        ("@daily", None, "2025-01-10T10:07:00Z", "2025-01-11T00:00:00Z"),
        ("@weekly", None, "2025-01-10T10:07:00Z", "2025-01-12T00:00:00Z"),
        ("@monthly", None, "2025-01-10T10:07:00Z", "2025-02-01T00:00:00Z"),
        ("@yearly", None, "2025-01-10T10:07:00Z", "2026-01-01T00:00:00Z"),
        // Day of month or day of week when both are restricted: the 13th,
        // or any Friday.
        ("0 0 13 * FRI", None, "2025-01-11T00:00:00Z", "2025-01-13T00:00:00Z"),
        ("0 0 13 * FRI", None, "2025-01-13T00:00:00Z", "2025-01-17T00:00:00Z"),
        // Time zones from the field or the prefix: 09:00 in New York is
        // 14:00 UTC in winter, 13:00 UTC in summer.
        ("0 9 * * *", Some("America/New_York"), "2025-01-10T15:00:00Z", "2025-01-11T14:00:00Z"),
        ("CRON_TZ=America/New_York 0 9 * * *", None,
            "2025-07-10T15:00:00Z", "2025-07-11T13:00:00Z"),
    ];

    #[test]
    fn next_runs_follow_the_schedule() {
        for &(spec, tz, after, want) in NEXT {
            assert_eq!(next(spec, tz, after), want, "{spec} ({tz:?}) after {after}");
        }
    }

    #[test]
    fn invalid_schedules_are_rejected() {
        assert!(Schedule::parse("* * * *", None).is_err());
        assert!(Schedule::parse("60 * * * *", None).is_err());
        assert!(Schedule::parse("* * * FOO *", None).is_err());
        assert!(Schedule::parse("*/0 * * * *", None).is_err());
        assert!(matches!(
            Schedule::parse("0 9 * * *", Some("Mars/Base")),
            Err(ScheduleError::TimeZone(_))
        ));
    }

    #[test]
    fn most_recent_unmet_time_and_missed_count() {
        let s = Schedule::parse("*/10 * * * *", None).unwrap();
        let (t, n) = s
            .most_recent(ts("2025-01-10T10:05:00Z"), ts("2025-01-10T10:47:00Z"))
            .unwrap();
        assert_eq!((t.to_string().as_str(), n), ("2025-01-10T10:40:00Z", 4));
        assert!(
            s.most_recent(ts("2025-01-10T10:41:00Z"), ts("2025-01-10T10:47:00Z"))
                .is_none()
        );
        let every_minute = Schedule::parse("* * * * *", None).unwrap();
        let (t, n) = every_minute
            .most_recent(ts("2025-01-01T00:00:00Z"), ts("2025-01-10T10:47:30Z"))
            .unwrap();
        assert_eq!(t.to_string(), "2025-01-10T10:47:00Z");
        assert!(n > 100);
    }
}
