//! Claims: their answers, and none refused after all its names were free while
//! it waited.

use std::time::{Duration, SystemTime};

use crate::checker::limits::{CLAIM_FREE, LEAVE, NO_ANSWER_SLACK, QUEUED_AFTER, UNAVAILABLE_AFTER};
use crate::checker::rules::frozen::frozen_windows;
use crate::checker::spans::{effect_until, faulted, overlaps, subtract, union};
use crate::checker::{Path, Rule, Verdict};
use crate::history::{when, Answer, History, Op};

/// Each claim's answer against the contract and the faults, and each one
/// refused against its names: refused although all of them were free (no
/// hold Redis may have had from its request on, no other acquisition or
/// claim of it outstanding, no fault explaining the time) for more than
/// [`CLAIM_FREE`] in all while it waited.
pub(crate) fn claims(
    history: &History,
    explained: &[(SystemTime, SystemTime)],
    verdict: &mut Verdict,
) {
    for claim in &history.claims {
        let names: Vec<&str> = claim.names.iter().map(|(n, _)| n.as_str()).collect();
        let what = || {
            format!(
                "claim of {} via instance {} (sent {}, answered {})",
                names.join(", "),
                claim.instance,
                when(claim.sent),
                when(claim.answered)
            )
        };
        let span = (claim.sent, claim.answered);
        let during = explained
            .iter()
            .any(|e| overlaps(*e, (claim.sent, claim.answered + Duration::from_millis(1))));
        match &claim.answer {
            Answer::None { .. } => {
                if !faulted(
                    history,
                    claim.instance,
                    span,
                    NO_ANSWER_SLACK,
                    NO_ANSWER_SLACK,
                ) {
                    verdict.flag(
                        Rule::NoAnswer,
                        format!(
                            "{}: {} outside any fault of it or Redis",
                            what(),
                            claim.answer
                        ),
                    );
                }
                continue;
            }
            Answer::Status { status: 503, .. } => {
                let at = (claim.answered, claim.answered);
                if !faulted(
                    history,
                    claim.instance,
                    at,
                    Duration::ZERO,
                    UNAVAILABLE_AFTER,
                ) {
                    verdict.flag(
                        Rule::Unavailable,
                        format!("{}: 503 away from any fault of it or Redis", what()),
                    );
                }
                continue;
            }
            Answer::Status { status: 201, .. } => {
                verdict.took(Path::Claim, during);
                continue;
            }
            Answer::Status { status: 409, slug } if slug == "claim-refused" => {
                verdict.took(Path::ClaimRefused, during);
            }
            // Frozen, as a single request is: only while a freeze of one of
            // its names may have held (a claim that waits holds none of its
            // names meanwhile, and takes them when the window ends).
            Answer::Status { status: 423, slug } if slug == "frozen" => {
                let frozen = names.iter().any(|name| {
                    frozen_windows(history, name)
                        .iter()
                        .any(|w| overlaps(*w, (claim.sent, claim.answered)))
                });
                if frozen {
                    verdict.took(Path::Frozen, during);
                } else {
                    verdict.flag(
                        Rule::Unclear,
                        format!("{}: 423 frozen outside any freeze of its names", what()),
                    );
                }
                continue;
            }
            other => {
                verdict.flag(Rule::Unclear, format!("{}: {other}", what()));
                continue;
            }
        }
        // Refused: when was every name free?
        let mut busy: Vec<(SystemTime, SystemTime)> = explained.to_vec();
        for name in &names {
            busy.extend(frozen_windows(history, name));
            busy.extend(
                verdict
                    .holds
                    .iter()
                    .filter(|h| h.name == *name)
                    .map(|h| (h.requested, h.may_until)),
            );
            busy.extend(
                history
                    .calls
                    .iter()
                    .filter(|c| c.name == *name && matches!(c.op, Op::Acquire(_)))
                    .map(|c| (c.sent, effect_until(c))),
            );
            busy.extend(
                history
                    .claims
                    .iter()
                    .filter(|c| !std::ptr::eq(*c, claim))
                    .filter(|c| c.names.iter().any(|(n, _)| n == name))
                    .map(|c| match c.answer {
                        Answer::None { .. } | Answer::Status { status: 503, .. } => {
                            (c.sent, c.answered + LEAVE)
                        }
                        _ => (c.sent, c.answered),
                    }),
            );
        }
        let until = claim
            .answered
            .min(claim.sent + Duration::from_millis(claim.wait_ms));
        let waited = [(claim.sent + QUEUED_AFTER, until)];
        let free = subtract(&waited, &union(busy));
        let total: Duration = free
            .iter()
            .map(|(from, to)| to.duration_since(*from).unwrap_or_default())
            .sum();
        if total > CLAIM_FREE {
            verdict.flag(
                Rule::ClaimWaited,
                format!(
                    "{}: refused after every name was free {} ms in all, away from faults ({} .. {})",
                    what(),
                    total.as_millis(),
                    when(free[0].0),
                    when(free[free.len() - 1].1)
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::checker::synthetic::*;

    /// Issue 35: no claim left waiting past its `wait_ms` while all its names
    /// were free. A claim of two locks (sent at 0, waiting 5 s, refused at 5 s):
    /// flagged when the second lock's only hold ended at 1 s (both free 4 s), not
    /// when that hold lasted the whole wait, nor when a fault explains the free
    /// time; its leases, when granted, are judged as holds (a claim granted
    /// beside a holder is an overlap).
    #[test]
    fn the_checker_flags_a_claim_refused_while_its_names_were_free() {
        let (x, y) = ("claim-x", "claim-y");
        let claim = |answer: Answer, (sent, answered): (u64, u64)| crate::history::Claim {
            client: 50,
            instance: 0,
            names: vec![
                (x.to_owned(), Ask::EXCLUSIVE),
                (y.to_owned(), Ask::EXCLUSIVE),
            ],
            ttl_ms: TTL,
            wait_ms: answered - sent,
            sent: at(sent),
            answered: at(answered),
            answer,
        };
        let refused = || claim(status(409, "claim-refused"), (0, 5000));
        let judged = |y_released: u64, faults: Vec<Fault>| {
            let mut history = history(vec![hold(y, Ask::EXCLUSIVE, 1, 0, 10, y_released)], faults);
            history.claims.push(refused());
            judge(&history, &Rules::default())
        };
        let free = judged(1000, Vec::new());
        assert_eq!(free.count(Rule::ClaimWaited), 1, "{:?}", free.violations);
        assert_eq!(free.violations.len(), 1, "{:?}", free.violations);
        let busy = judged(6000, Vec::new());
        assert!(busy.violations.is_empty(), "{:?}", busy.violations);
        let pause = vec![fault(
            Target::Instance(0),
            FaultKind::InstancePause,
            500,
            2000,
        )];
        let explained = judged(1000, pause);
        assert!(
            explained.violations.is_empty(),
            "{:?}",
            explained.violations
        );
        // Granted: its two leases are holds; one beside another holder of x is
        // more than x's capacity.
        let granted = |token: u64, name: &str| {
            vec![
                grant(50, name, Ask::EXCLUSIVE, token, (0, 200), 0),
                release(50, name, token, (1000, 1001), status(204, "")),
            ]
        };
        let judged = |other: u64| {
            let mut history = history(
                vec![
                    granted(10, x),
                    granted(11, y),
                    hold(x, Ask::EXCLUSIVE, 20, other, other + 10, other + 500),
                ],
                Vec::new(),
            );
            history.claims.push(claim(status(201, ""), (0, 200)));
            judge(&history, &Rules::default())
        };
        let overlap = judged(300);
        assert_eq!(overlap.count(Rule::Capacity), 1, "{:?}", overlap.violations);
        let after = judged(1500);
        assert!(after.violations.is_empty(), "{:?}", after.violations);
        // A claim granted before a loss of Redis's data (at 1 s to 2 s): its
        // release's 204 (which releases whatever is left) does not say its lease
        // outlived the loss, so a holder after the loss is no overlap; a lease's
        // own 204 would. (A claim whose 201 came after the loss was told of
        // leases held after it: see issue 42's item 1 below.)
        let across = |slug: &str| {
            let mut history = history(
                vec![
                    vec![
                        grant(50, x, Ask::EXCLUSIVE, 10, (0, 800), 0),
                        release(50, x, 10, (4000, 4001), status(204, slug)),
                    ],
                    hold(x, Ask::EXCLUSIVE, 20, 2500, 2600, 3500),
                ],
                vec![fault(
                    Target::Redis,
                    FaultKind::RedisRestart { data_lost: true },
                    1000,
                    2000,
                )],
            );
            history.claims.push(claim(status(201, ""), (0, 800)));
            judge(&history, &Rules::default())
        };
        let claim_released = across(crate::history::CLAIM_RELEASED);
        assert!(
            claim_released.violations.is_empty(),
            "{:?}",
            claim_released.violations
        );
        assert_eq!(across("").count(Rule::Capacity), 1);
    }

    #[test]
    fn the_checker_takes_a_claim_s_423_only_while_one_of_its_names_may_be_frozen() {
        use crate::history::{Claim, Freeze};
        let judged = |frozen_name: &str| {
            let mut history = history(Vec::new(), Vec::new());
            history.freezes.push(Freeze {
                name: frozen_name.to_owned(),
                opened: (at(900), at(1000)),
                made: true,
                until: at(20_000),
                closed: Some((at(6000), at(6100))),
            });
            history.claims.push(Claim {
                client: 1,
                instance: 0,
                names: vec![
                    ("claim-x".to_owned(), Ask::EXCLUSIVE),
                    ("claim-y".to_owned(), Ask::EXCLUSIVE),
                ],
                ttl_ms: TTL,
                wait_ms: 3000,
                sent: at(2000),
                answered: at(5000),
                answer: status(423, "frozen"),
            });
            judge(&history, &Rules::default())
        };
        let frozen = judged("claim-y");
        assert!(frozen.violations.is_empty(), "{:?}", frozen.violations);
        let not_frozen = judged("claim-q");
        assert_eq!(
            not_frozen.count(Rule::Unclear),
            1,
            "{:?}",
            not_frozen.violations
        );
    }
}
