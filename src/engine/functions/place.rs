//! `place.lua`: a waiter's place in line and the leases it waits behind.

use redis::Cmd;

use super::cursor::Cursor;
use super::library::{Function, Op};
use super::status::holders;
use crate::engine::error::Error;
use crate::engine::model::Place;

/// The place of one waiter, as the line keeps it ([`super::waiter::LineEntry`]).
pub(in crate::engine) struct Find<'a>(pub &'a str);

impl Function for Find<'_> {
    const OP: Op = Op::Place;
    /// `None` when it is not in line (granted, or gone).
    type Reply = Option<Place>;

    fn args(&self, call: &mut Cmd) {
        call.arg(self.0);
    }

    fn decode(reply: &mut Cursor) -> Result<Option<Place>, Error> {
        let position = reply.uint()?;
        let waiting = reply.uint()?;
        let holders = holders(reply)?;
        Ok((position > 0).then_some(Place {
            eta: None,
            position,
            waiting,
            holders,
        }))
    }
}
