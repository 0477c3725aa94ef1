//! Cron schedules as CronJobs use them: five fields (minute, hour, day of
//! month, month, day of week) with lists, ranges, steps and names, the
//! `@hourly`-style shorthands, and a time zone (`spec.timeZone` or a
//! `CRON_TZ=`/`TZ=` prefix). Times are computed in that zone, so schedules
//! follow daylight-saving changes.
//!
//! What parses, and the words of every refusal, are those of the cron
//! library upstream uses (robfig/cron v3's standard parser): the API server
//! shows them when it refuses a CronJob and the controller when it reports
//! an unparseable schedule. `@every <duration>` runs at that constant
//! interval (whole seconds, at least one), counted from the CronJob's last
//! scheduled time, as upstream's controller counts it.

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan, Zoned};

use crate::duration::{GoDurationError, go_duration_nanos};
use crate::quote::go_quote;

/// Why a schedule could not be parsed, in upstream's words.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScheduleError {
    /// Nothing but white space.
    #[error("empty spec string")]
    Empty,
    /// Not five fields (or a known shorthand).
    #[error("expected exactly 5 fields, found {count}: [{fields}]")]
    FieldCount {
        /// How many fields there were.
        count: usize,
        /// The fields, separated by one space.
        fields: String,
    },
    /// A value is not a whole number or a name.
    #[error("failed to parse int from {expr}: strconv.Atoi: parsing {}: {reason}", go_quote(.expr))]
    NotANumber {
        /// The value as written.
        expr: String,
        /// `invalid syntax` or `value out of range`, as Go's strconv says.
        reason: &'static str,
    },
    /// A negative step.
    #[error("negative number ({number}) not allowed: {expr}")]
    Negative {
        /// The number.
        number: i64,
        /// The value as written.
        expr: String,
    },
    /// `1-2-3`.
    #[error("too many hyphens: {0}")]
    Hyphens(String),
    /// `1/2/3`.
    #[error("too many slashes: {0}")]
    Slashes(String),
    /// A value below the field's minimum (`0` for a day of month).
    #[error("beginning of range ({start}) below minimum ({min}): {expr}")]
    BelowMinimum {
        /// Where the range begins.
        start: u64,
        /// The field's minimum.
        min: u64,
        /// The range as written.
        expr: String,
    },
    /// A value above the field's maximum (`60` for a minute, `7` for a day
    /// of week).
    #[error("end of range ({end}) above maximum ({max}): {expr}")]
    AboveMaximum {
        /// Where the range ends.
        end: u64,
        /// The field's maximum.
        max: u64,
        /// The range as written.
        expr: String,
    },
    /// `5-1`.
    #[error("beginning of range ({start}) beyond end of range ({end}): {expr}")]
    BeyondEnd {
        /// Where the range begins.
        start: u64,
        /// Where it ends.
        end: u64,
        /// The range as written.
        expr: String,
    },
    /// `*/0`.
    #[error("step of range should be a positive number: {0}")]
    ZeroStep(String),
    /// An `@` shorthand that names nothing.
    #[error("unrecognized descriptor: {0}")]
    Descriptor(String),
    /// `@every` with no Go duration after it.
    #[error("failed to parse duration {descriptor}: {source}")]
    Duration {
        /// The descriptor as written (`@every 5x`).
        descriptor: String,
        /// What Go's duration parser says of the rest.
        source: GoDurationError,
    },
    /// A `CRON_TZ=`/`TZ=` prefix naming an unknown zone.
    #[error("provided bad location {0}: unknown time zone {0}")]
    Location(String),
    /// The time zone field names an unknown zone.
    #[error("unknown time zone {0}")]
    TimeZone(String),
}

/// A parsed schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    when: When,
    zone: TimeZone,
}

/// The two kinds of schedule cron knows.
#[derive(Debug, Clone)]
enum When {
    /// The five fields: times that match them.
    Fields(Fields),
    /// `@every`: a constant interval, in whole seconds (at least one).
    Every(i64),
}

