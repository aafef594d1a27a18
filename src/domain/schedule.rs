//! When a freeze holds: a one-off window (`from`, `until`) or a recurring one
//! (a five-field cron expression for each start and each end, read in an
//! IANA time zone, as GitLab's deploy freezes write them). Cron and time
//! zones are the `croner` and `chrono-tz` crates' business.

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

use super::Invalid;

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
    /// the expressions name no such time (or it lies past the year 5000).
    fn window_at(&self, now_ms: i64) -> Option<Window> {
        let now = self.zone.from_utc_datetime(&utc(now_ms)?.naive_utc());
        if let Ok(start) = self.start.find_previous_occurrence(&now, true) {
            if let Ok(end) = self.end.find_next_occurrence(&start, false) {
                if end.timestamp_millis() > now_ms {
                    return Some(window(&start, &end));
                }
            }
        }
        let start = self.start.find_next_occurrence(&now, false).ok()?;
        let end = self.end.find_next_occurrence(&start, false).ok()?;
        Some(window(&start, &end))
    }
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
