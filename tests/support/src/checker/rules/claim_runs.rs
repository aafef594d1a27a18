//! Holders of claims run as `baton run` does: each stops soon after a force-
//! release of one of its names.

use std::time::SystemTime;

use crate::checker::limits::RUN_ON_LIMIT;
use crate::checker::spans::overlaps;
use crate::checker::{Rule, Verdict};
use crate::history::{when, Answer, History, Op};

/// Each holder of a claim that runs as `baton run` does, against the
/// force-releases of its names: once one was answered 204 while it held the
/// claim, it must have stopped within [`RUN_ON_LIMIT`], unless a fault
/// (of an instance, of Redis) overlaps the time in between.
pub(crate) fn claim_runs(
    history: &History,
    explained: &[(SystemTime, SystemTime)],
    verdict: &mut Verdict,
) {
    for run in &history.claim_runs {
        let forced = history
            .calls
            .iter()
            .filter(|c| c.op == Op::ForceRelease && run.names.contains(&c.name))
            .filter(|c| matches!(c.answer, Answer::Status { status: 204, .. }))
            .filter(|c| c.answered > run.granted && c.sent < run.stopped)
            .min_by_key(|c| c.answered);
        let Some(forced) = forced else {
            continue;
        };
        let faulted = explained
            .iter()
            .any(|e| overlaps(*e, (forced.sent, run.stopped)));
        let ran_on = run
            .stopped
            .duration_since(forced.answered)
            .unwrap_or_default();
        if ran_on > RUN_ON_LIMIT && !faulted {
            verdict.flag(
                Rule::ClaimRanOn,
                format!(
                    "the holder of the claim of {} (client {}, 201 {}) ran on {} ms after {} was force-released ({}); it heard of a loss {}",
                    run.names.join(", "),
                    run.client,
                    when(run.granted),
                    ran_on.as_millis(),
                    forced.name,
                    when(forced.answered),
                    run.lost_heard
                        .map_or_else(|| "never".to_owned(), |at| format!("at {}", when(at)))
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::checker::synthetic::*;

    #[test]
    fn the_checker_flags_a_claim_s_holder_that_runs_on_past_a_force_release() {
        use crate::history::ClaimRun;
        let judged = |forced_name: &str, stopped: u64, faults: Vec<Fault>| {
            let forced = call(
                9,
                forced_name,
                0,
                Op::ForceRelease,
                (2000, 2050),
                status(204, ""),
            );
            let mut history = history(vec![vec![forced]], faults);
            history.claim_runs.push(ClaimRun {
                client: 1,
                names: vec!["claim-x".to_owned(), "claim-w".to_owned()],
                granted: at(1000),
                lost_heard: None,
                stopped: at(stopped),
            });
            judge(&history, &Rules::default())
        };
        // Ran on 7 s past the force-release of one of its names: flagged.
        let ran_on = judged("claim-w", 9000, Vec::new());
        assert_eq!(ran_on.count(Rule::ClaimRanOn), 1, "{:?}", ran_on.violations);
        assert_eq!(ran_on.violations.len(), 1, "{:?}", ran_on.violations);
        // Stopped within the limit, a force-release of another name, or a
        // pause of an instance in between: nothing to flag.
        let pause = vec![fault(
            Target::Instance(0),
            FaultKind::InstancePause,
            2100,
            5000,
        )];
        for (name, stopped, faults) in [
            ("claim-w", 2600, Vec::new()),
            ("claim-q", 9000, Vec::new()),
            ("claim-w", 9000, pause),
        ] {
            let verdict = judged(name, stopped, faults);
            assert!(
                verdict.violations.is_empty(),
                "{name} {stopped}: {:?}",
                verdict.violations
            );
        }
    }
}