/// The five fields, as bit sets of the values each allows.
#[derive(Debug, Clone)]
struct Fields {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// True when day-of-month or day-of-week was `*`/`?` (without a step
    /// above one): then both must match; otherwise either may (cron's rule).
    day_star: bool,
}

/// One field's bounds and the names it takes.
struct Bounds {
    min: u64,
    max: u64,
    /// Lower-case names, numbered from `min`.
    names: &'static [&'static str],
}

impl Bounds {
    /// A field of plain numbers.
    const fn numbers(min: u64, max: u64) -> Self {
        Bounds {
            min,
            max,
            names: &[],
        }
    }
}

const MINUTES: Bounds = Bounds::numbers(0, 59);
const HOURS: Bounds = Bounds::numbers(0, 23);
const DAYS: Bounds = Bounds::numbers(1, 31);
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const WEEKDAYS: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

/// A whole number as Go's `strconv.Atoi` reads it (a sign allowed), not
/// negative.
fn number(expr: &str) -> Result<u64, ScheduleError> {
    let parsed: i64 = expr.parse().map_err(|e: std::num::ParseIntError| {
        let reason = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                "value out of range"
            }
            _ => "invalid syntax",
        };
        ScheduleError::NotANumber {
            expr: expr.to_owned(),
            reason,
        }
    })?;
    u64::try_from(parsed).map_err(|_| ScheduleError::Negative {
        number: parsed,
        expr: expr.to_owned(),
    })
}

fn number_or_name(expr: &str, bounds: &Bounds) -> Result<u64, ScheduleError> {
    let lower = expr.to_ascii_lowercase();
    match bounds.names.iter().position(|n| *n == lower) {
        Some(i) => Ok(bounds.min + i as u64),
        None => number(expr),
    }
}

/// One comma-separated part of a field (`*`, `5`, `1-5`, `*/15`, `10/20`):
/// its bits, and whether it counts as a star.
fn range(expr: &str, bounds: &Bounds) -> Result<(u64, bool), ScheduleError> {
    let steps: Vec<&str> = expr.split('/').collect();
    let ends: Vec<&str> = steps[0].split('-').collect();
    let (mut start, mut end, mut star) = (bounds.min, bounds.max, false);
    if ends[0] == "*" || ends[0] == "?" {
        star = true;
    } else {
        start = number_or_name(ends[0], bounds)?;
        end = match ends.len() {
            1 => start,
            2 => number_or_name(ends[1], bounds)?,
            _ => return Err(ScheduleError::Hyphens(expr.to_owned())),
        };
    }
    let step = match steps.len() {
        1 => 1,
        2 => {
            let step = number(steps[1])?;
            // "N/step" runs from N to the field's end.
            if ends.len() == 1 {
                end = bounds.max;
            }
            if step > 1 {
                star = false;
            }
            step
        }
        _ => return Err(ScheduleError::Slashes(expr.to_owned())),
    };
    let expr = expr.to_owned();
    if start < bounds.min {
        return Err(ScheduleError::BelowMinimum {
            start,
            min: bounds.min,
            expr,
        });
    }
    if end > bounds.max {
        return Err(ScheduleError::AboveMaximum {
            end,
            max: bounds.max,
            expr,
        });
    }
    if start > end {
        return Err(ScheduleError::BeyondEnd { start, end, expr });
    }
    if step == 0 {
        return Err(ScheduleError::ZeroStep(expr));
    }
    let bits = (start..=end)
        .step_by(usize::try_from(step).unwrap_or(usize::MAX))
        .fold(0u64, |bits, v| bits | 1 << v);
    Ok((bits, star))
}

/// A whole field: its comma-separated parts (empty ones skipped).
fn field(text: &str, bounds: &Bounds) -> Result<(u64, bool), ScheduleError> {
    text.split(',')
        .filter(|part| !part.is_empty())
        .try_fold((0, false), |(bits, star), part| {
            let (more, part_star) = range(part, bounds)?;
            Ok((bits | more, star || part_star))
        })
}

