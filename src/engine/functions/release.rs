//! `release.lua`: end a lease, or leave the line, and serve whoever moves up.

use redis::Cmd;

use super::cursor::Cursor;
use super::library::{Function, Op, Serving};
use super::waiter::LineEntry;
use crate::domain::{LeaseId, Owner};
use crate::engine::error::Error;
use crate::engine::model::Occupancy;

/// What ends, and how.
pub(in crate::engine) enum End<'a> {
    /// The holder gives the lease back (DELETE).
    Release(LeaseId),
    /// A waiter whose client is gone (an abandoned acquisition): leaves the
    /// line and releases the lease granted meanwhile or taken by a call
    /// whose reply was lost, whichever it has.
    Leave(LineEntry<'a>),
    /// A waiter whose wait ended: takes a lease granted meanwhile or one the
    /// name has room for now, else leaves the line.
    GiveUp(LineEntry<'a>),
}

impl End<'_> {
    fn mode(&self) -> &'static str {
        match self {
            Self::Release(_) => "release",
            Self::Leave(_) => "leave",
            Self::GiveUp(_) => "give-up",
        }
    }
}

/// What ending came to.
#[derive(Debug)]
pub(in crate::engine) enum Ended {
    /// A give-up got a lease, held until `expires_at_ms`.
    Kept { token: u64, expires_at_ms: u64 },
    /// A live lease was released.
    Released {
        fencing_token: u64,
        owner: Option<Owner>,
    },
    /// The waiter left the line; for a give-up, how busy the name is now.
    Left(Occupancy),
    /// Nothing to end: no live lease, not in line; for a give-up, how busy
    /// the name is now.
    Nothing(Occupancy),
}

impl Function for End<'_> {
    const OP: Op = Op::Release;
    type Reply = Ended;

    fn args(&self, call: &mut Cmd) {
        match self {
            Self::Release(id) => call.arg(id.expose()).arg(self.mode()).arg(""),
            Self::Leave(waiter) | Self::GiveUp(waiter) => call
                .arg(waiter.id.expose())
                .arg(self.mode())
                .arg(waiter.encode()),
        };
    }

    fn decode(reply: &mut Cursor) -> Result<Ended, Error> {
        let code = reply.int()?;
        if code == 3 {
            return Ok(Ended::Kept {
                token: reply.uint()?,
                expires_at_ms: reply.uint()?,
            });
        }
        let state = reply.occupancy()?;
        let (fencing_token, owner) = (reply.uint()?, reply.owner()?);
        match code {
            1 => Ok(Ended::Released {
                fencing_token,
                owner,
            }),
            2 => Ok(Ended::Left(state)),
            0 => Ok(Ended::Nothing(state)),
            code => Err(Error::Protocol(format!("release replied code {code}"))),
        }
    }
}

impl Serving for End<'_> {}
