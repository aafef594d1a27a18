//! The form each setting's value must have, and the words that say what was
//! expected when it has not (clap shows them after the variable and value).

use std::time::Duration;

/// The largest `BATON_MAX_WAIT_MS` accepted: a day.
pub const MAX_MAX_WAIT_MS: u64 = 86_400_000;

/// `host:port`, as a listener binds it.
pub(super) fn listen_address(raw: &str) -> Result<String, String> {
    let expected = || "expected host:port, e.g. 127.0.0.1:8080 or 0.0.0.0:8080".to_owned();
    let (host, port) = raw.rsplit_once(':').ok_or_else(expected)?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(expected());
    }
    Ok(raw.to_owned())
}

pub(super) fn non_empty(raw: &str) -> Result<String, String> {
    if raw.trim().is_empty() {
        return Err("expected a non-empty name".into());
    }
    Ok(raw.trim().to_owned())
}

pub(super) fn max_wait_ms(raw: &str) -> Result<u64, String> {
    raw.trim()
        .parse::<u64>()
        .ok()
        .filter(|ms| *ms <= MAX_MAX_WAIT_MS)
        .ok_or_else(|| {
            format!("expected a whole number of milliseconds from 0 to {MAX_MAX_WAIT_MS}")
        })
}

/// The largest `BATON_MAX_KEEP_PLACE_MS` accepted: 400 days.
pub const MAX_MAX_KEEP_PLACE_MS: u64 = 400 * 86_400_000;

pub(super) fn keep_place_ms(raw: &str) -> Result<u64, String> {
    raw.trim()
        .parse::<u64>()
        .ok()
        .filter(|ms| (1..=MAX_MAX_KEEP_PLACE_MS).contains(ms))
        .ok_or_else(|| {
            format!("expected a whole number of milliseconds from 1 to {MAX_MAX_KEEP_PLACE_MS}")
        })
}

pub(super) fn pickup_ms(raw: &str) -> Result<u64, String> {
    raw.trim()
        .parse::<u64>()
        .ok()
        .filter(|ms| (1..=MAX_MAX_WAIT_MS).contains(ms))
        .ok_or_else(|| {
            format!("expected a whole number of milliseconds from 1 to {MAX_MAX_WAIT_MS}")
        })
}

/// The largest `BATON_HISTORY_MAX` accepted.
pub const MAX_HISTORY_MAX: u32 = 100_000;

pub(super) fn history_max(raw: &str) -> Result<u32, String> {
    raw.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| *n <= MAX_HISTORY_MAX)
        .ok_or_else(|| format!("expected a whole number from 0 (no history) to {MAX_HISTORY_MAX}"))
}

pub(super) fn history_days(raw: &str) -> Result<u32, String> {
    raw.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=365).contains(n))
        .ok_or_else(|| "expected a whole number of days from 1 to 365".to_owned())
}

/// The largest `BATON_FREEZE_MAX_DAYS` accepted: a hundred years.
pub const MAX_FREEZE_MAX_DAYS: u32 = 36_500;

pub(super) fn freeze_max_days(raw: &str) -> Result<u32, String> {
    raw.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_FREEZE_MAX_DAYS).contains(n))
        .ok_or_else(|| format!("expected a whole number of days from 1 to {MAX_FREEZE_MAX_DAYS}"))
}

pub(super) fn positive_millis(raw: &str) -> Result<Duration, String> {
    raw.trim()
        .parse::<u64>()
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
        .ok_or_else(|| "expected a whole number of milliseconds above 0".to_owned())
}

pub(super) fn positive_count(raw: &str) -> Result<usize, String> {
    raw.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| "expected a whole number above 0".to_owned())
}

pub(super) fn worker_threads(raw: &str) -> Result<usize, String> {
    if raw.trim() == "auto" {
        return Ok(default_worker_threads());
    }
    positive_count(raw).map_err(|_| "expected auto or a whole number above 0".to_owned())
}

/// One thread per CPU, but a single one on machines with two CPUs or fewer:
/// the work is waiting on Redis, and there a second thread mostly wakes the
/// first (measured: about 40% more CPU per operation) while Redis wants a core.
fn default_worker_threads() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    if cpus <= 2 {
        1
    } else {
        cpus
    }
}
