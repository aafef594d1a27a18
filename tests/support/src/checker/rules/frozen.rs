//! Freezes: no lease of a frozen name granted inside its freeze's window.

use std::time::{Duration, SystemTime};

use crate::checker::limits::{FREEZE_SLACK, SETTLE};
use crate::checker::spans::{call_token, overlaps};
use crate::checker::{Hold, Path, Rule, Verdict};
use crate::history::{when, Answer, Ask, Call, FaultKind, History, Op, Target};

/// When `name` may have been frozen: from each freeze's `POST` until
/// [`SETTLE`] after it surely ended (deleted, or its `until`).
pub(crate) fn frozen_windows(history: &History, name: &str) -> Vec<(SystemTime, SystemTime)> {
    history
        .freezes
        .iter()
        .filter(|f| f.name == name)
        .map(|f| {
            let end = f
                .closed
                .map_or(f.until, |(_, answered)| answered.min(f.until));
            (f.opened.0, end + FREEZE_SLACK + SETTLE)
        })
        .collect()
}

/// No grant of a frozen name inside its freeze's window (see the module
/// doc); the 423s answered.
pub(crate) fn frozen(
    history: &History,
    explained: &[(SystemTime, SystemTime)],
    verdict: &mut Verdict,
) {
    for call in &history.calls {
        if let (Op::Acquire(_), Answer::Status { status: 423, .. }) = (&call.op, &call.answer) {
            let span = (call.sent, call.answered + Duration::from_millis(1));
            let during = explained.iter().any(|e| overlaps(*e, span));
            verdict.took(Path::Frozen, during);
        }
    }
    let data_lost: Vec<(SystemTime, SystemTime)> = history
        .faults
        .iter()
        .filter(|f| f.kind == FaultKind::RedisRestart { data_lost: true })
        .map(|f| (f.from, f.to))
        .collect();
    for freeze in history.freezes.iter().filter(|f| f.made) {
        let from = freeze.opened.1 + FREEZE_SLACK;
        let to = freeze
            .closed
            .map_or(freeze.until, |(sent, _)| sent.min(freeze.until));
        for call in &history.calls {
            let (Op::Acquire(acquire), Answer::Lease { token, .. }) = (&call.op, &call.answer)
            else {
                continue;
            };
            if call.name != freeze.name {
                continue;
            }
            // Granted at most a moment before its 201 arrived, unless a
            // fault held the 201 up.
            let granted_after = call.answered
                - FREEZE_SLACK.min(call.answered.duration_since(call.sent).unwrap_or_default());
            let earliest =
                earliest_grant(history, call, acquire.ask, granted_after, &verdict.holds);
            let inside = earliest > from && call.answered < to;
            // A fault of Redis (a call queued in a stalled Redis runs when it
            // wakes, with the window its instance knew when it sent it) or a
            // restart of its instance; a pause only as `earliest_grant` says.
            let excused = history.faults.iter().any(|f| {
                (f.target == Target::Redis
                    || (f.target == Target::Instance(call.instance)
                        && f.kind != FaultKind::InstancePause))
                    && f.from <= call.answered + FREEZE_SLACK
                    && granted_after <= f.to
            }) || data_lost
                .iter()
                .any(|l| overlaps(*l, (freeze.opened.0, call.answered)));
            if inside && !excused {
                verdict.flag(
                    Rule::Frozen,
                    format!(
                        "{}: token {token} granted via instance {} (sent {}, 201 {}) inside the freeze made {} and deleted {:?}",
                        call.name,
                        call.instance,
                        when(call.sent),
                        when(call.answered),
                        when(freeze.opened.1),
                        freeze.closed.map(|(sent, _)| when(sent).to_string())
                    ),
                );
            }
        }
    }
}

