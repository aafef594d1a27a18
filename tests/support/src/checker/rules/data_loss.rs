//! Data loss: Redis without persistence lost its data at least once in the run,
//! and with it never.

use crate::checker::{Rule, Verdict};
use crate::history::{FaultKind, History};

/// Redis without persistence must have lost its data at least once; with
/// persistence, never.
pub(crate) fn data_loss(history: &History, verdict: &mut Verdict) {
    let lost = history
        .faults
        .iter()
        .filter(|f| f.kind == FaultKind::RedisRestart { data_lost: true })
        .count();
    match history.persistent {
        Some(false) if lost == 0 => verdict.flag(
            Rule::DataLoss,
            "Redis without persistence never lost its data: the run proves nothing about a restart"
                .into(),
        ),
        Some(true) if lost > 0 => verdict.flag(
            Rule::DataLoss,
            format!("Redis with persistence lost its data {lost} times"),
        ),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use crate::checker::synthetic::*;

    /// Point 4 of issue 30: a run without persistence must have lost Redis's
    /// data at least once.
    #[test]
    fn the_checker_demands_a_data_loss_without_persistence() {
        let judged = |data_lost: bool, persistent: bool| {
            let mut history = history(
                vec![hold(LOCK, Ask::EXCLUSIVE, 1, 0, 0, 100)],
                vec![fault(
                    Target::Redis,
                    FaultKind::RedisRestart { data_lost },
                    1000,
                    1700,
                )],
            );
            history.persistent = Some(persistent);
            judge(&history, &Rules::default())
        };
        assert_eq!(judged(false, false).count(Rule::DataLoss), 1);
        assert!(judged(true, false).violations.is_empty());
        assert!(judged(false, true).violations.is_empty());
        assert_eq!(judged(true, true).count(Rule::DataLoss), 1);
    }
}
