//! The line of one name: no waiter stuck while the head surely had room, no
//! acquisition refused while its name was free.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use crate::checker::limits::{LEAVE, MIN_STRETCH, QUEUED_AFTER, STUCK};
use crate::checker::rules::frozen::frozen_windows;
use crate::checker::rules::overtaken::overtaken;
use crate::checker::spans::{call_token, overlaps, subtract, union};
use crate::checker::timeline::timeline;
use crate::checker::{Hold, Path, Rule, Verdict};
use crate::history::{when, Answer, Ask, Call, History, Op};

/// The line of one name: stuck waiters, refusals while free, overtaking
/// (away from the faults `reordering` explains) and the paths of its grants
/// (alone, after waiting).
pub(crate) fn line(
    history: &History,
    name: &str,
    holds: &[Hold],
    explained: &[(SystemTime, SystemTime)],
    reordering: &[(SystemTime, SystemTime)],
    verdict: &mut Verdict,
) {
    let calls: Vec<&Call> = history.calls.iter().filter(|c| c.name == name).collect();
    let acquisitions: Vec<(&Call, Ask)> = calls
        .iter()
        .filter_map(|c| match c.op {
            Op::Acquire(a) => Some((*c, a.ask)),
            _ => None,
        })
        .collect();
    let Some(capacity) = acquisitions.first().map(|(_, a)| a.capacity()) else {
        return;
    };
    // A request with no answer (or a 503, or an unclear one) may be in line
    // until a while after its client gave up: its name is not judged then.
    let unknown = union(
        acquisitions
            .iter()
            .filter(|(c, _)| {
                matches!(
                    c.answer,
                    Answer::None { .. } | Answer::Unclear(_) | Answer::Status { status: 503, .. }
                )
            })
            .map(|(c, _)| (c.sent, c.answered + LEAVE))
            .collect(),
    );
    let frozen = frozen_windows(history, name);
    let unjudged = union(
        explained
            .iter()
            .chain(&unknown)
            .chain(&frozen)
            .copied()
            .collect(),
    );
    let unordered = union(
        reordering
            .iter()
            .chain(&unknown)
            .chain(&frozen)
            .copied()
            .collect(),
    );
    let outstanding: Vec<(SystemTime, SystemTime, u64)> = acquisitions
        .iter()
        .map(|(c, a)| (c.sent, c.answered, a.weight()))
        .collect();
    let room = subtract(&room(holds, &outstanding, capacity), &unjudged);
    overtaken(name, &acquisitions, &unjudged, &unordered, verdict);

    for (call, ask) in &acquisitions {
        let Op::Acquire(acquire) = call.op else {
            continue;
        };
        let others = |from: SystemTime, to: SystemTime| {
            acquisitions.iter().any(|(c, _)| {
                !std::ptr::eq(*c, *call) && overlaps((c.sent, c.answered), (from, to))
            }) || holds.iter().any(|h| {
                h.token != call_token(call).unwrap_or(0)
                    && overlaps((h.start, h.may_until), (from, to))
            })
        };
        let span = (call.sent, call.answered + Duration::from_millis(1));
        let faulted = explained.iter().any(|e| overlaps(*e, span));
        match &call.answer {
            Answer::Lease { .. } => {
                if !others(call.sent, call.answered) {
                    verdict.took(Path::Alone, faulted);
                } else if call.answered.duration_since(call.sent).unwrap_or_default()
                    > Duration::from_millis(300)
                {
                    verdict.took(Path::AfterWaiting, faulted);
                }
            }
            Answer::Status { status: 409, slug } if slug != "superseded" => {
                // Refused although nothing was held or asked around it.
                let idle = !others(call.sent, call.answered);
                let judged = !unjudged.iter().any(|u| overlaps(*u, span));
                if idle && judged && ask.weight() <= capacity {
                    verdict.flag(
                        Rule::RefusedWithRoom,
                        format!(
                            "{name}: {ask} refused ({slug}) via instance {} (sent {}, answered {}) while nothing else held or asked for it",
                            call.instance,
                            when(call.sent),
                            when(call.answered)
                        ),
                    );
                }
            }
            _ => {}
        }
        // Stuck: only requests that were answered (else they are unknown).
        if acquire.wait_ms == 0
            || matches!(
                call.answer,
                Answer::None { .. } | Answer::Unclear(_) | Answer::Status { status: 503, .. }
            )
        {
            continue;
        }
        let queued = call.sent + QUEUED_AFTER;
        let until = call
            .answered
            .min(call.sent + Duration::from_millis(acquire.wait_ms));
        let stretches: Vec<(SystemTime, SystemTime)> = room
            .iter()
            .map(|&(r0, r1)| (r0.max(queued), r1.min(until)))
            .filter(|(from, to)| to.duration_since(*from).unwrap_or_default() >= MIN_STRETCH)
            .collect();
        let total: Duration = stretches
            .iter()
            .map(|(from, to)| to.duration_since(*from).unwrap_or_default())
            .sum();
        if total > STUCK {
            let (from, to) = (stretches[0].0, stretches[stretches.len() - 1].1);
            verdict.flag(
                Rule::Stuck,
                format!(
                    "{name}: a waiter for {ask} via instance {} (sent {}, answered {} {}) stayed queued {} ms in all while the line had room, away from faults ({} .. {})",
                    call.instance,
                    when(call.sent),
                    when(call.answered),
                    call.answer,
                    total.as_millis(),
                    when(from),
                    when(to)
                ),
            );
            verdict
                .evidence
                .push(timeline(history, holds, name, from, to));
        }
    }
}

