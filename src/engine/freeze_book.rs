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

use crate::domain::{Freeze, FreezeId, Kind, Reason, Schedule, Window, DAY_MS};

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
/// checked in the background ([`FreezeBook::ready`]): under steady traffic
/// the list stays fresh without a call ever waiting for it.
pub const CHECK_AFTER: Duration = Duration::from_millis(500);

/// A call that may grant, built with a list older than this, waits for a
/// check first ([`FreezeBook::ready`]): the first call after a quiet spell
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
struct Entry {
    freeze: Freeze,
    /// The freeze as Redis keeps it: what says, at a reload, that it is the
    /// same freeze.
    stored: String,
    timeline: Mutex<Timeline>,
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
    fn timeline_at(&self, now_ms: i64, computed: &AtomicU64) -> Timeline {
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
fn work_out(freeze: &Freeze, now_ms: i64, computed: &AtomicU64) -> Timeline {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{NamePattern, Recurring, Schedule};

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

    /// Holds `freezes` in `book`, each kept as its id and `tag` (a freeze
    /// whose tag changed is a changed freeze).
    fn hold(book: &FreezeBook, freezes: &[Freeze], tag: &str, read: &Read) {
        let stored = freezes.iter().map(|f| format!("{}{tag}", f.id)).collect();
        book.replace(stored, read, |text| {
            freezes
                .iter()
                .find(|f| text.starts_with(&f.id.to_string()))
                .cloned()
        });
    }

    fn recurring(pattern: &str, start: &str, end: &str) -> Freeze {
        Freeze {
            schedule: Schedule::Recurring(Box::new(Recurring::parse(start, end, None).unwrap())),
            ..once(pattern, 0, 1)
        }
    }

    /// A read of version `version` sent at `sent`, run by Redis at 1,004 s.
    fn read(version: &str, sent: Instant) -> Read {
        Read {
            version: version.to_owned(),
            sent,
            redis_ms: 1_004_000,
        }
    }

    #[test]
    fn a_name_no_freeze_matches_carries_no_window() {
        let book = FreezeBook::default();
        assert!(book.for_name(Kind::Lock, "x", 5).is_none());
        hold(
            &book,
            &[once("deploy-*", 0, 10)],
            "",
            &read("1", Instant::now()),
        );
        assert!(book.for_name(Kind::Lock, "build", 5).is_none());
        let frozen = book.for_name(Kind::Lock, "deploy-a", 5).unwrap();
        assert!(frozen.holds(5));
        assert_eq!(frozen.context_field(), "0|10");
        assert_eq!(book.context_field(Kind::Lock, "build"), "||1005000");
    }

    #[test]
    fn overlapping_windows_are_one_and_an_ended_one_gives_way_to_the_next() {
        let book = FreezeBook::default();
        hold(
            &book,
            &[once("a", 0, 10), once("a", 5, 20), once("a", 30, 40)],
            "",
            &read("1", Instant::now()),
        );
        let frozen = book.for_name(Kind::Semaphore, "a", 5).unwrap();
        assert_eq!((frozen.window.start_ms, frozen.window.end_ms), (0, 20));
        let next = book.for_name(Kind::Semaphore, "a", 25).unwrap();
        assert!(!next.holds(25));
        assert_eq!(next.window.start_ms, 30);
        assert!(book.for_name(Kind::Semaphore, "a", 40).is_none());
    }

    #[test]
    fn a_list_never_loaded_or_read_too_long_ago_holds_every_line() {
        let book = FreezeBook::default();
        assert_eq!(book.context_field(Kind::Lock, "x"), HOLD_ALL);
        assert!(!book.confirm(&read("0", Instant::now())), "never loaded");
        let sent = Instant::now();
        hold(&book, &[], "", &read("7", sent));
        assert_eq!(book.context_field(Kind::Lock, "x"), "||1005000");
        let later = sent + FRESH_FOR;
        assert!(!book.is_fresh(later), "read too long ago");
        assert!(!book.confirm(&read("8", later)), "another version");
        assert!(!book.is_fresh(later));
        assert!(book.confirm(&read("7", later)));
        assert!(book.is_fresh(later));
    }

    /// Whether the task that follows the list was asked to check it (and
    /// takes the ask).
    fn asked(book: &FreezeBook) -> bool {
        use futures_util::FutureExt;
        book.wanted().now_or_never().is_some()
    }

    #[tokio::test]
    async fn a_call_asks_for_a_check_only_when_the_list_gets_old_and_waits_only_when_older() {
        let book = FreezeBook::default();
        // Never loaded: asked, and waited for (no check answers here).
        book.ready(Duration::from_millis(20)).await;
        assert!(asked(&book));
        // Fresh: nothing asked, no timer needed while nobody calls.
        hold(&book, &[], "", &read("1", Instant::now()));
        book.ready(Duration::from_secs(60)).await;
        assert!(!asked(&book));
        // Getting old: asked, not waited for (a minute's limit would show).
        book.confirm(&read("1", Instant::now() - CHECK_AFTER));
        tokio::time::timeout(Duration::from_secs(30), book.ready(Duration::from_secs(60)))
            .await
            .expect("not waited for");
        assert!(asked(&book));
        // Older: waited for until a check finds the list Redis's.
        book.confirm(&read("1", Instant::now() - WAIT_AFTER));
        let waiting = book.ready(Duration::from_secs(60));
        tokio::pin!(waiting);
        assert!(futures_util::poll!(&mut waiting).is_pending());
        assert!(asked(&book));
        book.confirm(&read("1", Instant::now()));
        waiting.await;
    }

    #[test]
    fn windows_are_worked_out_once_and_kept_across_reloads_of_unchanged_freezes() {
        let book = FreezeBook::default();
        // Never opens (30 February), always holds, and a one-off.
        let freezes = [
            recurring("team-a-x", "0 0 30 2 *", "0 0 31 2 *"),
            recurring("team-a-y", "0 0 1 1 *", "0 0 1 1 *"),
            once("team-a-z", 0, i64::MAX),
        ];
        hold(&book, &freezes, "", &read("1", Instant::now()));
        assert_eq!(book.computed(), 3, "each worked out once, when read");
        let now = wall_clock_ms();
        for _ in 0..10 {
            hold(&book, &freezes, "", &read("2", Instant::now()));
            assert!(book.for_name(Kind::Lock, "team-a-x", now).is_none());
            assert!(book
                .for_name(Kind::Lock, "team-a-y", now)
                .unwrap()
                .holds(now));
            book.work_ahead(now);
            assert_eq!(book.listing(now, |_| true).len(), 3);
        }
        assert_eq!(book.computed(), 3, "reloads and lookups work nothing out");
        // One changed: only it is worked out again.
        hold(&book, &freezes[..2], "", &read("3", Instant::now()));
        hold(&book, &freezes, "changed", &read("4", Instant::now()));
        assert_eq!(book.computed(), 6, "the three read anew");
        hold(&book, &freezes, "changed", &read("5", Instant::now()));
        assert_eq!(book.computed(), 6);
        // A window that has passed is worked out again, once.
        let now = wall_clock_ms();
        let ends = book
            .for_name(Kind::Lock, "team-a-y", now)
            .unwrap()
            .window
            .end_ms;
        book.work_ahead(ends);
        book.work_ahead(ends + 1);
        assert!(book
            .for_name(Kind::Lock, "team-a-y", ends)
            .unwrap()
            .holds(ends));
        // (And the one that never opens, looked at again a day on.)
        let again = if ends >= now + DAY_MS { 1 } else { 0 };
        assert_eq!(book.computed(), 7 + again);
    }
}
