//! `history.lua`: a name's history, newest first, never a lease id.

use redis::Cmd;

use super::cursor::Cursor;
use super::library::{Function, Op};
use crate::domain::{Priority, TokenName};
use crate::engine::error::Error;
use crate::engine::model::{HistoryEntry, LeaseEnd};

/// One page of a name's history: at most `limit` entries, before `before`
/// (a stream id; `None` for the first page).
pub(in crate::engine) struct ReadHistory<'a> {
    pub limit: usize,
    pub before: Option<&'a str>,
}

/// What it answers: the entries, and where the next page starts.
#[derive(Debug)]
pub(in crate::engine) struct HistoryReply {
    pub entries: Vec<HistoryEntry>,
    pub next: Option<String>,
}

/// How a lease ended, as `core/history.lua` writes it.
fn end_of(how: &str) -> Result<LeaseEnd, Error> {
    Ok(match how {
        "held" => LeaseEnd::Held,
        "released" => LeaseEnd::Released,
        "expired" => LeaseEnd::Expired,
        "force-released" => LeaseEnd::ForceReleased,
        "not-collected" => LeaseEnd::NotCollected,
        other => return Err(Error::Protocol(format!("a lease ended {other:?}"))),
    })
}

impl Function for ReadHistory<'_> {
    const OP: Op = Op::History;
    type Reply = HistoryReply;

    fn args(&self, call: &mut Cmd) {
        call.arg(self.limit).arg(self.before.unwrap_or(""));
    }

    fn decode(reply: &mut Cursor) -> Result<HistoryReply, Error> {
        let n = reply.count()?;
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let end = end_of(&reply.text()?)?;
            let ended_at_ms = u64::try_from(reply.int()?).ok();
            entries.push(HistoryEntry {
                end,
                ended_at_ms,
                fencing_token: reply.uint()?,
                weight: reply.uint()?,
                limit: reply.uint()?,
                acquired_at_ms: reply.uint()?,
                waited_ms: reply.uint()?,
                priority: Priority::new(reply.uint()?)
                    .map_err(|e| Error::Protocol(format!("a lease's priority: {e}")))?,
                owner: reply.owner()?,
                by: Some(reply.text()?)
                    .filter(|by| !by.is_empty())
                    .and_then(|by| TokenName::parse(&by).ok()),
                override_reason: Some(reply.text()?).filter(|o| !o.is_empty()),
                expires_at_ms: reply.uint()?,
                ended_by: Some(reply.text()?)
                    .filter(|by| !by.is_empty())
                    .and_then(|by| TokenName::parse(&by).ok()),
            });
        }
        let next = Some(reply.text()?).filter(|next| !next.is_empty());
        Ok(HistoryReply { entries, next })
    }
}
