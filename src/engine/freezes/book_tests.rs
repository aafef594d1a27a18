//! The book's tests: windows worked out once, lookups by name, and how
//! fresh the list counts.

use std::time::{Duration, Instant};

use super::book::FreezeBook;
use super::clock::{wall_clock_ms, CHECK_AFTER, FRESH_FOR, HOLD_ALL, WAIT_AFTER};
use super::timeline::Read;
use crate::domain::{Freeze, FreezeId, Kind, NamePattern, Recurring, Schedule, Window, DAY_MS};

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
