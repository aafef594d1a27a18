//! `status.lua`: a lock or semaphore as anyone may see it, never a lease id.

use std::time::Duration;

use redis::Cmd;

use super::cursor::Cursor;
use super::library::{Function, Op};
use crate::domain::{Limit, Priority};
use crate::engine::error::Error;
use crate::engine::model::{Holder, Waiter};

/// The status call of one name.
pub(in crate::engine) struct ReadStatus;

/// What it answers: all but the name.
#[derive(Debug)]
pub(in crate::engine) struct Snapshot {
    pub holders: u64,
    pub used: u64,
    pub limit: Option<Limit>,
    pub waiting: u64,
    /// At most 100, in the order they were granted.
    pub leases: Vec<Holder>,
    /// At most 100, in the order they will be served.
    pub waiters: Vec<Waiter>,
}

/// `n, (token, expires_in_ms, weight, owner, held_ms) x n`: the live leases that expire first
/// (`append_leases()` in `core/views.lua`), those first.
pub(in crate::engine) fn holders(reply: &mut Cursor) -> Result<Vec<Holder>, Error> {
    let n = reply.count()?;
    let mut leases = Vec::with_capacity(n);
    for _ in 0..n {
        leases.push(Holder {
            fencing_token: reply.uint()?,
            expires_in: reply.time_left()?,
            weight: reply.uint()?,
            owner: reply.owner()?,
            held: Duration::from_millis(reply.uint()?),
        });
    }
    Ok(leases)
}

impl Function for ReadStatus {
    const OP: Op = Op::Status;
    type Reply = Snapshot;

    fn args(&self, _call: &mut Cmd) {}

    fn decode(reply: &mut Cursor) -> Result<Snapshot, Error> {
        let holders = reply.uint()?;
        let used = reply.uint()?;
        let limit = Limit::new(reply.uint()?).ok();
        let waiting = reply.uint()?;
        let mut leases = self::holders(reply)?;
        leases.sort_by_key(|l| l.fencing_token);
        let m = reply.count()?;
        let mut waiters = Vec::with_capacity(m);
        for position in 1..=m as u64 {
            waiters.push(Waiter {
                position,
                owner: reply.owner()?,
                waited: Duration::from_millis(reply.uint()?),
                weight: reply.uint()?,
                priority: Priority::new(reply.uint()?)
                    .map_err(|e| Error::Protocol(format!("a waiter's priority: {e}")))?,
                kept_until_ms: Some(reply.uint()?).filter(|ms| *ms > 0),
                eta: None,
            });
        }
        Ok(Snapshot {
            holders,
            used,
            limit,
            waiting,
            leases,
            waiters,
        })
    }
}
