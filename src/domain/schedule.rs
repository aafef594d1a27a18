//! When a freeze holds: a one-off window (`from`, `until`) or a recurring one
//! (a five-field cron expression for each start and each end, read in an
//! IANA time zone, as GitLab's deploy freezes write them). Cron and time
//! zones are the `croner` and `chrono-tz` crates' business.
//!
//! Every search for a start or an end looks at most [`HORIZON_MS`] (and a
//! day) away: a cron expression that names no time for years (`0 0 30 2 *`
//! never does) would otherwise be walked to the year 5000, milliseconds of
//! CPU each time. Whether any day in the span can match is read from the
//! expression's day and month fields first, a few microseconds; only then
//! does `croner` walk to the time itself.

use std::str::FromStr;

use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

use super::Invalid;

/// A day, in milliseconds.
pub const DAY_MS: i64 = 86_400_000;

/// How soon a recurring freeze must open when it is made, how far ahead its
/// next window is looked for, and how long one window may last: 366 days.
pub const HORIZON_DAYS: i64 = 366;

/// [`HORIZON_DAYS`] in milliseconds.
pub const HORIZON_MS: i64 = HORIZON_DAYS * DAY_MS;

/// How far a search for the end of a window, or back for the start of the
/// one that holds now, looks: a day past [`HORIZON_MS`], so that a window of
/// a whole year that spans a change of clocks (366 days and an hour) is
/// found whole.
const SPAN_MS: i64 = HORIZON_MS + DAY_MS;

/// One window of a freeze: from `start_ms` (inclusive) to `end_ms`
/// (exclusive), in milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start_ms: i64,
    pub end_ms: i64,
}

impl Window {
    /// Whether `now_ms` lies inside it.
    pub fn contains(&self, now_ms: i64) -> bool {
        self.start_ms <= now_ms && now_ms < self.end_ms
    }
}

/// A recurring freeze: it starts at every time `start` names and ends at the
/// first time `end` names after that, both read in `zone`.
#[derive(Debug, Clone)]
pub struct Recurring {
    start: Cron,
    end: Cron,
    zone: Tz,
}

/// A field of a recurring freeze that was refused, and why.
pub type FieldError = (&'static str, Invalid);

impl Recurring {
    /// `freeze_start` and `freeze_end` as five-field cron expressions,
    /// `cron_timezone` an IANA zone (default `UTC`).
    ///
    /// # Errors
    /// The field at fault and why.
    pub fn parse(start: &str, end: &str, zone: Option<&str>) -> Result<Self, FieldError> {
        let start = cron("freeze_start", start)?;
        let end = cron("freeze_end", end)?;
        let zone = match zone {
            None => Tz::UTC,
            Some(zone) => Tz::from_str(zone).map_err(|_| {
                (
                    "cron_timezone",
                    Invalid(format!(
                        "{zone:?} is not an IANA time zone (such as \"Europe/Berlin\" or \"UTC\")"
                    )),
                )
            })?,
        };
        Ok(Self { start, end, zone })
    }

    /// The cron expression of the starts, as given.
    pub fn start(&self) -> &str {
        self.start.pattern.as_str()
    }

    /// The cron expression of the ends, as given.
    pub fn end(&self) -> &str {
        self.end.pattern.as_str()
    }

    /// The IANA name of its time zone.
    pub fn zone(&self) -> &str {
        self.zone.name()
    }

    /// The window that holds `now_ms`, else the next one; `None` when
    /// none starts within [`HORIZON_MS`] of it (or its end does not follow
    /// within that span). Bounded: a few searches of at most a year each.
    fn window_at(&self, now_ms: i64) -> Option<Window> {
        let now = self.zone.from_utc_datetime(&utc(now_ms)?.naive_utc());
        if let Some(start) = seek(&self.start, &now, true, Way::Back, SPAN_MS) {
            if let Some(end) = seek(&self.end, &start, false, Way::On, SPAN_MS) {
                if end.timestamp_millis() > now_ms {
                    return Some(window(&start, &end));
                }
            }
        }
        let start = seek(&self.start, &now, false, Way::On, HORIZON_MS)?;
        let end = seek(&self.end, &start, false, Way::On, SPAN_MS)?;
        Some(window(&start, &end))
    }

    /// Whether it opens within [`HORIZON_DAYS`] of `now_ms` (or holds
    /// then), and each window it opens ends: what making one checks.
    ///
    /// # Errors
    /// `freeze_start` when no start lies within the horizon, `freeze_end`
    /// when no end follows it within as long.
    pub fn check_opens(&self, now_ms: i64) -> Result<(), FieldError> {
        if self.window_at(now_ms).is_some() {
            return Ok(());
        }
        let now = utc(now_ms).map(|t| self.zone.from_utc_datetime(&t.naive_utc()));
        let opens =
            now.is_some_and(|now| seek(&self.start, &now, false, Way::On, HORIZON_MS).is_some());
        Err(if opens {
            (
                "freeze_end",
                Invalid(format!(
                    "{:?} names no time within {HORIZON_DAYS} days after the freeze's start: \
                     its window would never end",
                    self.end()
                )),
            )
        } else {
            (
                "freeze_start",
                Invalid(format!(
                    "{:?} names no time in the next {HORIZON_DAYS} days (read in {}): a recurring \
                     freeze must open within them",
                    self.start(),
                    self.zone()
                )),
            )
        })
    }
}

/// Which way a search goes along time.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    On,
    Back,
}

