//! Durations as people type them (`90`, `1.5`, `30s`, `10m`, `1h30m`) and as
//! messages show them (`0.4s`, `42s`, `3m05s`).

use std::time::Duration;

/// Seconds (`90`, `1.5`), or anything `humantime` reads (`30s`, `500ms`,
/// `10m`, `1h 30m`).
///
/// # Errors
/// A message naming the forms accepted.
pub fn parse(raw: &str) -> Result<Duration, String> {
    let raw = raw.trim();
    if raw.chars().all(|c| c.is_ascii_digit() || c == '.') && !raw.is_empty() {
        return raw
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s <= 1e9)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| format!("not a duration: '{raw}' (e.g. 90, 30s, 10m)"));
    }
    humantime::parse_duration(raw)
        .map_err(|_| format!("not a duration: '{raw}' (e.g. 90, 30s, 10m)"))
}

/// A duration for people: `0.4s` under ten seconds, then `42s`, then `3m05s`.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 9_950 {
        let tenths = (ms + 50) / 100;
        return format!("{}.{}s", tenths / 10, tenths % 10);
    }
    let s = (ms + 500) / 1000;
    if s < 60 {
        format!("{s}s")
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// Whole milliseconds, as the service takes them.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_seconds_and_units() {
        for (raw, ms) in [
            ("90", 90_000),
            ("1.5", 1_500),
            ("0", 0),
            ("30s", 30_000),
            ("500ms", 500),
            ("10m", 600_000),
            ("1h", 3_600_000),
            ("1m30s", 90_000),
        ] {
            assert_eq!(millis(parse(raw).unwrap()), ms, "{raw}");
        }
        for bad in ["soon", "", "-1", "1..2", "10 parsecs"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shows_durations_for_people() {
        assert_eq!(human(Duration::from_millis(400)), "0.4s");
        assert_eq!(human(Duration::from_millis(9_949)), "9.9s");
        assert_eq!(human(Duration::from_secs(42)), "42s");
        assert_eq!(human(Duration::from_secs(185)), "3m05s");
    }
}