impl Schedule {
    /// Parses `spec` in `time_zone` (UTC when None); a `CRON_TZ=` or `TZ=`
    /// prefix in the schedule wins over it.
    pub fn parse(spec: &str, time_zone: Option<&str>) -> Result<Self, ScheduleError> {
        Self::parse_in(spec, time_zone, TimeZone::UTC)
    }

    /// Parses `spec` in the host's local time zone (a `CRON_TZ=`/`TZ=`
    /// prefix wins), as k3s reads its snapshot schedule.
    pub fn parse_local(spec: &str) -> Result<Self, ScheduleError> {
        Self::parse_in(spec, None, TimeZone::system())
    }

    /// How long from `now` until the next scheduled time (`None`: there is
    /// none).
    pub fn wait_from(&self, now: Timestamp) -> Option<std::time::Duration> {
        let next = self.next_after(now)?;
        std::time::Duration::try_from(next.duration_since(now)).ok()
    }

    /// `parse`, in `unnamed` when neither `time_zone` nor a prefix names a
    /// zone.
    fn parse_in(
        spec: &str,
        time_zone: Option<&str>,
        unnamed: TimeZone,
    ) -> Result<Self, ScheduleError> {
        let mut spec = spec.trim();
        if spec.is_empty() {
            return Err(ScheduleError::Empty);
        }
        let mut zone_name = time_zone.map(|name| (name.to_owned(), false));
        for prefix in ["CRON_TZ=", "TZ="] {
            if let Some(rest) = spec.strip_prefix(prefix) {
                let (tz, tail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                zone_name = Some((tz.to_owned(), true));
                spec = tail.trim();
            }
        }
        let zone = match zone_name {
            None => unnamed,
            Some((name, _)) if name == "UTC" || name == "Etc/UTC" => TimeZone::UTC,
            Some((name, prefixed)) => TimeZone::get(&name).map_err(|_| {
                if prefixed {
                    ScheduleError::Location(name.clone())
                } else {
                    ScheduleError::TimeZone(name.clone())
                }
            })?,
        };
        if let Some(interval) = spec.strip_prefix("@every ") {
            let nanos = go_duration_nanos(interval).map_err(|source| ScheduleError::Duration {
                descriptor: spec.to_owned(),
                source,
            })?;
            // As robfig/cron's Every: under a second counts as one, and the
            // interval is cut to whole seconds.
            let seconds = nanos.max(1_000_000_000) / 1_000_000_000;
            return Ok(Self {
                when: When::Every(seconds),
                zone,
            });
        }
        let expanded = match spec {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other if other.starts_with('@') => {
                return Err(ScheduleError::Descriptor(other.to_owned()));
            }
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let [minutes, hours, days, months, weekdays] = fields[..] else {
            return Err(ScheduleError::FieldCount {
                count: fields.len(),
                fields: fields.join(" "),
            });
        };
        let (minutes, _) = field(minutes, &MINUTES)?;
        let (hours, _) = field(hours, &HOURS)?;
        let (days, dom_star) = field(days, &DAYS)?;
        let (months, _) = field(months, &MONTHS)?;
        let (weekdays, dow_star) = field(weekdays, &WEEKDAYS)?;
        Ok(Self {
            when: When::Fields(Fields {
                minutes,
                hours,
                days,
                months,
                weekdays,
                day_star: dom_star || dow_star,
            }),
            zone,
        })
    }

    /// The first scheduled time strictly after `after`.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        match &self.when {
            When::Fields(fields) => fields.next_after(after, &self.zone),
            // From the whole second at or before `after`, as robfig/cron's
            // constant delay schedule counts.
            When::Every(seconds) => {
                Timestamp::from_second(after.as_second().checked_add(*seconds)?).ok()
            }
        }
    }

