//! Capacity: never more of a name held, as told, than its capacity.

use std::time::SystemTime;

use crate::checker::spans::usage;
use crate::checker::{Hold, Rule, Verdict};
use crate::history::{when, LOCK_CAPACITY};

/// More than the name's capacity held at once, as told; returns when, for
/// the timelines.
pub(crate) fn capacity(
    name: &str,
    holds: &[Hold],
    verdict: &mut Verdict,
) -> Vec<(SystemTime, SystemTime)> {
    let mut evidence = Vec::new();
    let Some(capacity) = holds.first().map(|h| h.ask.capacity()) else {
        return evidence;
    };
    for (at, used) in usage(holds, |h| h.told_until) {
        if used <= capacity as i64 {
            continue;
        }
        let held: Vec<String> = holds
            .iter()
            .filter(|h| h.held_at(at))
            .map(|h| {
                format!(
                    "token {} {} (client {}, {} .. {})",
                    h.token,
                    h.ask,
                    h.client,
                    when(h.start),
                    when(h.told_until)
                )
            })
            .collect();
        let used = if capacity == LOCK_CAPACITY {
            format!("{} leases", held.len())
        } else {
            format!("{used} of {capacity}")
        };
        verdict.flag(
            Rule::Capacity,
            format!("{name}: {used} held at {}: {}", when(at), held.join("; ")),
        );
        evidence.push((at, at));
    }
    evidence
}

#[cfg(test)]
mod tests {
    use crate::checker::synthetic::*;

    #[test]
    fn the_checker_counts_capacity_and_tokens() {
        let (exclusive, shared) = (Ask::EXCLUSIVE, Ask::SHARED);
        let permits = |permits| Ask::Permits {
            permits,
            limit: LIMIT,
        };
        // Readers together, a writer alone before and after them, the semaphore
        // full to its limit but not past it: all fine.
        let fine = checked(
            vec![
                hold(LOCK, exclusive, 1, 0, 0, 100),
                hold(LOCK, shared, 2, 50, 100, 300),
                hold(LOCK, shared, 3, 60, 150, 250),
                hold(LOCK, shared, 4, 60, 160, 400),
                hold(LOCK, exclusive, 5, 70, 400, 500),
                hold(SEMAPHORE, permits(LIMIT - 1), 1, 0, 0, 100),
                hold(SEMAPHORE, ONE_PERMIT, 2, 0, 10, 200),
                hold(SEMAPHORE, permits(LIMIT), 3, 0, 200, 300),
            ],
            vec![],
        );
        assert!(fine.violations.is_empty(), "{:?}", fine.violations);
        assert_eq!(fine.holds.len(), 8);

        // A writer beside a reader, in either order.
        for (first, second) in [(exclusive, shared), (shared, exclusive)] {
            let overlap = checked(
                vec![
                    hold(LOCK, first, 1, 0, 10, 200),
                    hold(LOCK, second, 2, 0, 100, 300),
                ],
                vec![],
            );
            assert_eq!(overlap.count(Rule::Capacity), 1, "{:?}", overlap.violations);
        }
        // Permits past the limit, with fewer leases than the limit.
        let over = checked(
            vec![
                hold(SEMAPHORE, permits(LIMIT - 1), 1, 0, 10, 200),
                hold(SEMAPHORE, permits(2), 2, 0, 100, 300),
            ],
            vec![],
        );
        assert_eq!(over.count(Rule::Capacity), 1, "{:?}", over.violations);

        // A lease counts as held until its expiry, less the grace.
        let mut expiring = hold(LOCK, exclusive, 1, 0, 10, 99_000);
        expiring[0].op = acquire(exclusive, 5000, 0);
        expiring[0].answer = Answer::Lease {
            token: 1,
            expires_at: at(5010),
            granted: exclusive,
        };
        let after_expiry = checked(
            vec![expiring.clone(), hold(LOCK, exclusive, 2, 4850, 4860, 6000)],
            vec![],
        );
        assert_eq!(
            after_expiry.count(Rule::Capacity),
            0,
            "{:?}",
            after_expiry.violations
        );
        let before_expiry = checked(
            vec![expiring, hold(LOCK, exclusive, 2, 4700, 4710, 6000)],
            vec![],
        );
        assert_eq!(
            before_expiry.count(Rule::Capacity),
            1,
            "{:?}",
            before_expiry.violations
        );

        // Tokens rise across modes: a writer asked for after a reader was told
        // must carry a larger token; readers granted together need not be in
        // the order their 201s arrived.
        let backwards = checked(
            vec![
                hold(LOCK, shared, 9, 0, 10, 20),
                hold(LOCK, exclusive, 8, 15, 30, 40),
            ],
            vec![],
        );
        assert_eq!(
            backwards.count(Rule::Tokens),
            1,
            "{:?}",
            backwards.violations
        );
        let together = checked(
            vec![
                hold(LOCK, shared, 7, 0, 11, 20),
                hold(LOCK, shared, 6, 0, 12, 20),
            ],
            vec![],
        );
        assert!(together.violations.is_empty(), "{:?}", together.violations);
        // A body that says other than what was asked.
        let mut wrong = hold(LOCK, shared, 1, 0, 10, 20);
        wrong[0].answer = Answer::Lease {
            token: 1,
            expires_at: at(10 + TTL),
            granted: exclusive,
        };
        assert_eq!(checked(vec![wrong], vec![]).count(Rule::Granted), 1);
    }
}
