//! A lease's own stream: what it says against what happened to the lease.

use std::time::SystemTime;

use crate::checker::limits::STREAM_LATE;
use crate::checker::spans::overlaps;
use crate::checker::{Path, Rule, Verdict};
use crate::history::{when, Call, History, Op, Target};

/// Each lease's own stream against what happened to the lease: `held`
/// first, nothing after its last event, `released` only after its holder
/// sent a release, `lost` for a force-release only after one was sent, for
/// an expiry only once the lease's told expiry had passed and no more than
/// [`STREAM_LATE`] after its expiry (or after a fault of the stream's
/// instance or of Redis that went on past it); no `refreshed` or `expiring`
/// heard more than [`STREAM_LATE`] after the lease's expiry passed (its
/// instance paused meanwhile or not: a lease gone is only `lost`).
pub(crate) fn streams(
    history: &History,
    explained: &[(SystemTime, SystemTime)],
    verdict: &mut Verdict,
) {
    for followed in &history.follows {
        let Some(hold) = verdict
            .holds
            .iter()
            .find(|h| h.name == followed.name && h.token == followed.lease)
            .cloned()
        else {
            continue;
        };
        let what = format!("{}: the stream of token {}", hold.name, hold.token);
        let events = &followed.events;
        if let Some(first) = events.first() {
            if first.kind != "held" {
                verdict.flag(Rule::Stream, format!("{what} began with {}", first.kind));
            }
        }
        for event in events
            .iter()
            .filter(|e| e.kind == "refreshed" || e.kind == "expiring")
            .filter(|e| e.at > hold.expires_by + STREAM_LATE)
        {
            verdict.flag(
                Rule::Stream,
                format!(
                    "{what} said {} at {}, after the lease's expiry passed ({})",
                    event.kind,
                    when(event.at),
                    when(hold.expires_by)
                ),
            );
        }
        let last = events
            .iter()
            .position(|e| e.kind == "released" || e.kind == "lost");
        let Some(last) = last else {
            continue;
        };
        if last + 1 < events.len() {
            verdict.flag(
                Rule::Stream,
                format!("{what} went on after {}", events[last].kind),
            );
        }
        let event = &events[last];
        let faulted = explained
            .iter()
            .any(|e| overlaps(*e, (followed.opened, event.at)));
        verdict.took(Path::Followed, faulted);
        let sent_before = |op: &dyn Fn(&Call) -> bool| {
            history
                .calls
                .iter()
                .any(|c| c.name == hold.name && c.sent < event.at && op(c))
        };
        let released = sent_before(&|c| c.op == Op::Release { lease: hold.token });
        let forced = sent_before(&|c| c.op == Op::ForceRelease);
        let wrong = match (event.kind.as_str(), event.reason.as_deref()) {
            ("released", _) => !released,
            ("lost", Some("force-released")) => !forced,
            // Expired: not before the holder was told it would (unless a
            // release or force-release may have ended it first, or Redis
            // lost it).
            ("lost", Some("expired")) => event.at < hold.told_until && !released && !forced,
            ("lost", Some("superseded")) => true,
            _ => true,
        };
        if event.kind == "lost" && event.reason.as_deref() == Some("expired") {
            // Due at the expiry, or once a fault of the stream's instance or
            // of Redis that was on then was over.
            let mut due = hold.expires_by;
            while let Some(fault) = history.faults.iter().find(|f| {
                (f.target == Target::Redis || f.target == Target::Instance(followed.instance))
                    && f.from <= due
                    && due < f.to
            }) {
                due = fault.to;
            }
            if event.at > due + STREAM_LATE {
                verdict.flag(
                    Rule::Stream,
                    format!(
                        "{what} said lost (expired) at {}, {} ms after it was due ({})",
                        when(event.at),
                        event.at.duration_since(due).unwrap_or_default().as_millis(),
                        when(due)
                    ),
                );
            }
        }
        if wrong {
            verdict.flag(
                Rule::Stream,
                format!(
                    "{what} ended {} {:?} at {} (201 at {}, told until {})",
                    event.kind,
                    event.reason,
                    when(event.at),
                    when(hold.start),
                    when(hold.told_until)
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::checker::synthetic::*;

    /// The holder's own stream: `released` only after its holder released,
    /// `lost` for an expiry only once the lease was told to end.
    #[test]
    fn the_checker_holds_a_lease_s_stream_to_what_happened() {
        use crate::history::{Followed, StreamEvent};
        let judged = |kind: &str, reason: Option<&str>, at_ms: u64| {
            let mut history = history(vec![hold(LOCK, Ask::EXCLUSIVE, 1, 0, 10, 5000)], vec![]);
            let event = |kind: &str, reason: Option<&str>, at_ms| StreamEvent {
                at: at(at_ms),
                kind: kind.into(),
                reason: reason.map(str::to_owned),
            };
            history.follows.push(Followed {
                client: 1,
                name: LOCK.into(),
                lease: 1,
                instance: 0,
                opened: at(20),
                status: 200,
                events: vec![event("held", None, 30), event(kind, reason, at_ms)],
            });
            judge(&history, &Rules::default())
        };
        let released = judged("released", None, 5010);
        assert!(released.violations.is_empty(), "{:?}", released.violations);
        assert_eq!(released.paths.get(&Path::Followed).map(|p| p.0), Some(1));
        assert_eq!(judged("released", None, 4000).count(Rule::Stream), 1);
        assert_eq!(judged("lost", Some("expired"), 3000).count(Rule::Stream), 1);
        assert_eq!(
            judged("lost", Some("force-released"), 3000).count(Rule::Stream),
            1
        );
    }

    /// Issue 42, item 4: a holder's stream on instance 1, paused (0.4 s to
    /// 4.5 s) across a refresh (at 0.5 s, to 1 s: the lease expired at 1.5 s):
    /// it said `refreshed` and `expiring` after it resumed, for a lease long
    /// gone, and `lost` 2 s after that; and after a loss of Redis's data it said
    /// `force-released` with nobody having force-released it. The service now
    /// says `lost` (`expired`) at once after the resume, and `expired` for a
    /// lease lost with Redis's data.
    #[test]
    fn the_checker_flags_a_stream_that_speaks_of_a_lease_already_gone() {
        use crate::history::{Followed, StreamEvent};
        let event = |kind: &str, reason: Option<&str>, at_ms| StreamEvent {
            at: at(at_ms),
            kind: kind.into(),
            reason: reason.map(str::to_owned),
        };
        let followed = |events: Vec<StreamEvent>| Followed {
            client: 1,
            name: LOCK.into(),
            lease: 1,
            instance: 1,
            opened: at(20),
            status: 200,
            events,
        };
        // Granted at 10 ms for 3 s, refreshed to 1 s at 0.5 s via instance 0;
        // its release at 8 s answered 404 (long expired).
        let paused_across = |events: Vec<StreamEvent>| {
            let mut calls = hold(LOCK, Ask::EXCLUSIVE, 1, 0, 10, 8000);
            calls[0].op = acquire(Ask::EXCLUSIVE, 3000, 0);
            calls[0].answer = Answer::Lease {
                token: 1,
                expires_at: at(3010),
                granted: Ask::EXCLUSIVE,
            };
            calls[1].answer = status(404, "lease-not-found");
            calls.insert(
                1,
                call(
                    1,
                    LOCK,
                    0,
                    Op::Refresh {
                        lease: 1,
                        ttl_ms: 1000,
                    },
                    (500, 510),
                    Answer::Lease {
                        token: 1,
                        expires_at: at(1510),
                        granted: Ask::EXCLUSIVE,
                    },
                ),
            );
            let pause = fault(Target::Instance(1), FaultKind::InstancePause, 400, 4500);
            let mut history = history(vec![calls], vec![pause]);
            history.follows.push(followed(events));
            judge(&history, &Rules::default())
        };
        let held = || event("held", None, 30);
        // The bug: refreshed and expiring after the resume, lost 2 s later.
        let late = paused_across(vec![
            held(),
            event("refreshed", None, 4510),
            event("expiring", None, 4520),
            event("lost", Some("expired"), 6520),
        ]);
        assert_eq!(late.count(Rule::Stream), 3, "{:?}", late.violations);
        assert_eq!(late.violations.len(), 3, "{:?}", late.violations);
        // Each on its own.
        for events in [
            vec![
                held(),
                event("refreshed", None, 4510),
                event("lost", Some("expired"), 4530),
            ],
            vec![
                held(),
                event("expiring", None, 4520),
                event("lost", Some("expired"), 4530),
            ],
            vec![held(), event("lost", Some("expired"), 6520)],
        ] {
            let verdict = paused_across(events.clone());
            assert_eq!(
                verdict.count(Rule::Stream),
                1,
                "{events:?}: {:?}",
                verdict.violations
            );
        }
        // Now: lost, at once after the resume.
        let at_once = paused_across(vec![held(), event("lost", Some("expired"), 4530)]);
        assert!(at_once.violations.is_empty(), "{:?}", at_once.violations);
        // A refresh heard in time, and `expiring` before the expiry, are fine.
        let in_time = paused_across(vec![
            held(),
            event("refreshed", None, 520),
            event("expiring", None, 1200),
            event("lost", Some("expired"), 4530),
        ]);
        assert!(in_time.violations.is_empty(), "{:?}", in_time.violations);

        // A lease lost with Redis's data (at 2 s): `force-released` is wrong
        // (nobody force-released it), `expired` right.
        let lost_with_data = |reason: &str| {
            // (Its release at 5 s: 404, the lease gone.)
            let mut calls = hold(LOCK, Ask::EXCLUSIVE, 1, 0, 10, 5000);
            calls[1].answer = status(404, "lease-not-found");
            let mut history = history(
                vec![calls],
                vec![fault(
                    Target::Redis,
                    FaultKind::RedisRestart { data_lost: true },
                    2000,
                    2700,
                )],
            );
            history
                .follows
                .push(followed(vec![held(), event("lost", Some(reason), 2800)]));
            judge(&history, &Rules::default())
        };
        let forced = lost_with_data("force-released");
        assert_eq!(forced.count(Rule::Stream), 1, "{:?}", forced.violations);
        let expired = lost_with_data("expired");
        assert_eq!(expired.count(Rule::Stream), 0, "{:?}", expired.violations);
    }
}