/// The first time `cron` names from `from` (itself included when
/// `inclusive`) going `way`, no more than `span_ms` away; `None` when there
/// is none that near. No day in the span matching the expression's day and
/// month fields ends the search before `croner` walks a single step.
fn seek(
    cron: &Cron,
    from: &DateTime<Tz>,
    inclusive: bool,
    way: Way,
    span_ms: i64,
) -> Option<DateTime<Tz>> {
    let from_ms = from.timestamp_millis();
    let limit_ms = match way {
        Way::On => from_ms.checked_add(span_ms)?,
        Way::Back => from_ms.checked_sub(span_ms)?,
    };
    let limit = from
        .timezone()
        .from_utc_datetime(&utc(limit_ms)?.naive_utc());
    if !a_day_matches(cron, from.date_naive(), limit.date_naive()) {
        return None;
    }
    let found = match way {
        Way::On => cron.find_next_occurrence(from, inclusive),
        Way::Back => cron.find_previous_occurrence(from, inclusive),
    }
    .ok()?;
    let ms = found.timestamp_millis();
    let near = match way {
        Way::On => ms <= limit_ms,
        Way::Back => ms >= limit_ms,
    };
    near.then_some(found)
}

/// Whether the day and month fields of `cron` match a day from `a` to `b`
/// (either way round), both included.
fn a_day_matches(cron: &Cron, a: NaiveDate, b: NaiveDate) -> bool {
    let last = a.max(b);
    a.min(b)
        .iter_days()
        .take_while(|day| *day <= last)
        .any(|day| day_matches(cron, day))
}

/// Whether the day and month fields of `cron` match `day`.
fn day_matches(cron: &Cron, day: NaiveDate) -> bool {
    let weekday = croner::Weekday::from_days_from_sunday(day.weekday().num_days_from_sunday());
    cron.pattern.month_match(day.month()).unwrap_or(false)
        && cron
            .pattern
            .day_match(day.year(), day.month(), day.day(), weekday)
            .unwrap_or(false)
}

fn window(start: &DateTime<Tz>, end: &DateTime<Tz>) -> Window {
    Window {
        start_ms: start.timestamp_millis(),
        end_ms: end.timestamp_millis(),
    }
}

fn utc(ms: i64) -> Option<DateTime<Utc>> {
    Utc.timestamp_millis_opt(ms).single()
}

/// A five-field cron expression (minute, hour, day of month, month, day of week).
fn cron(field: &'static str, text: &str) -> Result<Cron, FieldError> {
    let parser = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build();
    let refused = |why: String| {
        (
            field,
            Invalid(format!(
                "{text:?} is not a five-field cron expression (minute hour day-of-month month \
                 day-of-week, such as \"0 23 * * 5\"): {why}"
            )),
        )
    };
    if text.split_whitespace().count() != 5 {
        return Err(refused(format!(
            "it has {} fields",
            text.split_whitespace().count()
        )));
    }
    parser.parse(text).map_err(|err| refused(err.to_string()))
}

/// When a freeze holds.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// Once, from `from_ms` until `until_ms`.
    OneOff(Window),
    /// At every start its cron names, until the end that follows.
    Recurring(Box<Recurring>),
}

impl Schedule {
    /// The window that holds `now_ms`, else the next one to start; `None`
    /// when it holds no more.
    pub fn window_at(&self, now_ms: i64) -> Option<Window> {
        match self {
            Self::OneOff(window) => (window.end_ms > now_ms).then_some(*window),
            Self::Recurring(recurring) => recurring.window_at(now_ms),
        }
    }

