//! Synthetic histories for the checker's own tests.

use std::time::{Duration, SystemTime};

pub use crate::checker::{judge, Path, Rule, Rules, Verdict};
pub use crate::history::{
    Acquire, Answer, Ask, Call, Fault, FaultKind, History, Op, Target, TicketOp,
};

/// The ttl of the synthetic leases: longer than any test's span.
pub const TTL: u64 = 60_000;
pub const LOCK: &str = "deploy-a";
pub const SEMAPHORE: &str = "workers";
/// The lock of the ticket tests.
pub const TICKETS: &str = "tickets-a";
pub const LIMIT: u32 = 3;
pub const ONE_PERMIT: Ask = Ask::Permits {
    permits: 1,
    limit: LIMIT,
};

/// A time `ms` after the epoch.
pub fn at(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

pub fn status(status: u16, slug: &str) -> Answer {
    Answer::Status {
        status,
        slug: slug.into(),
    }
}

pub fn call(
    client: usize,
    name: &str,
    instance: usize,
    op: Op,
    (sent, answered): (u64, u64),
    answer: Answer,
) -> Call {
    Call {
        client,
        name: name.into(),
        instance,
        op,
        sent: at(sent),
        answered: at(answered),
        answer,
    }
}

pub fn acquire(ask: Ask, ttl_ms: u64, wait_ms: u64) -> Op {
    Op::Acquire(Acquire {
        ask,
        ttl_ms,
        wait_ms,
        newest_wins: false,
        priority: 0,
    })
}

/// An acquisition by `client` (on instance 0) sent at `sent`, waiting
/// up to `wait_ms`, answered with lease `token` at `answered`.
pub fn grant(
    client: usize,
    name: &str,
    ask: Ask,
    token: u64,
    (sent, answered): (u64, u64),
    wait_ms: u64,
) -> Call {
    let lease = Answer::Lease {
        token,
        expires_at: at(answered + TTL),
        granted: ask,
    };
    call(
        client,
        name,
        0,
        acquire(ask, TTL, wait_ms),
        (sent, answered),
        lease,
    )
}

/// An acquisition refused with 409 after waiting.
pub fn refused(client: usize, name: &str, ask: Ask, (sent, answered): (u64, u64)) -> Call {
    let slug = if name == SEMAPHORE {
        "semaphore-full"
    } else {
        "lock-held"
    };
    let op = acquire(ask, TTL, answered - sent);
    call(client, name, 0, op, (sent, answered), status(409, slug))
}

pub fn release(
    client: usize,
    name: &str,
    token: u64,
    (sent, answered): (u64, u64),
    answer: Answer,
) -> Call {
    call(
        client,
        name,
        0,
        Op::Release { lease: token },
        (sent, answered),
        answer,
    )
}

/// A hold of `ask` (client = `token`), asked at `requested` (without
/// waiting), told at `start`, released (204) at `end`.
pub fn hold(name: &str, ask: Ask, token: u64, requested: u64, start: u64, end: u64) -> Vec<Call> {
    let client = token as usize;
    vec![
        grant(client, name, ask, token, (requested, start), 0),
        release(client, name, token, (end, end + 1), status(204, "")),
    ]
}

/// A waiter (client 100 + `token`) sent at `sent`, granted lease
/// `token` at `answered`, released at once.
pub fn waiter(name: &str, ask: Ask, token: u64, sent: u64, answered: u64) -> Vec<Call> {
    let client = 100 + token as usize;
    vec![
        grant(client, name, ask, token, (sent, answered), 30_000),
        release(
            client,
            name,
            token,
            (answered + 10, answered + 11),
            status(204, ""),
        ),
    ]
}

pub fn fault(target: Target, kind: FaultKind, from: u64, to: u64) -> Fault {
    Fault {
        target,
        kind,
        from: at(from),
        to: at(to),
    }
}

pub fn history(calls: Vec<Vec<Call>>, faults: Vec<Fault>) -> History {
    let mut history = History::new(at(0));
    history.ended = at(120_000);
    history.calls = calls.into_iter().flatten().collect();
    history.faults = faults;
    history
}

/// The verdict on these calls and faults, with no path required.
pub fn checked(calls: Vec<Vec<Call>>, faults: Vec<Fault>) -> Verdict {
    judge(&history(calls, faults), &Rules::default())
}
