//! `acquire.lua`: acquire a lease, or join the line of waiters.

use redis::Cmd;

use super::cursor::Cursor;
use super::library::{Function, Op, Serving};
use super::waiter::LineEntry;
use crate::engine::error::Error;
use crate::engine::model::Occupancy;

/// Whether a call queues when busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::engine) enum Join {
    /// Answer at once when busy (`wait_ms` 0); the only call with its id,
    /// which holds nothing yet.
    No,
    /// Queue when busy. One of possibly several calls with its id (a retry
    /// after a lost reply, a re-check, a first call that reaches Redis after
    /// its retry): it finds the place or the lease any of them made (or a
    /// grant to this waiter), confirming that lease, and never takes a
    /// second.
    Queue,
}

/// One acquire call for a waiter.
pub(in crate::engine) struct Acquire<'a> {
    pub waiter: LineEntry<'a>,
    pub join: Join,
    /// The place an earlier call of this waiter replied ([`Attempt::Queued`]):
    /// a waiter that asks again and is no longer in line (dropped while its
    /// instance looked dead, its grant lapsed, the queue lost) joins again
    /// there, not at the back.
    pub place: Option<i64>,
}

/// What one acquire call came to.
#[derive(Debug)]
pub(in crate::engine) enum Attempt {
    /// Held until `expires_at_ms`: acquired now, or a grant to this waiter
    /// confirmed by this call.
    Acquired { token: u64, expires_at_ms: u64 },
    /// A newer `newest_wins` request took this waiter's place.
    Superseded { owner: Option<crate::domain::Owner> },
    /// In line (joined now or before), at `place` (for [`Acquire::place`]
    /// when it asks again); a lease of the name ends in this long.
    Queued {
        next_expiry_in: Option<std::time::Duration>,
        place: i64,
    },
    /// Busy, and not queued (`Join::No`): how busy.
    Refused(Occupancy),
    /// A freeze holds the name, by Redis's clock (`Join::No`, no override).
    Frozen,
    /// Asking again with its place, out of line: it kept its place, and its
    /// ticket ended meanwhile (not collected in time while this instance
    /// was paused, left, expired). It is gone: not in line, nothing granted.
    TicketGone,
}

impl Function for Acquire<'_> {
    const OP: Op = Op::Acquire;
    type Reply = Attempt;

    fn args(&self, call: &mut Cmd) {
        call.arg(self.waiter.encode())
            .arg(u8::from(self.join == Join::Queue))
            .arg(
                self.place
                    .map_or_else(String::new, |place| place.to_string()),
            );
    }

    fn decode(reply: &mut Cursor) -> Result<Attempt, Error> {
        match reply.int()? {
            1 => Ok(Attempt::Acquired {
                token: reply.uint()?,
                expires_at_ms: reply.uint()?,
            }),
            2 => Ok(Attempt::Superseded {
                owner: reply.owner()?,
            }),
            3 => Ok(Attempt::Frozen),
            4 => Ok(Attempt::TicketGone),
            0 => {
                let state = reply.occupancy()?;
                Ok(if reply.flag()? {
                    Attempt::Queued {
                        next_expiry_in: state.next_expiry_in,
                        place: reply.int()?,
                    }
                } else {
                    Attempt::Refused(state)
                })
            }
            code => Err(Error::Protocol(format!("acquire replied code {code}"))),
        }
    }
}

impl Serving for Acquire<'_> {}
