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
//!
//! A list is only as good as it is fresh: one never loaded (this instance
//! started while Redis was down) or read long ago (this instance was paused
//! while a freeze was made) does not name every freeze in force. So the book
//! keeps when its list was last known to be Redis's, twice: by this
//! instance's monotonic clock, from when the read was *sent*
//! ([`FreezeBook::is_fresh`]: a stale book makes every call hold its line,
//! [`HOLD_ALL`]), and by Redis's clock, when Redis read it: every call
//! carries that plus [`FRESH_FOR`], and the function holds the line once
//! Redis's clock passes it (a call built with a fresh list that reached
//! Redis late: its instance stopped or its connection stalled in between).
//!
//! Working a freeze's windows out is the one cost a list has (a cron search,
//! bounded in `domain/schedule.rs`): it is done once per freeze, when the
//! list is read, by the task that reads it, and kept across reloads while
//! Redis keeps the freeze unchanged; again only once the window worked out
//! has passed. A request only looks windows up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::sync::{watch, Notify};

use super::clock::{wall_clock_ms, CHECK_AFTER, FRESH_FOR, HOLD_ALL, WAIT_AFTER};
use super::timeline::{work_out, Entry, NameFreeze, Read, Timeline};
use crate::domain::{Freeze, FreezeId, Kind, Window};
use crate::engine::functions::invoker::FreezeField;

/// The freezes this instance holds, swapped whole when the list changes.
pub struct FreezeBook {
    /// Sorted by when each was made.
    entries: ArcSwap<Vec<Arc<Entry>>>,
    /// How many times a freeze's windows were worked out (a bounded search
    /// each, but the one cost a list of freezes has).
    computed: AtomicU64,
    /// Bumped at every change of the list.
    changes: watch::Sender<u64>,
    /// Whether the list was loaded from Redis at least once.
    loaded: watch::Sender<bool>,
    /// The list's version in Redis (`freezes.lua`), as last read.
    version: Mutex<String>,
    /// What [`Self::read_at`] counts from.
    origin: Instant,
    /// When the read that last found the list as held was sent, in
    /// nanoseconds after `origin`, plus one (0: never).
    read_at: AtomicU64,
    /// Until when (Redis's clock, ms) the list counts as fresh: when Redis
    /// ran that read, plus [`FRESH_FOR`].
    fresh_until_ms: AtomicI64,
    /// Bumped whenever the list is found fresh again.
    confirmed: watch::Sender<u64>,
    /// Asks the task that follows the list to check it now.
    wanted: Notify,
}

impl Default for FreezeBook {
    fn default() -> Self {
        Self {
            entries: ArcSwap::from_pointee(Vec::new()),
            computed: AtomicU64::new(0),
            changes: watch::Sender::new(0),
            loaded: watch::Sender::new(false),
            version: Mutex::new(String::new()),
            // A while back, so that a read sent before the book was made
            // counts from when it was sent (no read is, but tests make some).
            origin: Instant::now()
                .checked_sub(Duration::from_secs(10))
                .unwrap_or_else(Instant::now),
            read_at: AtomicU64::new(0),
            fresh_until_ms: AtomicI64::new(0),
            confirmed: watch::Sender::new(0),
            wanted: Notify::new(),
        }
    }
}

impl FreezeBook {
    /// Holds the freezes `stored` (each as Redis keeps it), Redis's list as
    /// `read` found it, from now on. A freeze held already, unchanged, is
    /// kept as it is, windows and all; only a new or changed one is read
    /// (`parse`: `None` for one that does not read as a freeze, left out)
    /// and has its windows worked out, here, by the task that reads the
    /// list, never by a request.
    pub fn replace(
        &self,
        stored: Vec<String>,
        read: &Read,
        parse: impl Fn(&str) -> Option<Freeze>,
    ) {
        let now_ms = wall_clock_ms();
        let before = self.entries.load();
        let held: HashMap<&str, &Arc<Entry>> =
            before.iter().map(|e| (e.stored.as_str(), e)).collect();
        let mut entries: Vec<Arc<Entry>> = stored
            .into_iter()
            .filter_map(|text| match held.get(text.as_str()) {
                Some(entry) => Some(Arc::clone(entry)),
                None => parse(&text).map(|freeze| {
                    let timeline = work_out(&freeze, now_ms, &self.computed);
                    Arc::new(Entry {
                        freeze,
                        stored: text,
                        timeline: Mutex::new(timeline),
                    })
                }),
            })
            .collect();
        entries.sort_by_key(|e| e.freeze.created_ms);
        self.entries.store(Arc::new(entries));
        read.version
            .clone_into(&mut self.version.lock().unwrap_or_else(|e| e.into_inner()));
        self.changes.send_modify(|n| *n += 1);
        self.loaded.send_replace(true);
        self.stamp(read);
    }

    /// Whether the list `read` found (its version) is the list held: then
    /// it counts as fresh from that read; if not, it must be read again.
    pub fn confirm(&self, read: &Read) -> bool {
        let same = *self.version.lock().unwrap_or_else(|e| e.into_inner()) == read.version
            && *self.loaded.borrow();
        if same {
            self.stamp(read);
        }
        same
    }

    fn stamp(&self, read: &Read) {
        let ms = i64::try_from(FRESH_FOR.as_millis()).unwrap_or(i64::MAX);
        self.fresh_until_ms
            .store(read.redis_ms.saturating_add(ms), Ordering::Release);
        let ns = read.sent.saturating_duration_since(self.origin).as_nanos();
        let ns = u64::try_from(ns).unwrap_or(u64::MAX - 1) + 1;
        self.read_at.store(ns, Ordering::Release);
        self.confirmed.send_modify(|n| *n += 1);
    }

