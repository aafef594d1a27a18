//! `ask_yield.lua`: ask every holder of a name to finish early.

use redis::Cmd;

use super::cursor::Cursor;
use super::library::{Function, Op};
use crate::domain::{Owner, Reason};
use crate::engine::error::Error;

/// A request to the holders of a name: who asks, and why.
pub(in crate::engine) struct AskYield<'a> {
    pub by: Option<&'a Owner>,
    pub reason: Option<&'a Reason>,
}

impl Function for AskYield<'_> {
    const OP: Op = Op::AskYield;
    /// How many live leases were asked.
    type Reply = u64;

    fn args(&self, call: &mut Cmd) {
        call.arg(self.by.map_or("", Owner::as_str))
            .arg(self.reason.map_or("", Reason::as_str));
    }

    fn decode(reply: &mut Cursor) -> Result<u64, Error> {
        reply.uint()
    }
}