/// The stretches when the head of a name's line surely had room, whoever it
/// was.
///
/// The line admits its head as soon as the capacity held plus the head's own
/// weight fits. The clients cannot tell the order of the line, but the head
/// is one of the acquisitions then outstanding (answered or not), so the head
/// surely fits when the weight Redis may hold plus the largest weight
/// outstanding does. That never blames the line for a head that did not fit
/// (a large request at the head is not overtaken by smaller ones behind it,
/// a reader waits behind a queued writer).
pub(crate) fn room(
    holds: &[Hold],
    outstanding: &[(SystemTime, SystemTime, u64)],
    capacity: u64,
) -> Vec<(SystemTime, SystemTime)> {
    /// What happens at an instant; ends sort before starts, so that touching
    /// holds and waits do not overlap.
    #[derive(PartialEq, Eq, PartialOrd, Ord)]
    enum Change {
        HoldEnds(u64),
        WaitEnds(u64),
        HoldStarts(u64),
        WaitStarts(u64),
    }
    let mut changes: Vec<(SystemTime, Change)> = Vec::new();
    for h in holds.iter().filter(|h| h.may_until > h.start) {
        changes.push((h.start, Change::HoldStarts(h.ask.weight())));
        changes.push((h.may_until, Change::HoldEnds(h.ask.weight())));
    }
    for &(from, to, weight) in outstanding.iter().filter(|(from, to, _)| to > from) {
        changes.push((from, Change::WaitStarts(weight)));
        changes.push((to, Change::WaitEnds(weight)));
    }
    changes.sort();
    let mut used = 0u64;
    let mut waiting: BTreeMap<u64, usize> = BTreeMap::new();
    let mut stretches = Vec::new();
    let mut since: Option<SystemTime> = None;
    let mut i = 0;
    while i < changes.len() {
        let at = changes[i].0;
        while i < changes.len() && changes[i].0 == at {
            match changes[i].1 {
                Change::HoldStarts(w) => used += w,
                Change::HoldEnds(w) => used -= w,
                Change::WaitStarts(w) => *waiting.entry(w).or_default() += 1,
                Change::WaitEnds(w) => {
                    let n = waiting.get_mut(&w).expect("a wait that started");
                    *n -= 1;
                    if *n == 0 {
                        waiting.remove(&w);
                    }
                }
            }
            i += 1;
        }
        // Room only matters while someone waits.
        let has_room = waiting
            .keys()
            .next_back()
            .is_some_and(|largest| used + largest <= capacity);
        match (since, has_room) {
            (Some(from), false) => {
                if at > from {
                    stretches.push((from, at));
                }
                since = None;
            }
            (None, true) => since = Some(at),
            _ => {}
        }
    }
    stretches
}

#[cfg(test)]
mod tests {
    use crate::checker::synthetic::*;

