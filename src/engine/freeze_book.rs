//! This instance's list of freezes, held in memory so that no request asks
//! Redis whether its name is frozen: the window a name's calls carry
//! ([`FreezeBook::for_name`]), and a signal when the list changes. The
//! `freezes/` room keeps it in step with Redis.
//!
//! Which window to send is chosen with this instance's wall clock; whether
//! it holds is judged by the function with Redis's clock (`core/state.lua`),
//! so a call that reaches Redis after the window ended (this instance was
//! paused, Redis stalled) is served, and one that reaches it inside the
//! window is not, whatever the instance's clock said when it sent it.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use tokio::sync::watch;

use crate::domain::{Freeze, FreezeId, Kind, Reason, Window};

/// Milliseconds since the Unix epoch on this instance's clock: freezes are
/// windows of wall-clock time (their windows are judged again by Redis).
pub fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
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

    /// The first field of a call's context (`core/state.lua`):
    /// `start_ms|until_ms`.
    pub fn context_field(&self) -> String {
        format!(
            "{}|{}",
            self.window.start_ms.max(0),
            self.window.end_ms.max(0)
        )
    }
}

/// A freeze and its window now or next, worked out when first needed and
/// again once it ended (working out a cron window takes a while; a lookup
/// should not).
struct Entry {
    freeze: Freeze,
    window: Mutex<Cached>,
}

#[derive(Clone, Copy)]
enum Cached {
    NotYet,
    Window(Window),
    /// It holds no more.
    Over,
}

impl Entry {
    fn window_at(&self, now_ms: i64) -> Option<Window> {
        let mut cached = self.window.lock().unwrap_or_else(|e| e.into_inner());
        match *cached {
            Cached::Window(window) if window.end_ms > now_ms => return Some(window),
            Cached::Over => return None,
            _ => {}
        }
        let window = self.freeze.window_at(now_ms);
        *cached = window.map_or(Cached::Over, Cached::Window);
        window
    }
}

/// The freezes this instance holds, swapped whole when the list changes.
pub struct FreezeBook {
    entries: ArcSwap<Vec<Entry>>,
    /// Bumped at every change of the list.
    changes: watch::Sender<u64>,
    /// Whether the list was loaded from Redis at least once.
    loaded: watch::Sender<bool>,
}

impl Default for FreezeBook {
    fn default() -> Self {
        Self {
            entries: ArcSwap::from_pointee(Vec::new()),
            changes: watch::Sender::new(0),
            loaded: watch::Sender::new(false),
        }
    }
}

impl FreezeBook {
    /// Holds `freezes` from now on.
    pub fn replace(&self, freezes: Vec<Freeze>) {
        let entries = freezes
            .into_iter()
            .map(|freeze| Entry {
                freeze,
                window: Mutex::new(Cached::NotYet),
            })
            .collect();
        self.entries.store(Arc::new(entries));
        self.changes.send_modify(|n| *n += 1);
        self.loaded.send_replace(true);
    }

    /// Every freeze held.
    pub fn all(&self) -> Vec<Freeze> {
        self.entries
            .load()
            .iter()
            .map(|e| e.freeze.clone())
            .collect()
    }

    /// Tells of every change of the list.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Tells when the list was first loaded.
    pub fn loaded(&self) -> watch::Receiver<bool> {
        self.loaded.subscribe()
    }

    /// The freeze that holds the `kind` named `name` at `now_ms`, or the one
    /// that will next; `None` when no freeze matches it (the common case:
    /// then a call carries nothing).
    pub fn for_name(&self, kind: Kind, name: &str, now_ms: i64) -> Option<NameFreeze> {
        let entries = self.entries.load();
        if entries.is_empty() {
            return None;
        }
        let mut windows: Vec<(Window, &Entry)> = entries
            .iter()
            .filter(|e| e.freeze.matches(kind, name))
            .filter_map(|e| e.window_at(now_ms).map(|w| (w, e)))
            .collect();
        windows.sort_by_key(|(w, _)| w.start_ms);
        let (first, entry) = *windows.first()?;
        let mut window = first;
        for (next, _) in &windows[1..] {
            if next.start_ms > window.end_ms {
                break;
            }
            window.end_ms = window.end_ms.max(next.end_ms);
        }
        Some(NameFreeze {
            window,
            freeze_id: entry.freeze.id,
            reason: entry.freeze.reason.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{NamePattern, Schedule};

    fn once(pattern: &str, start_ms: i64, end_ms: i64) -> Freeze {
        Freeze {
            id: FreezeId::new(),
            pattern: NamePattern::parse(pattern).unwrap(),
            kind: None,
            reason: None,
            schedule: Schedule::OneOff(Window { start_ms, end_ms }),
            created_ms: 0,
            by: None,
        }
    }

    #[test]
    fn a_name_no_freeze_matches_carries_nothing() {
        let book = FreezeBook::default();
        assert!(book.for_name(Kind::Lock, "x", 5).is_none());
        book.replace(vec![once("deploy-*", 0, 10)]);
        assert!(book.for_name(Kind::Lock, "build", 5).is_none());
        let frozen = book.for_name(Kind::Lock, "deploy-a", 5).unwrap();
        assert!(frozen.holds(5));
        assert_eq!(frozen.context_field(), "0|10");
    }

    #[test]
    fn overlapping_windows_are_one_and_an_ended_one_gives_way_to_the_next() {
        let book = FreezeBook::default();
        book.replace(vec![once("a", 0, 10), once("a", 5, 20), once("a", 30, 40)]);
        let frozen = book.for_name(Kind::Semaphore, "a", 5).unwrap();
        assert_eq!((frozen.window.start_ms, frozen.window.end_ms), (0, 20));
        let next = book.for_name(Kind::Semaphore, "a", 25).unwrap();
        assert!(!next.holds(25));
        assert_eq!(next.window.start_ms, 30);
        assert!(book.for_name(Kind::Semaphore, "a", 40).is_none());
    }
}