    /// The latest scheduled time in (`earliest`, `now`], with how many
    /// scheduled times fell in that window (counting stops past 100).
    pub fn most_recent(&self, earliest: Timestamp, now: Timestamp) -> Option<(Timestamp, usize)> {
        match &self.when {
            When::Fields(fields) => fields.most_recent(earliest, now, &self.zone),
            When::Every(seconds) => {
                // The times are evenly spaced: count them instead of stepping.
                let first = self.next_after(earliest)?;
                if first > now {
                    return None;
                }
                let after_first = (now.as_second() - first.as_second()) / seconds;
                let last =
                    Timestamp::from_second(first.as_second() + after_first * seconds).ok()?;
                let count = usize::try_from(after_first.saturating_add(1)).unwrap_or(usize::MAX);
                Some((last, count.min(101)))
            }
        }
    }
}

impl Fields {
    fn day_matches(&self, date: Date) -> bool {
        let dom = self.days & (1 << date.day()) != 0;
        let dow = self.weekdays & (1 << date.weekday().to_sunday_zero_offset()) != 0;
        if self.day_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    fn next_after(&self, after: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        let start = after.to_zoned(zone.clone());
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
                t = first.to_zoned(zone.clone()).ok()?;
                continue;
            }
            if !self.day_matches(t.date()) {
                t = t.date().tomorrow().ok()?.to_zoned(zone.clone()).ok()?;
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

    fn most_recent(
        &self,
        earliest: Timestamp,
        now: Timestamp,
        zone: &TimeZone,
    ) -> Option<(Timestamp, usize)> {
        let mut last = None;
        let mut count = 0;
        let mut t = earliest;
        while let Some(next) = self.next_after(t, zone) {
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
                while let Some(n) = self.next_after(probe, zone) {
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
        ("0 0 * * 0", None, "2025-01-10T00:00:00Z", "2025-01-12T00:00:00Z"),
        ("10/20 * * * *", None, "2025-01-10T10:31:00Z", "2025-01-10T10:50:00Z"),
        // Shorthands.
        ("@hourly", None, "2025-01-10T10:07:00Z", "2025-01-10T11:00:00Z"),
        ("@daily", None, "2025-01-10T10:07:00Z", "2025-01-11T00:00:00Z"),
        ("@weekly", None, "2025-01-10T10:07:00Z", "2025-01-12T00:00:00Z"),
        ("@monthly", None, "2025-01-10T10:07:00Z", "2025-02-01T00:00:00Z"),
        ("@yearly", None, "2025-01-10T10:07:00Z", "2026-01-01T00:00:00Z"),
        // A constant interval from the whole second before; under a second
        // counts as one, and parts of a second are dropped.
        ("@every 1h30m", None, "2025-01-10T10:07:30.5Z", "2025-01-10T11:37:30Z"),
        ("@every 90s", Some("America/New_York"), "2025-01-10T10:07:00Z", "2025-01-10T10:08:30Z"),
        ("@every 300ms", None, "2025-01-10T10:07:00Z", "2025-01-10T10:07:01Z"),
        ("@every 2.9s", None, "2025-01-10T10:07:00Z", "2025-01-10T10:07:02Z"),
        ("@every -5m", None, "2025-01-10T10:07:00Z", "2025-01-10T10:07:01Z"),
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
    fn invalid_schedules_are_refused_in_upstreams_words() {
        let cases = [
            ("", "empty spec string"),
            ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
            (
                "0 0 * * * *",
                "expected exactly 5 fields, found 6: [0 0 * * * *]",
            ),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            ("0 0 * * 7", "end of range (7) above maximum (6): 7"),
            (
                "5-1 * * * *",
                "beginning of range (5) beyond end of range (1): 5-1",
            ),
            (
                "* * * FOO *",
                "failed to parse int from FOO: strconv.Atoi: parsing \"FOO\": invalid syntax",
            ),
            (
                "99999999999999999999 * * * *",
                "failed to parse int from 99999999999999999999: \
              strconv.Atoi: parsing \"99999999999999999999\": value out of range",
            ),
            ("*/-1 * * * *", "negative number (-1) not allowed: -1"),
            (
                "*/0 * * * *",
                "step of range should be a positive number: */0",
            ),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            ("1/2/3 * * * *", "too many slashes: 1/2/3"),
            ("@fortnightly", "unrecognized descriptor: @fortnightly"),
            (
                "@every 5x",
                "failed to parse duration @every 5x: time: unknown unit \"x\" in duration \"5x\"",
            ),
            (
                "@every 10",
                "failed to parse duration @every 10: time: missing unit in duration \"10\"",
            ),
            ("@every", "unrecognized descriptor: @every"),
            (
                "CRON_TZ=Mars/Base 0 9 * * *",
                "provided bad location Mars/Base: unknown time zone Mars/Base",
            ),
        ];
        for (spec, want) in cases {
            let error = Schedule::parse(spec, None).expect_err(spec);
            assert_eq!(error.to_string(), want, "{spec:?}");
        }
        assert_eq!(
            Schedule::parse("0 9 * * *", Some("Mars/Base")).map(|_| ()),
            Err(ScheduleError::TimeZone("Mars/Base".into()))
        );
        // Names in any case, signs and empty list parts, as upstream reads them.
        for spec in ["0 9 * Jan,,MAR mon-FRI", "+5 * * * *", "0 0 ? * SUN"] {
            assert!(Schedule::parse(spec, None).is_ok(), "{spec}");
        }
    }

    #[test]
    fn a_stepped_star_restricts_its_day_field() {
        // "*/2" as the day of month is not a star: either day field may match,
        // so the 3rd (odd) or any Sunday.
        let s = Schedule::parse("0 0 */2 * SUN", None).unwrap();
        let next = s.next_after(ts("2025-01-01T12:00:00Z")).unwrap();
        assert_eq!(next.to_string(), "2025-01-03T00:00:00Z");
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

    #[test]
    fn waits_until_the_next_time_in_the_local_zone_or_the_named_one() {
        use std::time::Duration;
        let twice_a_day = Schedule::parse_local("CRON_TZ=UTC 0 */12 * * *").unwrap();
        assert_eq!(
            twice_a_day.wait_from(ts("2026-01-01T11:59:00Z")),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            twice_a_day.wait_from(ts("2026-01-01T12:00:00Z")),
            Some(Duration::from_secs(12 * 3600))
        );
        let every_two = Schedule::parse_local("@every 2s").unwrap();
        assert_eq!(
            every_two.wait_from(ts("2026-01-01T00:00:01.5Z")),
            Some(Duration::from_millis(1500))
        );
        // Local means the host's zone: the next hour boundary there.
        let hourly = Schedule::parse_local("@hourly").unwrap();
        let now = ts("2026-01-01T10:20:00Z");
        let next = now.checked_add(hourly.wait_from(now).unwrap()).unwrap();
        assert_eq!(next.to_zoned(TimeZone::system()).minute(), 0);
        assert!(
            Schedule::parse_local("*/2 * * * * *").is_err(),
            "five fields, as k3s's"
        );
    }

    #[test]
    fn most_recent_of_a_constant_interval_keeps_its_phase() {
        let s = Schedule::parse("@every 7m", None).unwrap();
        // From 10:00:20: 10:07:20, 10:14:20, 10:21:20, 10:28:20.
        let (t, n) = s
            .most_recent(ts("2025-01-10T10:00:20Z"), ts("2025-01-10T10:30:00Z"))
            .unwrap();
        assert_eq!((t.to_string().as_str(), n), ("2025-01-10T10:28:20Z", 4));
        assert!(
            s.most_recent(ts("2025-01-10T10:00:20Z"), ts("2025-01-10T10:07:19Z"))
                .is_none()
        );
        let (t, n) = Schedule::parse("@every 1s", None)
            .unwrap()
            .most_recent(ts("2025-01-01T00:00:00Z"), ts("2025-01-10T10:47:30.9Z"))
            .unwrap();
        assert_eq!((t.to_string().as_str(), n), ("2025-01-10T10:47:30Z", 101));
    }
}
