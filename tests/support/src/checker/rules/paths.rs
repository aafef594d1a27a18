//! Paths: every path the run requires taken at least once during a fault.

use crate::checker::{Rule, Rules, Verdict};

/// Each of `rules.required` taken during a fault, as [`Verdict::paths`]
/// counted them.
pub(crate) fn paths(rules: &Rules, verdict: &mut Verdict) {
    for path in &rules.required {
        if verdict
            .paths
            .get(path)
            .is_none_or(|(_, faulted)| *faulted == 0)
        {
            let taken = verdict.paths.get(path).map_or(0, |(n, _)| *n);
            verdict.flag(
                Rule::Path,
                format!("{path:?} never taken during a fault ({taken} times in all)"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::checker::synthetic::*;

    /// Point 5 of issue 30: every required path taken during a fault.
    #[test]
    fn the_checker_demands_every_path_under_faults() {
        let exclusive = Ask::EXCLUSIVE;
        let two_permits = Ask::Permits {
            permits: 2,
            limit: LIMIT,
        };
        let refresh = |lease: u64, ttl_ms: u64, (sent, answered): (u64, u64)| {
            let lease_body = Answer::Lease {
                token: lease,
                expires_at: at(answered + ttl_ms),
                granted: exclusive,
            };
            call(
                lease as usize,
                "refreshed",
                0,
                Op::Refresh { lease, ttl_ms },
                (sent, answered),
                lease_body,
            )
        };
        let superseded = {
            let op = Op::Acquire(Acquire {
                ask: exclusive,
                ttl_ms: TTL,
                wait_ms: 4000,
                newest_wins: true,
                priority: 0,
            });
            vec![call(
                60,
                "queue",
                0,
                op,
                (100, 200),
                status(409, "superseded"),
            )]
        };
        let all = |shorten: bool| {
            let mut refreshed = hold("refreshed", exclusive, 1, 600, 610, 900);
            if shorten {
                refreshed.insert(1, refresh(1, 2000, (700, 710)));
            }
            refreshed.insert(1, refresh(1, 10_000, (800, 810)));
            vec![
                hold("alone", exclusive, 1, 100, 110, 200),
                hold(LOCK, Ask::SHARED, 1, 300, 310, 400),
                hold(SEMAPHORE, two_permits, 1, 500, 510, 550),
                refreshed,
                superseded.clone(),
                vec![call(
                    61,
                    "forced",
                    0,
                    Op::ForceRelease,
                    (1000, 1010),
                    status(204, ""),
                )],
            ]
        };
        let rules = Rules {
            required: vec![
                Path::Alone,
                Path::Exclusive,
                Path::Shared,
                Path::Permits,
                Path::RefreshShorten,
                Path::RefreshExtend,
                Path::Release,
                Path::NewestWins,
                Path::ForceRelease,
            ],
            ..Rules::default()
        };
        let stall = || vec![fault(Target::Redis, FaultKind::RedisStall, 0, 1000)];
        let every_path = judge(&history(all(true), stall()), &rules);
        assert!(
            every_path.violations.is_empty(),
            "{:?}",
            every_path.violations
        );
        let no_shortening = judge(&history(all(false), stall()), &rules);
        assert_eq!(
            no_shortening.count(Rule::Path),
            1,
            "{:?}",
            no_shortening.violations
        );
        // Taken, but never during a fault.
        let unfaulted = judge(&history(all(true), vec![]), &rules);
        assert_eq!(
            unfaulted.count(Rule::Path),
            rules.required.len(),
            "{:?}",
            unfaulted.violations
        );
    }
}
