//! `force_release.lua`: end every lease of a name, whoever holds it.

use redis::Cmd;

use super::cursor::Cursor;
use super::library::{Function, Op, Serving};
use super::tail::Expired;
use crate::domain::TokenName;
use crate::engine::error::Error;

/// The force-release of one name, asked with the token named `by` (`None`
/// with auth off): each ended lease's history entry says so (`ended_by`).
pub(in crate::engine) struct ForceRelease<'a> {
    pub by: Option<&'a TokenName>,
}

/// The leases it ended (each as the audit names an ended lease).
#[derive(Debug)]
pub(in crate::engine) struct EndedLeases {
    /// How many, in all.
    pub count: u64,
    /// The first 100 of them, with their owner and token (for the audit).
    pub shown: Vec<Expired>,
}

impl Function for ForceRelease<'_> {
    const OP: Op = Op::ForceRelease;
    /// `None` when nothing was held (nothing changed).
    type Reply = Option<EndedLeases>;

    fn args(&self, call: &mut Cmd) {
        call.arg(self.by.map_or("", TokenName::as_str));
    }

    fn decode(reply: &mut Cursor) -> Result<Option<EndedLeases>, Error> {
        if !reply.flag()? {
            return Ok(None);
        }
        let count = reply.uint()?;
        let n = reply.count()?;
        let shown = Expired::decode_list(reply, n)?;
        Ok(Some(EndedLeases { count, shown }))
    }
}

impl Serving for ForceRelease<'_> {}
