//! Expiries: each `expires_at` told is the `ttl_ms` asked, on Redis's clock.

use std::time::Duration;

use crate::checker::limits::CLOCK_TOLERANCE;
use crate::checker::{Rule, Verdict};
use crate::history::{when, Answer, History, Op};

/// Each `expires_at` told against the `ttl_ms` asked, on Redis's clock.
pub(crate) fn expiries(history: &History, verdict: &mut Verdict) {
    for call in &history.calls {
        let ttl = match call.op {
            Op::Acquire(acquire) => acquire.ttl_ms,
            Op::Refresh { ttl_ms, .. } => ttl_ms,
            _ => continue,
        };
        let Answer::Lease { expires_at, .. } = call.answer else {
            continue;
        };
        let ttl = Duration::from_millis(ttl);
        let told = history.local(expires_at);
        let (earliest, latest) = (
            call.sent + ttl - CLOCK_TOLERANCE,
            call.answered + ttl + CLOCK_TOLERANCE,
        );
        if told < earliest || told > latest {
            verdict.flag(
                Rule::Expiry,
                format!(
                    "{} {:?}: expires_at {} (Redis's clock; {} on the test's), but {} ms from a moment between {} and {}",
                    call.name,
                    call.op,
                    when(expires_at),
                    when(told),
                    ttl.as_millis(),
                    when(call.sent),
                    when(call.answered)
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::checker::synthetic::*;

    /// Point 6 of issue 30: `expires_at` is the `ttl_ms` asked on Redis's
    /// clock, and a hold whose release answered 503 lasts until a later release
    /// is answered.
    #[test]
    fn the_checker_holds_the_client_to_what_it_was_told() {
        let exclusive = Ask::EXCLUSIVE;
        let told = |expires_in: u64, redis_ahead_ms: i64| {
            let mut calls = hold(LOCK, exclusive, 1, 0, 10, 100);
            let expires = (10 + expires_in) as i64 + redis_ahead_ms;
            calls[0].answer = Answer::Lease {
                token: 1,
                expires_at: at(expires as u64),
                granted: exclusive,
            };
            let mut history = history(vec![calls], vec![]);
            history.redis_ahead_ms = redis_ahead_ms;
            judge(&history, &Rules::default())
        };
        assert!(told(TTL, 0).violations.is_empty());
        assert_eq!(told(TTL / 2, 0).count(Rule::Expiry), 1);
        assert_eq!(told(TTL + 5000, 0).count(Rule::Expiry), 1);
        // Redis's clock 5 s ahead: its expires_at reads 5 s later.
        assert!(told(TTL, 5000).violations.is_empty());
        assert_eq!(told(TTL, 0).count(Rule::Expiry), 0);

        // A release answered 503 (during a stall), then another client granted
        // the lock, then the first client's release answered 204: both held.
        let stall = || vec![fault(Target::Redis, FaultKind::RedisStall, 900, 1500)];
        let first = |answer: Answer| {
            let mut calls = hold(LOCK, exclusive, 1, 0, 0, 2000);
            calls.insert(1, release(1, LOCK, 1, (1000, 1400), answer));
            calls
        };
        let unavailable = checked(
            vec![
                first(status(503, "redis-unavailable")),
                hold(LOCK, exclusive, 2, 1100, 1600, 3000),
            ],
            stall(),
        );
        assert_eq!(
            unavailable.count(Rule::Capacity),
            1,
            "{:?}",
            unavailable.violations
        );
        // The first release answered: the lease ended when it was sent.
        let released = checked(
            vec![
                first(status(204, "")),
                hold(LOCK, exclusive, 2, 1100, 1600, 3000),
            ],
            stall(),
        );
        assert_eq!(
            released.count(Rule::Capacity),
            0,
            "{:?}",
            released.violations
        );
        // A release answered 503 then one answered 404: the first may have run
        // (its reply lost in the stall), so the lease may have ended with it.
        let mut ran = first(status(503, "redis-unavailable"));
        ran[2].answer = status(404, "lease-not-found");
        let lost_reply = checked(
            vec![ran, hold(LOCK, exclusive, 2, 1100, 1600, 3000)],
            stall(),
        );
        assert!(
            lost_reply.violations.is_empty(),
            "{:?}",
            lost_reply.violations
        );
    }
}