/// The earliest moment the lease `call` was told of may have been granted:
/// `granted_after` (a moment before its 201), or, when a pause of its
/// instance may have held the 201 up (it came within [`FREEZE_SLACK`] of the
/// resume), a moment before the pause, but never before the request was
/// sent, nor while a hold that leaves it no room was still held as told.
/// (A pause does not excuse a grant that cannot have come before it.)
pub(crate) fn earliest_grant(
    history: &History,
    call: &Call,
    ask: Ask,
    granted_after: SystemTime,
    holds: &[Hold],
) -> SystemTime {
    let mut earliest = granted_after;
    for f in &history.faults {
        if f.target == Target::Instance(call.instance)
            && f.kind == FaultKind::InstancePause
            && f.from < call.answered
            && call.answered <= f.to + FREEZE_SLACK
        {
            let before = f.from.checked_sub(FREEZE_SLACK).unwrap_or(f.from);
            earliest = earliest.min(before.max(call.sent));
        }
    }
    let token = call_token(call);
    loop {
        let busy = holds.iter().find(|h| {
            h.name == call.name
                && Some(h.token) != token
                && h.ask.weight() + ask.weight() > ask.capacity()
                && h.held_at(earliest)
        });
        match busy {
            Some(h) if h.told_until < call.answered => earliest = h.told_until,
            _ => return earliest,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::checker::synthetic::*;

    /// No grant inside a freeze window: a lock frozen from 1 s (its `POST`
    /// answered) to 6 s (its `DELETE` sent); a waiter granted at 4 s is flagged,
    /// one granted at 1.5 s (instances apply a freeze within a second) or at
    /// 6.5 s is not, nor one at 4 s when the freeze was never made (its `POST`
    /// unanswered) or a pause of its instance held its 201 up; the line is not
    /// judged while the name was frozen (a waiter held back is not stuck).
    #[test]
    fn the_checker_flags_a_grant_inside_a_freeze_window() {
        let freeze = |made: bool| crate::history::Freeze {
            name: LOCK.to_owned(),
            opened: (at(900), at(1000)),
            made,
            until: at(20_000),
            closed: Some((at(6000), at(6100))),
        };
        let judged = |granted: u64, made: bool, faults: Vec<Fault>| {
            let mut history = history(
                vec![
                    hold(LOCK, Ask::EXCLUSIVE, 1, 0, 10, 500),
                    waiter(LOCK, Ask::EXCLUSIVE, 2, 600, granted),
                ],
                faults,
            );
            history.freezes.push(freeze(made));
            judge(&history, &Rules::default())
        };
        let inside = judged(4000, true, Vec::new());
        assert_eq!(inside.count(Rule::Frozen), 1, "{:?}", inside.violations);
        assert_eq!(inside.violations.len(), 1, "{:?}", inside.violations);
        for (granted, made) in [(1500, true), (6500, true), (4000, false)] {
            let verdict = judged(granted, made, Vec::new());
            assert!(
                verdict.violations.is_empty(),
                "{granted} {made}: {:?}",
                verdict.violations
            );
        }
        let pause = vec![fault(
            Target::Instance(0),
            FaultKind::InstancePause,
            2000,
            3900,
        )];
        let paused = judged(4000, true, pause);
        assert!(paused.violations.is_empty(), "{:?}", paused.violations);
        // Without the freeze, the same waiter held back 5.5 s with room is stuck.
        let mut history = history(
            vec![
                hold(LOCK, Ask::EXCLUSIVE, 1, 0, 10, 500),
                waiter(LOCK, Ask::EXCLUSIVE, 2, 600, 6500),
            ],
            Vec::new(),
        );
        assert_eq!(judge(&history, &Rules::default()).count(Rule::Stuck), 1);
        history.freezes.push(freeze(true));
        let held_back = judge(&history, &Rules::default());
        assert!(
            held_back.violations.is_empty(),
            "{:?}",
            held_back.violations
        );
    }

    /// Issue 42, item 2: instance 1 paused (500 ms to 3 s) while a freeze of
    /// the lock was made (answered at 1 s, so applied by 2 s), its list stale
    /// when it resumed: it granted a waiter (sent before the pause, whose
    /// holder released inside the window, at 2.5 s) 2.3 s into the window, and
    /// then a newcomer that does not wait. The pause cannot have held up a
    /// grant made before the window: the holder held the lock until inside it.
    /// The service now checks its list after a resume: the waiter is granted
    /// after the freeze is deleted, the newcomer refused (423).
    #[test]
    fn the_checker_flags_grants_from_a_freeze_list_stale_after_a_pause() {
        let freeze = crate::history::Freeze {
            name: LOCK.to_owned(),
            opened: (at(900), at(1000)),
            made: true,
            until: at(20_000),
            closed: Some((at(6000), at(6100))),
        };
        let pause = || {
            vec![fault(
                Target::Instance(1),
                FaultKind::InstancePause,
                500,
                3000,
            )]
        };
        let judged = |waiter_granted: u64, newcomer: Answer| {
            let mut waited = waiter(LOCK, Ask::EXCLUSIVE, 2, 300, waiter_granted);
            for c in &mut waited {
                c.instance = 1;
            }
            let mut new = vec![call(
                8,
                LOCK,
                1,
                acquire(Ask::EXCLUSIVE, TTL, 0),
                (3320, 3330),
                newcomer.clone(),
            )];
            if let Answer::Lease { token, .. } = newcomer {
                new[0].answer = Answer::Lease {
                    token,
                    expires_at: at(3330 + TTL),
                    granted: Ask::EXCLUSIVE,
                };
                new.push(release(8, LOCK, token, (3400, 3401), status(204, "")));
            }
            let mut history = history(
                vec![hold(LOCK, Ask::EXCLUSIVE, 1, 0, 10, 2500), waited, new],
                pause(),
            );
            history.freezes.push(freeze.clone());
            judge(&history, &Rules::default())
        };
        let lease = Answer::Lease {
            token: 3,
            expires_at: at(0),
            granted: Ask::EXCLUSIVE,
        };
        // The bug: both granted inside the window, just after the resume.
        let stale = judged(3300, lease);
        assert_eq!(stale.count(Rule::Frozen), 2, "{:?}", stale.violations);
        assert_eq!(stale.violations.len(), 2, "{:?}", stale.violations);
        // Now: the waiter granted once the freeze was deleted, the newcomer
        // refused.
        let checked = judged(6050, status(423, "frozen"));
        assert!(checked.violations.is_empty(), "{:?}", checked.violations);
    }
}
