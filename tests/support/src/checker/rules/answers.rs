//! Answers: each against what the contract names for its call; a missing answer
//! or a 503 only around a fault.

use std::time::Duration;

use crate::checker::limits::{NO_ANSWER_SLACK, UNAVAILABLE_AFTER};
use crate::checker::spans::faulted;
use crate::checker::{Rule, Verdict};
use crate::history::{when, Answer, History, Op};

/// Each answer against what the contract names for its call, and missing
/// answers and 503s against the faults.
pub(crate) fn answers(history: &History, verdict: &mut Verdict) {
    for call in &history.calls {
        let what = || {
            format!(
                "{} {:?} via instance {} (sent {}, answered {})",
                call.name,
                call.op,
                call.instance,
                when(call.sent),
                when(call.answered)
            )
        };
        match &call.answer {
            Answer::Unclear(answer) => verdict.flag(Rule::Unclear, format!("{}: {answer}", what())),
            Answer::None { .. } => {
                if !faulted(
                    history,
                    call.instance,
                    (call.sent, call.answered),
                    NO_ANSWER_SLACK,
                    NO_ANSWER_SLACK,
                ) {
                    verdict.flag(
                        Rule::NoAnswer,
                        format!(
                            "{}: {} outside any fault of it or Redis",
                            what(),
                            call.answer
                        ),
                    );
                }
            }
            Answer::Status { status: 503, .. } => {
                // A request waits out an outage: its 503 comes when the
                // outage is still on, or a moment after.
                if !faulted(
                    history,
                    call.instance,
                    (call.answered, call.answered),
                    Duration::ZERO,
                    UNAVAILABLE_AFTER,
                ) {
                    verdict.flag(
                        Rule::Unavailable,
                        format!("{}: 503 away from any fault of it or Redis", what()),
                    );
                }
            }
            Answer::Status { status, slug } => {
                let named = match call.op {
                    Op::Acquire(_) => matches!(*status, 409 | 423),
                    Op::Refresh { .. } => *status == 404,
                    Op::Release { .. } | Op::ForceRelease => matches!(*status, 204 | 404),
                };
                if !named {
                    verdict.flag(Rule::Unclear, format!("{}: {status} {slug}", what()));
                }
            }
            Answer::Lease { granted, .. } => {
                if let Op::Acquire(acquire) = call.op {
                    if *granted != acquire.ask {
                        verdict.flag(
                            Rule::Granted,
                            format!("{}: asked {}, told {granted}", what(), acquire.ask),
                        );
                    }
                }
                if matches!(call.op, Op::Release { .. } | Op::ForceRelease) {
                    verdict.flag(Rule::Unclear, format!("{}: a lease body", what()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::checker::synthetic::*;

    /// Point 3 of issue 30: a missing answer only with a fault of its instance
    /// or Redis over it; releases judged; a 503 only during or right after a
    /// fault; a 404 for a held lease only after a force-release or data loss.
    #[test]
    fn the_checker_excuses_missing_answers_and_503s_only_by_their_faults() {
        let exclusive = Ask::EXCLUSIVE;
        let unanswered_release = || {
            let mut calls = hold(LOCK, exclusive, 1, 0, 0, 9000);
            calls.insert(
                1,
                release(1, LOCK, 1, (1000, 2500), Answer::None { reached: true }),
            );
            calls
        };
        let of_other = checked(
            vec![unanswered_release()],
            vec![fault(
                Target::Instance(1),
                FaultKind::InstanceKill,
                1200,
                1300,
            )],
        );
        assert_eq!(
            of_other.count(Rule::NoAnswer),
            1,
            "{:?}",
            of_other.violations
        );
        let of_its_own = checked(
            vec![unanswered_release()],
            vec![fault(
                Target::Instance(0),
                FaultKind::InstanceKill,
                1200,
                1300,
            )],
        );
        assert!(
            of_its_own.violations.is_empty(),
            "{:?}",
            of_its_own.violations
        );
        let of_redis = checked(
            vec![unanswered_release()],
            vec![fault(Target::Redis, FaultKind::RedisStall, 1200, 1300)],
        );
        assert!(of_redis.violations.is_empty(), "{:?}", of_redis.violations);

        // A 503 long after a fault, and one right after it.
        let unavailable = |answered: u64| {
            let mut calls = hold(LOCK, exclusive, 1, 0, 0, 20_000);
            calls.insert(
                1,
                release(
                    1,
                    LOCK,
                    1,
                    (answered - 1000, answered),
                    status(503, "redis-unavailable"),
                ),
            );
            calls
        };
        let stall = || vec![fault(Target::Redis, FaultKind::RedisStall, 1000, 3000)];
        let late = checked(vec![unavailable(10_000)], stall());
        assert_eq!(late.count(Rule::Unavailable), 1, "{:?}", late.violations);
        let right_after = checked(vec![unavailable(4000)], stall());
        assert!(
            right_after.violations.is_empty(),
            "{:?}",
            right_after.violations
        );

        // A release answered 404 while its holder was told it held the lease.
        let lost = || {
            let mut calls = hold(LOCK, exclusive, 1, 0, 0, 5000);
            calls[1].answer = status(404, "lease-not-found");
            calls
        };
        let nothing_explains = checked(vec![lost()], vec![]);
        assert_eq!(
            nothing_explains.count(Rule::LeaseLost),
            1,
            "{:?}",
            nothing_explains.violations
        );
        let forced = vec![call(
            9,
            LOCK,
            1,
            Op::ForceRelease,
            (3000, 3010),
            status(204, ""),
        )];
        let force_explains = checked(vec![lost(), forced], vec![]);
        assert!(
            force_explains.violations.is_empty(),
            "{:?}",
            force_explains.violations
        );
        // A force-release sent before the grant, unanswered (its instance
        // paused): it may run when the instance resumes, after the grant.
        let late = call(
            9,
            LOCK,
            1,
            Op::ForceRelease,
            (0, 10),
            Answer::None { reached: true },
        );
        let paused = fault(Target::Instance(1), FaultKind::InstancePause, 0, 3000);
        let mut later = hold(LOCK, exclusive, 1, 100, 100, 5000);
        later[1].answer = status(404, "lease-not-found");
        let late_force = checked(vec![later, vec![late]], vec![paused]);
        assert_eq!(
            late_force.count(Rule::LeaseLost),
            0,
            "{:?}",
            late_force.violations
        );
        let loss = vec![fault(
            Target::Redis,
            FaultKind::RedisRestart { data_lost: true },
            3000,
            3700,
        )];
        let loss_explains = checked(vec![lost()], loss.clone());
        assert!(
            loss_explains.violations.is_empty(),
            "{:?}",
            loss_explains.violations
        );
        // Granted once Redis was back (its release found it): the loss did not
        // end it, and a second holder beside it is an overlap.
        let survived = checked(
            vec![
                hold(LOCK, exclusive, 1, 2000, 4000, 6000),
                hold(LOCK, exclusive, 2, 4400, 4500, 5000),
            ],
            loss,
        );
        assert_eq!(
            survived.count(Rule::Capacity),
            1,
            "{:?}",
            survived.violations
        );
    }
}
