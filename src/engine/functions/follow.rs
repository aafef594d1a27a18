//! `follow.lua`: a holder's stream opens on a lease (or is kept open on its
//! name), so that the calls that change a lease of the name tell it.

use std::time::Duration;

use redis::Cmd;

use super::cursor::Cursor;
use super::library::{Function, Op};
use crate::domain::{LeaseId, Owner, Ttl};
use crate::engine::error::Error;

/// The follow of one lease, as its stream opens.
pub(in crate::engine) struct Follow(pub LeaseId);

/// The lease followed, as Redis holds it now.
#[derive(Debug, Clone)]
pub(in crate::engine) struct Followed {
    pub fencing_token: u64,
    /// Held until then (ms since the epoch, Redis's clock).
    pub expires_at_ms: u64,
    /// How long that is from now, by Redis's clock.
    pub expires_in: Duration,
    pub ttl: Ttl,
    pub owner: Option<Owner>,
}

impl Function for Follow {
    const OP: Op = Op::Follow;
    /// `None`: no live lease has that id.
    type Reply = Option<Followed>;

    fn args(&self, call: &mut Cmd) {
        call.arg(self.0.expose());
    }

    fn decode(reply: &mut Cursor) -> Result<Option<Followed>, Error> {
        if !reply.flag()? {
            return Ok(None);
        }
        let fencing_token = reply.uint()?;
        let expires_at_ms = reply.uint()?;
        let expires_in = reply.time_left()?;
        let ttl = Ttl::from_ms(reply.uint()?).map_err(|e| Error::Protocol(e.0))?;
        Ok(Some(Followed {
            fencing_token,
            expires_at_ms,
            expires_in,
            ttl,
            owner: reply.owner()?,
        }))
    }
}

/// The renewal of a followed name (its instance still has streams on it).
pub(in crate::engine) struct KeepFollowing;

impl Function for KeepFollowing {
    const OP: Op = Op::Follow;
    /// Whether the name is still held (and so followed).
    type Reply = bool;

    fn args(&self, call: &mut Cmd) {
        call.arg("");
    }

    fn decode(reply: &mut Cursor) -> Result<bool, Error> {
        reply.flag()
    }
}
