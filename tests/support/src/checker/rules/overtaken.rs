//! Overtaking: no request granted ahead of one queued well before it, away from
//! faults (a stall of Redis is no excuse).

use std::time::{Duration, SystemTime};

use crate::checker::limits::ORDER_SLACK;
use crate::checker::spans::overlaps;
use crate::checker::{Path, Rule, Verdict};
use crate::history::{when, Answer, Ask, Call, Op};

/// First come, first served: a request granted while one sent well before it
/// still waited (and went on waiting well after), with no fault or unknown
/// request around the grant (`unordered`: a stall of Redis is no excuse),
/// overtook it. (With one limit per name, as the runs use, the line is
/// strictly in order, for readers and permits too; a waiter that lost its
/// place to a fault of its instance or a restart of Redis rejoins at the
/// back within the settle time, one dropped in a stall in its place.)
/// Names with `newest_wins` requests are not judged. The path of priority is
/// taken during a fault when any fault (`unjudged`) was around it.
pub(crate) fn overtaken(
    name: &str,
    acquisitions: &[(&Call, Ask)],
    unjudged: &[(SystemTime, SystemTime)],
    unordered: &[(SystemTime, SystemTime)],
    verdict: &mut Verdict,
) {
    let newest_wins = acquisitions
        .iter()
        .any(|(c, _)| matches!(c.op, Op::Acquire(a) if a.newest_wins));
    if newest_wins {
        return;
    }
    let priority = |c: &Call| match c.op {
        Op::Acquire(a) => a.priority,
        _ => 0,
    };
    let waited = |c: &Call| {
        matches!(c.op, Op::Acquire(a) if a.wait_ms > 0)
            && matches!(
                c.answer,
                Answer::Lease { .. } | Answer::Status { status: 409, .. }
            )
    };
    for (b, b_ask) in acquisitions
        .iter()
        .filter(|(c, _)| matches!(c.answer, Answer::Lease { .. }))
    {
        let span = (b.sent, b.answered + Duration::from_millis(1));
        let faulted = unjudged.iter().any(|u| overlaps(*u, span));
        let excused = unordered.iter().any(|u| overlaps(*u, span));
        let passed = |a: &Call| {
            waited(a) && a.sent + ORDER_SLACK < b.sent && a.answered > b.answered + ORDER_SLACK
        };
        // Ahead of a lower priority sent before it: the line's order.
        if acquisitions.iter().any(|(a, _)| {
            waited(a) && a.sent < b.sent && a.answered > b.answered && priority(a) < priority(b)
        }) {
            verdict.took(Path::Priority, faulted);
        }
        if excused {
            continue;
        }
        let ahead = acquisitions
            .iter()
            .find(|(a, _)| passed(a) && priority(a) >= priority(b));
        if let Some((a, a_ask)) = ahead {
            verdict.flag(
                Rule::Overtaken,
                format!(
                    "{name}: {b_ask} via instance {} (sent {}, 201 {}) granted ahead of {a_ask} via instance {} (sent {}, answered {} {})",
                    b.instance,
                    when(b.sent),
                    when(b.answered),
                    a.instance,
                    when(a.sent),
                    when(a.answered),
                    a.answer
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::checker::synthetic::*;

    /// Issue 42, item 3: waiters queued well apart (at 0.5 s and 3 s, behind a
    /// holder until 7 s), a Redis stall of 2.5 s (3.5 s to 6 s), then the later
    /// one served first (at 7 s, the first at 9.5 s): overtaken, of the same
    /// priority or of a lower one than the first's. A stall of Redis does not
    /// excuse it: the waiters' instances stayed alive, and the line keeps its
    /// order through a stall. The service now serves them in order.
    #[test]
    fn the_checker_flags_waiters_served_out_of_order_across_a_redis_stall() {
        let stall = || vec![fault(Target::Redis, FaultKind::RedisStall, 3500, 6000)];
        let judged = |first_granted: u64, second_granted: u64, priorities: (u8, u8)| {
            let mut calls = vec![
                hold(LOCK, Ask::EXCLUSIVE, 1, 0, 10, 7000),
                waiter(LOCK, Ask::EXCLUSIVE, 2, 500, first_granted),
                waiter(LOCK, Ask::EXCLUSIVE, 3, 3000, second_granted),
            ];
            for (i, priority) in [(1, priorities.0), (2, priorities.1)] {
                if let Op::Acquire(a) = &mut calls[i][0].op {
                    a.priority = priority;
                }
            }
            checked(calls, stall())
        };
        for priorities in [(0, 0), (2, 1)] {
            // The bug: the later waiter served first, the first 2.5 s after.
            let out_of_order = judged(9500, 7010, priorities);
            assert_eq!(
                out_of_order.count(Rule::Overtaken),
                1,
                "{priorities:?}: {:?}",
                out_of_order.violations
            );
            assert_eq!(
                out_of_order.violations.len(),
                1,
                "{priorities:?}: {:?}",
                out_of_order.violations
            );
            // Now: served in the order they queued.
            let in_order = judged(7010, 7030, priorities);
            assert!(
                in_order.violations.is_empty(),
                "{priorities:?}: {:?}",
                in_order.violations
            );
        }
        // A higher priority that queued later goes first: right, stall or not.
        let higher = judged(9500, 7010, (0, 1));
        assert!(higher.violations.is_empty(), "{:?}", higher.violations);
        // A pause of an instance still excuses it: its waiters may have been
        // dropped and rejoined behind.
        let mut calls = vec![
            hold(LOCK, Ask::EXCLUSIVE, 1, 0, 10, 7000),
            waiter(LOCK, Ask::EXCLUSIVE, 2, 500, 9500),
            waiter(LOCK, Ask::EXCLUSIVE, 3, 3000, 7010),
        ];
        calls[1][0].instance = 1;
        let paused = checked(
            calls,
            vec![fault(
                Target::Instance(1),
                FaultKind::InstancePause,
                3500,
                6000,
            )],
        );
        assert_eq!(paused.count(Rule::Overtaken), 0, "{:?}", paused.violations);
    }
}
