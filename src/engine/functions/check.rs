//! `check.lua`: read a live lease by its id; writes nothing.

use redis::Cmd;

use super::cursor::Cursor;
use super::library::{Function, Op};
use crate::domain::{Demand, LeaseId, Owner, Ttl};
use crate::engine::error::Error;

/// The check of one lease.
pub(in crate::engine) struct Check(pub LeaseId);

/// A live lease as Redis keeps it.
#[derive(Debug)]
pub(in crate::engine) struct Stored {
    pub fencing_token: u64,
    /// Held until then (ms since the epoch, Redis's clock).
    pub expires_at_ms: u64,
    pub ttl: Ttl,
    pub demand: Demand,
    pub owner: Option<Owner>,
}

impl Stored {
    /// `{1, token, expires_at_ms, ttl_ms, limit, owner}` or `{0}` (none live).
    pub(in crate::engine) fn decode(reply: &mut Cursor) -> Result<Option<Self>, Error> {
        if !reply.flag()? {
            return Ok(None);
        }
        let protocol = |e: crate::domain::Invalid| Error::Protocol(e.0);
        let fencing_token = reply.uint()?;
        let expires_at_ms = reply.uint()?;
        let ttl = Ttl::from_ms(reply.uint()?).map_err(protocol)?;
        let (limit, weight) = (reply.uint()?, reply.uint()?);
        Ok(Some(Self {
            fencing_token,
            expires_at_ms,
            ttl,
            demand: Demand::from_stored(weight, limit).map_err(protocol)?,
            owner: reply.owner()?,
        }))
    }
}

impl Function for Check {
    const OP: Op = Op::Check;
    type Reply = Option<Stored>;

    fn args(&self, call: &mut Cmd) {
        call.arg(self.0.expose());
    }

    fn decode(reply: &mut Cursor) -> Result<Option<Stored>, Error> {
        Stored::decode(reply)
    }
}