    #[test]
    fn the_checker_blames_the_line_only_when_its_head_surely_fits() {
        let (exclusive, shared) = (Ask::EXCLUSIVE, Ask::SHARED);
        // A writer left waiting on a free lock: stuck.
        let stuck = checked(
            vec![
                hold(LOCK, exclusive, 1, 0, 0, 1000),
                waiter(LOCK, exclusive, 2, 500, 7000),
            ],
            vec![],
        );
        assert_eq!(stuck.count(Rule::Stuck), 1, "{:?}", stuck.violations);
        assert!(
            stuck.evidence[0].contains("hold token 1 exclusive"),
            "{}",
            stuck.evidence[0]
        );
        // Served at once: fine.
        let served = checked(
            vec![
                hold(LOCK, exclusive, 1, 0, 0, 1000),
                waiter(LOCK, exclusive, 2, 500, 1010),
            ],
            vec![],
        );
        assert!(served.violations.is_empty(), "{:?}", served.violations);
        let reader = || hold(LOCK, shared, 1, 0, 0, 9000);
        // A writer waits for a reader: right.
        let writer_waits = checked(
            vec![reader(), waiter(LOCK, exclusive, 2, 500, 9010)],
            vec![],
        );
        assert!(
            writer_waits.violations.is_empty(),
            "{:?}",
            writer_waits.violations
        );
        // A reader behind a queued writer waits too: right.
        let behind_writer = checked(
            vec![
                reader(),
                waiter(LOCK, exclusive, 3, 400, 9010),
                waiter(LOCK, shared, 2, 500, 9020),
            ],
            vec![],
        );
        assert!(
            behind_writer.violations.is_empty(),
            "{:?}",
            behind_writer.violations
        );
        // A reader kept out while only readers hold: stuck.
        let reader_kept_out = checked(vec![reader(), waiter(LOCK, shared, 2, 500, 8000)], vec![]);
        assert_eq!(
            reader_kept_out.count(Rule::Stuck),
            1,
            "{:?}",
            reader_kept_out.violations
        );
        // One permit held of three: a request for all three waits, one for two
        // is stuck.
        let permits = |permits| Ask::Permits {
            permits,
            limit: LIMIT,
        };
        let one_held = || hold(SEMAPHORE, ONE_PERMIT, 1, 0, 0, 9000);
        let all_wait = checked(
            vec![one_held(), waiter(SEMAPHORE, permits(LIMIT), 2, 500, 9010)],
            vec![],
        );
        assert!(all_wait.violations.is_empty(), "{:?}", all_wait.violations);
        let two_stuck = checked(
            vec![one_held(), waiter(SEMAPHORE, permits(2), 2, 500, 7000)],
            vec![],
        );
        assert_eq!(
            two_stuck.count(Rule::Stuck),
            1,
            "{:?}",
            two_stuck.violations
        );
        // Refused at once while nothing was held or asked: a lease left behind.
        let refused_free = checked(
            vec![
                hold(LOCK, exclusive, 1, 0, 0, 1000),
                vec![refused(7, LOCK, exclusive, (2000, 2005))],
            ],
            vec![],
        );
        assert_eq!(
            refused_free.count(Rule::RefusedWithRoom),
            1,
            "{:?}",
            refused_free.violations
        );
        let refused_held = checked(
            vec![
                hold(LOCK, exclusive, 1, 0, 0, 3000),
                vec![refused(7, LOCK, exclusive, (2000, 2005))],
            ],
            vec![],
        );
        assert!(
            refused_held.violations.is_empty(),
            "{:?}",
            refused_held.violations
        );

        // First come, first served: a writer queued at 0.5 s behind a holder
        // until 9 s; another sent at 3 s granted at 5 s overtook it.
        let line = |second: u64| {
            vec![
                hold(LOCK, exclusive, 1, 0, 0, 5000),
                waiter(LOCK, exclusive, 2, 500, 9000),
                hold(LOCK, exclusive, 3, 3000, second, 8990),
            ]
        };
        let overtaken = checked(line(5000), vec![]);
        assert_eq!(
            overtaken.count(Rule::Overtaken),
            1,
            "{:?}",
            overtaken.violations
        );
        // The same around a fault: not judged.
        let pause = vec![fault(
            Target::Instance(0),
            FaultKind::InstancePause,
            4000,
            4500,
        )];
        let faulted = checked(line(5000), pause);
        assert_eq!(
            faulted.count(Rule::Overtaken),
            0,
            "{:?}",
            faulted.violations
        );
        // A higher priority goes ahead: right; a lower one does not.
        let prioritized = |first: u8, second: u8| {
            let mut calls = line(5000);
            for (i, priority) in [(1, first), (2, second)] {
                if let Op::Acquire(a) = &mut calls[i][0].op {
                    a.priority = priority;
                }
            }
            checked(calls, vec![])
        };
        let higher = prioritized(0, 1);
        assert_eq!(higher.count(Rule::Overtaken), 0, "{:?}", higher.violations);
        assert_eq!(higher.paths.get(&Path::Priority).map(|p| p.0), Some(1));
        let lower = prioritized(2, 1);
        assert_eq!(lower.count(Rule::Overtaken), 1, "{:?}", lower.violations);
    }

