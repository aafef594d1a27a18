//! Holds: the leases as their clients were told them, the leases lost under
//! their holders, and the paths their calls took.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use crate::checker::limits::EXPIRY_GRACE;
use crate::checker::spans::{effect_until, instance_faulted, overlaps};
use crate::checker::{Hold, Path, Rule, Verdict};
use crate::history::{when, Answer, Ask, Call, FaultKind, History, Op, CLAIM_RELEASED};

/// The holds of the run, as their clients were told them (see the module
/// doc), the leases lost under their holders, and the paths their calls
/// took.
/// Returns the spans of the leases lost, for the timelines.
pub(crate) fn holds(
    history: &History,
    explained: &[(SystemTime, SystemTime)],
    verdict: &mut Verdict,
) -> Vec<(String, SystemTime, SystemTime)> {
    let mut lost = Vec::new();
    let during_fault = |call: &Call| {
        explained
            .iter()
            .any(|e| overlaps(*e, (call.sent, call.answered + Duration::from_millis(1))))
    };
    let data_lost: Vec<(SystemTime, SystemTime)> = history
        .faults
        .iter()
        .filter(|f| f.kind == FaultKind::RedisRestart { data_lost: true })
        .map(|f| (f.from, f.to))
        .collect();
    let forces: Vec<&Call> = history
        .calls
        .iter()
        .filter(|c| c.op == Op::ForceRelease)
        .collect();
    // Each client's calls on each name, in the order it sent them.
    let mut by_client: BTreeMap<(usize, &str), Vec<&Call>> = BTreeMap::new();
    for call in &history.calls {
        by_client
            .entry((call.client, call.name.as_str()))
            .or_default()
            .push(call);
    }
    for calls in by_client.values_mut() {
        calls.sort_by_key(|c| c.sent);
    }
    // A 201 received once Redis was back from a loss of its data, from an
    // instance no fault held up meanwhile, tells of a lease held after the
    // loss (a claim confirms each lease it took before its 201): the loss
    // did not end it, nor excuses a 404 for it.
    let told_after = |call: &Call, &(from, to): &(SystemTime, SystemTime)| {
        call.answered >= to && !instance_faulted(history, call.instance, (from, call.answered))
    };
    for call in &history.calls {
        let faulted = during_fault(call);
        match (&call.op, &call.answer) {
            (Op::ForceRelease, Answer::Status { status: 204, .. }) => {
                verdict.took(Path::ForceRelease, faulted);
            }
            (Op::Release { .. }, Answer::Status { status: 204, .. }) => {
                verdict.took(Path::Release, faulted);
            }
            (Op::Acquire(a), Answer::Status { status: 409, slug })
                if a.newest_wins && slug == "superseded" =>
            {
                verdict.took(Path::NewestWins, faulted);
            }
            _ => {}
        }
        let (
            Op::Acquire(_),
            Answer::Lease {
                token,
                expires_at,
                granted,
            },
        ) = (&call.op, &call.answer)
        else {
            continue;
        };
        match granted {
            Ask::Lock { shared: true } => verdict.took(Path::Shared, faulted),
            Ask::Lock { shared: false } => verdict.took(Path::Exclusive, faulted),
            Ask::Permits { permits, .. } if *permits > 1 => verdict.took(Path::Permits, faulted),
            Ask::Permits { .. } => {}
        }
        let expires = history.local(*expires_at);
        let mut hold = Hold {
            name: call.name.clone(),
            client: call.client,
            token: *token,
            ask: *granted,
            requested: call.sent,
            start: call.answered,
            told_until: expires - EXPIRY_GRACE,
            may_until: expires + EXPIRY_GRACE,
            expires_by: expires + EXPIRY_GRACE,
        };
        // When the first release of it that went unanswered (perhaps
        // received) or answered 503 was sent: it may have ended the lease,
        // as a later 404 says; a later 204 says it did not.
        let mut pending: Option<SystemTime> = None;
        let own = &by_client[&(call.client, call.name.as_str())];
        for next in own.iter().filter(|c| c.sent >= call.answered) {
            let lease = match next.op {
                Op::Refresh { lease, .. } | Op::Release { lease } => lease,
                _ => continue,
            };
            if lease != *token || next.sent >= hold.told_until {
                continue;
            }
            // (A call answered after the lease's expiry, e.g. held up in a
            // paused instance, may have come too late.)
            let lost_here = |hold: &Hold| {
                pending.is_none()
                    && next.answered < hold.told_until
                    // (From the request: a lease granted before the loss
                    // may be answered after it, unless its 201 came once
                    // Redis was back, see `told_after`.)
                    && !data_lost.iter().any(|l| {
                        overlaps(*l, (hold.requested, next.answered)) && !told_after(call, l)
                    })
                    && !forces.iter().any(|f| {
                        f.name == hold.name
                            && overlaps((f.sent, effect_until(f)), (hold.requested, next.answered))
                    })
            };
            match (&next.op, &next.answer) {
                (Op::Refresh { .. }, Answer::Lease { expires_at, .. }) => {
                    let told = history.local(*expires_at);
                    let before = hold.told_until + EXPIRY_GRACE;
                    if told < before {
                        verdict.took(Path::RefreshShorten, during_fault(next));
                    } else if told > before {
                        verdict.took(Path::RefreshExtend, during_fault(next));
                    }
                    hold.told_until = told - EXPIRY_GRACE;
                    hold.may_until = told + EXPIRY_GRACE;
                    hold.expires_by = told + EXPIRY_GRACE;
                }
                (
                    Op::Refresh { ttl_ms, .. },
                    Answer::None { .. } | Answer::Status { status: 503, .. },
                ) => {
                    // It may have run: a shortening counts from its sending,
                    // an extension does not count.
                    let ttl = Duration::from_millis(*ttl_ms);
                    hold.told_until = hold.told_until.min(next.sent + ttl - EXPIRY_GRACE);
                    hold.may_until = hold.may_until.max(next.answered + ttl + EXPIRY_GRACE);
                    hold.expires_by = hold.expires_by.max(effect_until(next) + ttl + EXPIRY_GRACE);
                }
                (
                    Op::Release { .. },
                    Answer::Status { status: 503, .. }
                    | Answer::None { reached: true }
                    | Answer::Unclear(_),
                ) => {
                    pending.get_or_insert(next.sent);
                }
                (
                    _,
                    Answer::Status {
                        status: 204 | 404, ..
                    },
                ) => {
                    if next.answer.status() == Some(404) && lost_here(&hold) {
                        lost.push((hold.name.clone(), hold.start, next.answered));
                        verdict.flag(
                            Rule::LeaseLost,
                            format!(
                                "{}: token {} ({}, 201 at {}) answered 404 to {:?} sent {}, before it was told to end ({})",
                                hold.name,
                                hold.token,
                                hold.ask,
                                when(hold.start),
                                next.op,
                                when(next.sent),
                                when(hold.told_until + EXPIRY_GRACE)
                            ),
                        );
                    }
                    let ended = match (next.answer.status(), pending) {
                        (Some(404), Some(first)) => first,
                        _ => next.sent,
                    };
                    hold.told_until = hold.told_until.min(ended);
                    hold.may_until = hold.may_until.min(next.answered);
                    pending = None;
                    break;
                }
                _ => {}
            }
        }
        // Releases that may have run, and none answered after them.
        if let Some(first) = pending {
            hold.told_until = hold.told_until.min(first);
        }
        // A force-release that may have run after the grant (which came
        // between the request and its 201) ends the hold, unless the lease
        // answered its holder after it (a refresh or a release that found
        // it): the force-release ran before the grant.
        let alive_after = |at: SystemTime| {
            own.iter().any(|c| {
                c.sent > at
                    && matches!(c.op, Op::Refresh { lease, .. } | Op::Release { lease } if lease == *token)
                    && match &c.answer {
                        Answer::Lease { .. } => true,
                        // A claim's 204 releases whatever of it is left.
                        Answer::Status { status: 204, slug } => slug != CLAIM_RELEASED,
                        _ => false,
                    }
            })
        };
        for force in forces.iter().filter(|f| f.name == hold.name) {
            if force.sent < hold.told_until
                && effect_until(force) > hold.requested
                && !matches!(force.answer, Answer::None { reached: false })
                && !alive_after(effect_until(force))
            {
                hold.told_until = hold.told_until.min(force.sent.max(hold.start));
                // Surely after the grant: it ended the lease for the room too.
                if force.answer.status() == Some(204) && force.sent > hold.start {
                    hold.may_until = hold.may_until.min(force.answered);
                }
            }
        }
        // A loss of Redis's data ends it, unless it answered its holder
        // after, or its 201 came after (it was granted once Redis was back).
        for &(from, to) in &data_lost {
            if from < hold.may_until
                && to > hold.requested
                && !alive_after(to)
                && !told_after(call, &(from, to))
            {
                hold.told_until = hold.told_until.min(from.max(hold.start));
                hold.may_until = hold.may_until.min(to);
            }
        }
        verdict.holds.push(hold);
    }
    lost
}

