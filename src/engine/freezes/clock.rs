//! The clock freezes are judged by on this instance, and how fresh its
//! list of freezes must be for a call that may grant (`book.rs` keeps the
//! list and says how fresh it is).

use std::time::Duration;

/// Milliseconds since the Unix epoch on this instance's clock: freezes are
/// windows of wall-clock time (their windows are judged again by Redis).
pub fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// How long a list read from Redis counts as Redis's list: the API's
/// promise that "every instance applies a new or deleted freeze within 1 s".
pub const FRESH_FOR: Duration = Duration::from_secs(1);

/// A call that may grant, built with a list older than this, has the list
/// checked in the background (`FreezeBook::ready`): under steady traffic
/// the list stays fresh without a call ever waiting for it.
pub const CHECK_AFTER: Duration = Duration::from_millis(500);

/// A call that may grant, built with a list older than this, waits for a
/// check first (`FreezeBook::ready`): the first call after a quiet spell
/// pays one round trip.
pub const WAIT_AFTER: Duration = Duration::from_millis(800);

/// How long a call waits at most for a fresh list (it is, but after a pause
/// or an outage): then it is sent holding every line, or a request that
/// does not wait is answered 503.
pub const FRESH_WAIT: Duration = Duration::from_millis(1500);

/// The freeze field a call carries while this instance's list is not fresh:
/// no window, and a list fresh until the epoch, so the function holds back
/// every grant but an override's, on any name (`core/state.lua`'s FROZEN),
/// and grants nothing a freeze this instance has not heard of yet would
/// forbid.
pub const HOLD_ALL: &str = "||0";