    /// Point 1 of issue 30: a waiter stuck mid-run, between faults that leave
    /// only short quiet gaps, is judged over the sum of those gaps.
    #[test]
    fn the_checker_judges_a_stuck_waiter_between_faults() {
        // A fault every 6 s (each 1 s long): with the settle after each, the
        // quiet gaps are 1 s, shorter than STUCK.
        let faults: Vec<Fault> = (0..6)
            .map(|k| {
                let from = 2000 + k * 6000;
                fault(
                    Target::Instance(1),
                    FaultKind::InstancePause,
                    from,
                    from + 1000,
                )
            })
            .collect();
        let exclusive = Ask::EXCLUSIVE;
        // A writer left waiting 30 s on a lock freed at 1 s: stuck, in five gaps.
        let stuck = checked(
            vec![
                hold(LOCK, exclusive, 1, 0, 0, 1000),
                waiter(LOCK, exclusive, 2, 500, 30_500),
            ],
            faults.clone(),
        );
        assert_eq!(stuck.count(Rule::Stuck), 1, "{:?}", stuck.violations);
        // The same wait behind a holder that held the lock until then: fine.
        let behind_holder = checked(
            vec![
                hold(LOCK, exclusive, 1, 0, 0, 30_400),
                waiter(LOCK, exclusive, 2, 500, 30_500),
            ],
            faults.clone(),
        );
        assert!(
            behind_holder.violations.is_empty(),
            "{:?}",
            behind_holder.violations
        );
        // A free stretch the faults explain (each within its settle): fine.
        let explained = checked(
            vec![
                hold(LOCK, exclusive, 1, 0, 0, 1000),
                waiter(LOCK, exclusive, 2, 500, 7500),
            ],
            vec![fault(Target::Redis, FaultKind::RedisStall, 900, 3000)],
        );
        assert!(
            explained.violations.is_empty(),
            "{:?}",
            explained.violations
        );
    }

    /// Point 2 of issue 30: a request that got no answer may still be in line,
    /// ahead of others; it counts in the room until it surely left.
    #[test]
    fn the_checker_keeps_requests_without_an_answer_in_the_line() {
        let (exclusive, shared) = (Ask::EXCLUSIVE, Ask::SHARED);
        // A reader holds; a writer queues at 1 s through instance 1, which is
        // paused a moment; its client gives up at 14 s (no answer); a reader
        // queued behind it at 1.2 s waits for it, rightly, until it left.
        let writer_cut_off = || {
            let op = acquire(exclusive, TTL, 8000);
            vec![call(
                50,
                LOCK,
                1,
                op,
                (1000, 14_000),
                Answer::None { reached: true },
            )]
        };
        let pause = || {
            vec![fault(
                Target::Instance(1),
                FaultKind::InstancePause,
                1500,
                2500,
            )]
        };
        let reader = || hold(LOCK, shared, 1, 0, 0, 30_000);
        let blocked_rightly = checked(
            vec![
                reader(),
                writer_cut_off(),
                waiter(LOCK, shared, 2, 1200, 15_000),
            ],
            pause(),
        );
        assert!(
            blocked_rightly.violations.is_empty(),
            "{:?}",
            blocked_rightly.violations
        );
        // Kept out long after the writer surely left: stuck.
        let kept_out = checked(
            vec![
                reader(),
                writer_cut_off(),
                waiter(LOCK, shared, 2, 1200, 27_000),
            ],
            pause(),
        );
        assert_eq!(kept_out.count(Rule::Stuck), 1, "{:?}", kept_out.violations);
    }
}