#[cfg(test)]
mod tests {
    use crate::checker::synthetic::*;

    /// Issue 42, item 1: a claim of [L1, L2, S] that took L1 and waited for L2
    /// while Redis restarted without its data, then answered 201 (0.3 s after
    /// Redis was back) telling L1 held for 25 s more, while another client's
    /// `POST` of L1 got 201 too. A 201 that came after the loss tells of a hold
    /// after it (baton confirms every lease of a claim before its 201): the loss
    /// does not excuse it. The service now starts the claim over (L1 taken
    /// again, the other client refused).
    #[test]
    fn the_checker_flags_a_claim_told_201_for_a_lease_redis_lost() {
        let (l1, l2, s) = ("claim-x", "claim-y", "claim-pool");
        let one_of_two = Ask::Permits {
            permits: 1,
            limit: 2,
        };
        let (claim_sent, claim_answered) = (1000, 6000);
        let loss = || {
            vec![fault(
                Target::Redis,
                FaultKind::RedisRestart { data_lost: true },
                5000,
                5700,
            )]
        };
        let judged = |l1_token: u64, l1_taken: u64, other: Answer| {
            // The claim's lease of each name, as told by its 201, and its
            // `DELETE` (204, releasing whatever is left) at 9 s.
            let lease = |name: &str, ask: Ask, token: u64, taken: u64| {
                let mut granted = grant(50, name, ask, token, (claim_sent, claim_answered), 0);
                granted.answer = Answer::Lease {
                    token,
                    expires_at: at(taken + TTL),
                    granted: ask,
                };
                vec![
                    granted,
                    release(
                        50,
                        name,
                        token,
                        (9000, 9001),
                        status(204, crate::history::CLAIM_RELEASED),
                    ),
                ]
            };
            // L2's holder, whose lease the loss took (its release: 404).
            let mut l2_holder = hold(l2, Ask::EXCLUSIVE, 1, 0, 10, 7000);
            l2_holder[1].answer = status(404, "lease-not-found");
            // Another client's `POST /locks/L1` (no wait) at 6.2 s via
            // instance 1, released at 8 s when granted.
            let mut newcomer = vec![call(
                7,
                l1,
                1,
                acquire(Ask::EXCLUSIVE, TTL, 0),
                (6200, 6210),
                other.clone(),
            )];
            if let Answer::Lease { token, .. } = other {
                newcomer[0].answer = Answer::Lease {
                    token,
                    expires_at: at(6210 + TTL),
                    granted: Ask::EXCLUSIVE,
                };
                newcomer.push(release(7, l1, token, (8000, 8001), status(204, "")));
            }
            let mut history = history(
                vec![
                    l2_holder,
                    lease(l1, Ask::EXCLUSIVE, l1_token, l1_taken),
                    lease(l2, Ask::EXCLUSIVE, 3, 5990),
                    lease(s, one_of_two, 4, 1010),
                    newcomer,
                ],
                loss(),
            );
            history.claims.push(crate::history::Claim {
                client: 50,
                instance: 0,
                names: vec![
                    (l1.to_owned(), Ask::EXCLUSIVE),
                    (l2.to_owned(), Ask::EXCLUSIVE),
                    (s.to_owned(), one_of_two),
                ],
                ttl_ms: TTL,
                wait_ms: 30_000,
                sent: at(claim_sent),
                answered: at(claim_answered),
                answer: status(201, ""),
            });
            judge(&history, &Rules::default())
        };
        let lease = |token| Answer::Lease {
            token,
            expires_at: at(0),
            granted: Ask::EXCLUSIVE,
        };
        // The bug: L1 taken at 1 s (token 2), told at 6 s; the newcomer granted.
        let told_lost = judged(2, 1010, lease(5));
        assert_eq!(
            told_lost.count(Rule::Capacity),
            1,
            "{:?}",
            told_lost.violations
        );
        assert!(
            told_lost.violations[0].text.starts_with("claim-x"),
            "{:?}",
            told_lost.violations
        );
        assert_eq!(told_lost.violations.len(), 1, "{:?}", told_lost.violations);
        // Now: L1 taken again after the loss (token 6), the newcomer refused.
        let started_over = judged(6, 5990, status(409, "lock-held"));
        assert!(
            started_over.violations.is_empty(),
            "{:?}",
            started_over.violations
        );
    }
}
