//! `refresh.lua`: extend a live lease.

use redis::Cmd;

use super::check::Stored;
use super::cursor::Cursor;
use super::library::{Function, Op};
use crate::domain::{LeaseId, Ttl};
use crate::engine::error::Error;

/// The refresh of one lease: by `ttl`, or by its own ttl.
pub(in crate::engine) struct Extend {
    pub id: LeaseId,
    pub ttl: Option<Ttl>,
}

impl Function for Extend {
    const OP: Op = Op::Refresh;
    /// The lease with its new expiry; `None` when it was not live.
    type Reply = Option<Stored>;

    fn args(&self, call: &mut Cmd) {
        call.arg(self.id.expose())
            .arg(self.ttl.map_or(String::new(), |t| t.as_ms().to_string()));
    }

    fn decode(reply: &mut Cursor) -> Result<Option<Stored>, Error> {
        Stored::decode(reply)
    }
}
