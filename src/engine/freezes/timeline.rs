//! A freeze as this instance's book holds it: its windows worked out once
//! ([`Timeline`]), the window a name's calls carry ([`NameFreeze`]), and
//! the read that found Redis's list ([`Read`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use crate::domain::{Freeze, FreezeId, Reason, Schedule, Window, DAY_MS};

/// One read that found Redis's list of freezes at `version`: sent at `sent`
/// (this instance's monotonic clock), run by Redis at `redis_ms` (its clock).
pub struct Read {
    pub version: String,
    pub sent: Instant,
    pub redis_ms: i64,
}

/// The freeze that holds a name now, or will next: what its calls carry.
#[derive(Debug, Clone)]
pub struct NameFreeze {
    /// The window: the earliest-starting freeze's, with those that overlap
    /// it joined on (one after the other, they leave no gap).
    pub window: Window,
    /// The freeze whose window starts first, and its reason.
    pub freeze_id: FreezeId,
    pub reason: Option<Reason>,
}

impl NameFreeze {
    /// Whether it holds at `now_ms`.
    pub fn holds(&self, now_ms: i64) -> bool {
        self.window.contains(now_ms)
    }

    /// The window as the first field of a call's context carries it
    /// (`core/state.lua`): `start_ms|until_ms`.
    pub fn context_field(&self) -> String {
        format!(
            "{}|{}",
            self.window.start_ms.max(0),
            self.window.end_ms.max(0)
        )
    }
}

/// A freeze as this instance holds it, with its windows worked out once:
/// when it was first read, then again only when the window worked out has
/// passed. Kept across reloads while Redis keeps the freeze unchanged
/// (`stored` is the same), so no reload and no request works a window out
/// again.
pub(super) struct Entry {
    pub(super) freeze: Freeze,
    /// The freeze as Redis keeps it: what says, at a reload, that it is the
    /// same freeze.
    pub(super) stored: String,
    pub(super) timeline: Mutex<Timeline>,
}

/// A freeze's windows as worked out at some time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeline {
    /// Its window that holds now, or the next one (`None`: none within the
    /// schedule's horizon, or no more).
    pub window: Option<Window>,
    /// The window after that one: its next start while `window` holds.
    pub after: Option<Window>,
    /// From when (ms) these stand: when they were worked out (should this
    /// instance's clock step back, they are worked out again).
    from_ms: i64,
    /// Until when (ms) these stand: the end of `window`; without one, when
    /// to look again (a day on, for a recurring freeze).
    until_ms: i64,
    /// The time (ms) it was looked up for.
    pub at_ms: i64,
}

impl Entry {
    /// Its timeline at `now_ms`: the one held while it stands, else worked
    /// out again (counted in `computed`).
    pub(super) fn timeline_at(&self, now_ms: i64, computed: &AtomicU64) -> Timeline {
        let mut timeline = self.timeline.lock().unwrap_or_else(|e| e.into_inner());
        if now_ms >= timeline.until_ms || now_ms < timeline.from_ms {
            *timeline = work_out(&self.freeze, now_ms, computed);
        }
        Timeline {
            at_ms: now_ms,
            ..*timeline
        }
    }
}

/// The windows of `freeze` at `now_ms`: a bounded search (`schedule.rs`).
pub(super) fn work_out(freeze: &Freeze, now_ms: i64, computed: &AtomicU64) -> Timeline {
    computed.fetch_add(1, Ordering::Relaxed);
    let window = freeze.window_at(now_ms);
    let after = window.and_then(|w| freeze.window_at(w.end_ms));
    let until_ms = match (window, &freeze.schedule) {
        (Some(w), _) => w.end_ms,
        (None, Schedule::OneOff(_)) => i64::MAX,
        (None, Schedule::Recurring(_)) => now_ms.saturating_add(DAY_MS),
    };
    Timeline {
        window,
        after,
        from_ms: now_ms,
        until_ms,
        at_ms: now_ms,
    }
}