    /// When its key in Redis may expire (ms): the end of a one-off window;
    /// `None` for a recurring freeze, which lives until it is deleted.
    pub fn expires_at_ms(&self) -> Option<i64> {
        match self {
            Self::OneOff(window) => Some(window.end_ms),
            Self::Recurring(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Milliseconds of an RFC 3339 time.
    fn ms(text: &str) -> i64 {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_millis()
    }

    fn weekend(zone: Option<&str>) -> Recurring {
        Recurring::parse("0 23 * * 5", "0 7 * * 1", zone).unwrap()
    }

    #[test]
    fn a_weekend_freeze_holds_from_friday_night_to_monday_morning() {
        let freeze = weekend(None);
        // Saturday 2026-11-28, noon UTC.
        let window = freeze.window_at(ms("2026-11-28T12:00:00Z")).unwrap();
        assert_eq!(window.start_ms, ms("2026-11-27T23:00:00Z"));
        assert_eq!(window.end_ms, ms("2026-11-30T07:00:00Z"));
        assert!(window.contains(ms("2026-11-28T12:00:00Z")));
        // Tuesday: the next weekend's.
        let next = freeze.window_at(ms("2026-12-01T12:00:00Z")).unwrap();
        assert_eq!(next.start_ms, ms("2026-12-04T23:00:00Z"));
        assert!(!next.contains(ms("2026-12-01T12:00:00Z")));
        // A start is inside its window, an end is not.
        assert!(freeze
            .window_at(ms("2026-11-27T23:00:00Z"))
            .unwrap()
            .contains(ms("2026-11-27T23:00:00Z")));
        let after = freeze.window_at(ms("2026-11-30T07:00:00Z")).unwrap();
        assert_eq!(after.start_ms, ms("2026-12-04T23:00:00Z"));
    }

    #[test]
    fn a_recurring_freeze_reads_its_cron_in_its_time_zone() {
        let berlin = weekend(Some("Europe/Berlin"));
        let window = berlin.window_at(ms("2026-11-28T12:00:00Z")).unwrap();
        // 23:00 in Berlin in November is 22:00 UTC.
        assert_eq!(window.start_ms, ms("2026-11-27T22:00:00Z"));
        assert_eq!(berlin.zone(), "Europe/Berlin");
        assert_eq!((berlin.start(), berlin.end()), ("0 23 * * 5", "0 7 * * 1"));
    }

    #[test]
    fn bad_cron_and_unknown_zones_name_their_field() {
        let field = |start: &str, end: &str, zone: Option<&str>| {
            Recurring::parse(start, end, zone).unwrap_err().0
        };
        assert_eq!(field("0 23 * *", "0 7 * * 1", None), "freeze_start");
        assert_eq!(field("0 25 * * 5", "0 7 * * 1", None), "freeze_start");
        assert_eq!(field("0 23 * * 5", "nonsense", None), "freeze_end");
        assert_eq!(field("0 23 * * 5", "0 0 7 * * 1", None), "freeze_end");
        assert_eq!(
            field("0 23 * * 5", "0 7 * * 1", Some("Mars/Olympus")),
            "cron_timezone"
        );
    }

    #[test]
    fn a_freeze_that_never_opens_is_found_out_in_a_bounded_search() {
        // 30 February: never.
        let never = Recurring::parse("0 0 30 2 *", "0 0 31 2 *", None).unwrap();
        let now = ms("2026-12-06T01:00:00Z");
        let started = std::time::Instant::now();
        for _ in 0..100 {
            assert_eq!(never.window_at(now), None);
        }
        // Unbounded, each took milliseconds (a walk to the year 5000 and
        // back to the year 1); shown, not asserted (machines are noisy).
        eprintln!("never opens: {:?} each", started.elapsed() / 100);
        assert_eq!(never.check_opens(now).unwrap_err().0, "freeze_start");
    }

    #[test]
    fn a_recurring_freeze_must_open_within_366_days_and_close_after_it() {
        let now = ms("2026-12-06T01:00:00Z");
        let check = |start: &str, end: &str| {
            Recurring::parse(start, end, None)
                .unwrap()
                .check_opens(now)
                .map_err(|(field, _)| field)
        };
        // 29 February next comes in 2028: more than 366 days away.
        assert_eq!(check("0 0 29 2 *", "0 0 1 3 *"), Err("freeze_start"));
        // Opens, never closes.
        assert_eq!(check("0 0 * * *", "0 0 30 2 *"), Err("freeze_end"));
        assert_eq!(check("0 23 * * 5", "0 7 * * 1"), Ok(()));
        // A whole year, holding now.
        assert_eq!(check("0 0 1 1 *", "0 0 1 1 *"), Ok(()));
        // Once a year, next November.
        assert_eq!(check("0 0 1 11 *", "0 0 2 11 *"), Ok(()));
        let leap = Recurring::parse("0 0 29 2 *", "0 0 1 3 *", None).unwrap();
        let window = leap.window_at(ms("2027-12-06T01:00:00Z")).unwrap();
        assert_eq!(window.start_ms, ms("2028-02-29T00:00:00Z"));
    }

    #[test]
    fn a_one_off_window_ends_at_its_until() {
        let once = Schedule::OneOff(Window {
            start_ms: 1_000,
            end_ms: 2_000,
        });
        assert_eq!(once.window_at(500).map(|w| w.start_ms), Some(1_000));
        assert!(once.window_at(1_500).unwrap().contains(1_500));
        assert_eq!(once.window_at(2_000), None);
        assert_eq!(once.expires_at_ms(), Some(2_000));
    }
}
