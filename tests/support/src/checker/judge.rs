//! [`judge`]: every rule over a whole run.

use std::time::SystemTime;

use crate::checker::limits::SETTLE;
use crate::checker::rules::answers::answers;
use crate::checker::rules::capacity::capacity;
use crate::checker::rules::claim_runs::claim_runs;
use crate::checker::rules::claims::claims;
use crate::checker::rules::data_loss::data_loss;
use crate::checker::rules::expiries::expiries;
use crate::checker::rules::frozen::frozen;
use crate::checker::rules::holds::holds;
use crate::checker::rules::line::line;
use crate::checker::rules::paths::paths;
use crate::checker::rules::streams::streams;
use crate::checker::rules::tickets::tickets;
use crate::checker::rules::tokens::tokens;
use crate::checker::spans::union;
use crate::checker::timeline::timeline;
use crate::checker::{Hold, Rules, Verdict};
use crate::history::{FaultKind, History};

/// Judges a whole run.
pub fn judge(history: &History, rules: &Rules) -> Verdict {
    let mut verdict = Verdict::default();
    // A stall of Redis keeps the line's order (the waiters' instances stay
    // alive, and a waiter dropped rejoins in its place): it excuses no
    // overtaking.
    let reordering = explained(history, rules, |kind| kind != FaultKind::RedisStall);
    let explained = explained(history, rules, |_| true);
    answers(history, &mut verdict);
    expiries(history, &mut verdict);
    let lost = holds(history, &explained, &mut verdict);
    for (name, from, to) in lost {
        let holds: Vec<Hold> = verdict
            .holds
            .iter()
            .filter(|h| h.name == name)
            .cloned()
            .collect();
        let timeline = timeline(history, &holds, &name, from, to);
        verdict.evidence.push(timeline);
    }
    let names: Vec<String> = {
        let mut names: Vec<String> = history.calls.iter().map(|c| c.name.clone()).collect();
        names.sort();
        names.dedup();
        names
    };
    for name in &names {
        let holds: Vec<Hold> = verdict
            .holds
            .iter()
            .filter(|h| &h.name == name)
            .cloned()
            .collect();
        for (from, to) in capacity(name, &holds, &mut verdict) {
            let timeline = timeline(history, &holds, name, from, to);
            verdict.evidence.push(timeline);
        }
        tokens(name, &holds, &mut verdict);
        line(history, name, &holds, &explained, &reordering, &mut verdict);
    }
    data_loss(history, &mut verdict);
    claims(history, &explained, &mut verdict);
    claim_runs(history, &explained, &mut verdict);
    frozen(history, &explained, &mut verdict);
    streams(history, &explained, &mut verdict);
    tickets(history, &mut verdict);
    paths(rules, &mut verdict);
    verdict
}

/// The stretches any fault of the kinds `counted` may explain: its span
/// and [`SETTLE`] after it (after a failover, [`Rules::failover_settle`]).
fn explained(
    history: &History,
    rules: &Rules,
    counted: impl Fn(FaultKind) -> bool,
) -> Vec<(SystemTime, SystemTime)> {
    let settle = |kind: FaultKind| match kind {
        FaultKind::MasterKill | FaultKind::MasterKillLaggingReplica => rules.failover_settle,
        _ => SETTLE,
    };
    union(
        history
            .faults
            .iter()
            .filter(|f| counted(f.kind))
            .map(|f| (f.from, f.to + settle(f.kind)))
            .collect(),
    )
}
