//! `keep_alive.lua`: one instance's heartbeat for its waiters on one name.

use std::time::Duration;

use redis::Cmd;

use super::cursor::Cursor;
use super::library::{Function, Op, Serving};
use crate::engine::Error;

/// The keep-alive of one name's waiters on this instance.
pub(in crate::engine) struct KeepAlive {
    /// How many of them are in line, as far as this instance knows.
    pub in_line: usize,
}

/// What the line says back.
#[derive(Debug)]
pub(in crate::engine) struct Beat {
    /// When a lease of the name ends next.
    pub next_expiry_in: Option<Duration>,
    /// The line holds fewer of this instance's waiters than it has: they ask
    /// again, and rejoin.
    pub missing: bool,
}

impl Function for KeepAlive {
    const OP: Op = Op::KeepAlive;
    type Reply = Beat;

    fn args(&self, call: &mut Cmd) {
        call.arg(self.in_line);
    }

    fn decode(reply: &mut Cursor) -> Result<Beat, Error> {
        Ok(Beat {
            next_expiry_in: reply.expiry()?,
            missing: reply.flag()?,
        })
    }
}

impl Serving for KeepAlive {}