    /// Whether the list held was Redis's less than `FRESH_FOR` before
    /// `now` (by this instance's monotonic clock, which runs on while the
    /// process is stopped); never, before it was first loaded.
    pub fn is_fresh(&self, now: Instant) -> bool {
        self.age(now).is_some_and(|age| age < FRESH_FOR)
    }

    /// The freeze field of a call on the `kind` named `name` made now
    /// (`core/state.lua`): `start_ms|until_ms|fresh_ms`, the name's window
    /// (both empty for none) and until when the list is fresh by Redis's
    /// clock; `HOLD_ALL` while it is not fresh by this instance's.
    pub fn context_field(&self, kind: Kind, name: &str) -> String {
        if !self.is_fresh(Instant::now()) {
            return HOLD_ALL.to_owned();
        }
        let fresh_ms = self.fresh_until_ms.load(Ordering::Acquire);
        match self.for_name(kind, name, wall_clock_ms()) {
            Some(freeze) => format!("{}|{fresh_ms}", freeze.context_field()),
            None => format!("||{fresh_ms}"),
        }
    }

    /// How long ago the list held was last found to be Redis's, by this
    /// instance's monotonic clock; `None` before it was first loaded.
    fn age(&self, now: Instant) -> Option<Duration> {
        match self.read_at.load(Ordering::Acquire) {
            0 => None,
            ns => Some(now.saturating_duration_since(self.origin + Duration::from_nanos(ns - 1))),
        }
    }

    /// Makes the list fresh enough for a call that may grant, before it is
    /// built: the list is checked only when calls need it (no timer), so a
    /// list older than `CHECK_AFTER` is checked in the background, and one
    /// older than `WAIT_AFTER` (or never loaded) is waited for, at most
    /// `limit` (then the call carries `HOLD_ALL`, as before). A list that
    /// is fresh when the call is built still has `FRESH_FOR` minus
    /// `WAIT_AFTER` to reach Redis before the function holds it as stale.
    pub async fn ready(&self, limit: Duration) {
        match self.age(Instant::now()) {
            Some(age) if age < CHECK_AFTER => {}
            Some(age) if age < WAIT_AFTER => self.wanted.notify_one(),
            _ => {
                let deadline = tokio::time::Instant::now() + limit;
                let mut confirmed = self.confirmed.subscribe();
                loop {
                    if self.age(Instant::now()).is_some_and(|age| age < WAIT_AFTER) {
                        return;
                    }
                    self.wanted.notify_one();
                    confirmed.mark_unchanged();
                    if tokio::time::timeout_at(deadline, confirmed.changed())
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    }

    /// Waits, at most `limit`, until the list is fresh (asking the task that
    /// follows it to check it at once): whether it is.
    pub async fn fresh_within(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        let mut confirmed = self.confirmed.subscribe();
        loop {
            if self.is_fresh(Instant::now()) {
                return true;
            }
            self.wanted.notify_one();
            confirmed.mark_unchanged();
            if tokio::time::timeout_at(deadline, confirmed.changed())
                .await
                .is_err()
            {
                return self.is_fresh(Instant::now());
            }
        }
    }

    /// Resolves when a request waits for the list to be fresh.
    pub(crate) async fn wanted(&self) {
        self.wanted.notified().await;
    }

    /// Every freeze held that `shown` lets through, in the order they were
    /// made, each with its windows at `now_ms` (worked out already: a
    /// lookup each).
    pub fn listing(
        &self,
        now_ms: i64,
        mut shown: impl FnMut(&Freeze) -> bool,
    ) -> Vec<(Freeze, Timeline)> {
        self.entries
            .load()
            .iter()
            .filter(|e| shown(&e.freeze))
            .map(|e| (e.freeze.clone(), e.timeline_at(now_ms, &self.computed)))
            .collect()
    }

    /// The freeze `id`, with its windows at `now_ms`.
    pub fn get(&self, id: FreezeId, now_ms: i64) -> Option<(Freeze, Timeline)> {
        self.entries
            .load()
            .iter()
            .find(|e| e.freeze.id == id)
            .map(|e| (e.freeze.clone(), e.timeline_at(now_ms, &self.computed)))
    }

    /// Works out again the windows of every freeze whose window has passed
    /// by `now_ms`, so that requests find them worked out (a comparison
    /// each for the others).
    pub fn work_ahead(&self, now_ms: i64) {
        for entry in self.entries.load().iter() {
            entry.timeline_at(now_ms, &self.computed);
        }
    }

    /// The windows of `freeze` at `now_ms`: looked up when it is held,
    /// else worked out (a freeze just made, when reading the list after it
    /// failed).
    pub fn timeline_of(&self, freeze: &Freeze, now_ms: i64) -> Timeline {
        self.entries
            .load()
            .iter()
            .find(|e| e.freeze.id == freeze.id)
            .map_or_else(
                || work_out(freeze, now_ms, &self.computed),
                |e| e.timeline_at(now_ms, &self.computed),
            )
    }

    /// How many times a freeze's windows were worked out since this book
    /// was made.
    pub fn computed(&self) -> u64 {
        self.computed.load(Ordering::Relaxed)
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
        let mut windows: Vec<(Window, &Arc<Entry>)> = entries
            .iter()
            .filter(|e| e.freeze.matches(kind, name))
            .filter_map(|e| e.timeline_at(now_ms, &self.computed).window.map(|w| (w, e)))
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

impl FreezeField for FreezeBook {
    fn context_field(&self, kind: Kind, name: &str) -> String {
        Self::context_field(self, kind, name)
    }
}
