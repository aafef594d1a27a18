//! `keep_alive.lua`: one instance's heartbeat for its waiters on one name.

use std::time::Duration;

use redis::Cmd;

use super::cursor::Cursor;
use super::library::{Function, Op, Serving};
use crate::engine::error::Error;

/// The keep-alive of one name's waiters on this instance.
pub(in crate::engine) struct KeepAlive {
    /// How many of them are in line, as far as this instance knows.
    pub in_line: usize,
    /// When the queue last lost waiters (its key lost or expired), as the
    /// previous keep-alive heard it ([`Beat::lost`]); `None` for the first.
    pub heard_lost: Option<u64>,
}

/// What the line says back.
#[derive(Debug)]
pub(in crate::engine) struct Beat {
    /// When a lease of the name ends next.
    pub next_expiry_in: Option<Duration>,
    /// The line may not hold all of this instance's waiters any more (it
    /// holds fewer than it has, or it lost waiters since the previous
    /// keep-alive): they ask again, and those not in line rejoin.
    pub missing: bool,
    /// When the queue last lost waiters (Redis's clock, ms; 0: never), for
    /// the next keep-alive.
    pub lost: u64,
    /// A waiter was held back for a freeze: if the list the call carried was
    /// stale, this instance checks it and serves the line again.
    pub held_back: bool,
}

impl Function for KeepAlive {
    const OP: Op = Op::KeepAlive;
    type Reply = Beat;

    fn args(&self, call: &mut Cmd) {
        call.arg(self.in_line);
        match self.heard_lost {
            Some(lost) => call.arg(lost),
            None => call.arg(""),
        };
    }

    fn decode(reply: &mut Cursor) -> Result<Beat, Error> {
        Ok(Beat {
            next_expiry_in: reply.expiry()?,
            missing: reply.flag()?,
            lost: reply.uint()?,
            held_back: reply.flag()?,
        })
    }
}

impl Serving for KeepAlive {}
