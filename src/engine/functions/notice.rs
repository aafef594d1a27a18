//! `notice.lua`: turn notices claimed, and told sent or failed, by the
//! instance that delivers them.

use std::time::Duration;

use redis::Cmd;

use super::cursor::Cursor;
use super::library::{Function, Op};
use crate::domain::LeaseId;
use crate::engine::error::Error;

/// One call on a name's turn notices.
pub(in crate::engine) enum NoticeCall<'a> {
    /// Claims the notices due for `claim`; a name whose tickets still wait
    /// is to be looked at again within `look`.
    Claim { claim: Duration, look: Duration },
    /// The ticket's notice was delivered.
    Sent(LeaseId),
    /// The ticket's delivery failed (`why`): tried again in `retry`.
    Failed {
        ticket: LeaseId,
        retry: Duration,
        why: &'a str,
    },
    /// Drops `member` from the index of names with notices while its score
    /// is still `score` (run on the index's key).
    Forget { member: &'a str, score: u64 },
}

/// A notice claimed: deliver it now.
#[derive(Debug, Clone)]
pub(in crate::engine) struct Claimed {
    pub ticket: LeaseId,
    pub url: String,
    pub fencing_token: u64,
    pub pickup_by_ms: u64,
}

/// What a call on the notices came to.
#[derive(Debug)]
pub(in crate::engine) enum NoticeReply {
    /// The notices claimed, and when to look at the name next (Redis's
    /// clock, ms; `None`: nothing left to look for).
    Claimed {
        notices: Vec<Claimed>,
        next_ms: Option<u64>,
    },
    /// `sent`: delivered at (ms); `failed`: to be tried again; `forget`:
    /// dropped. `None`: nothing was there to do.
    Done(Option<u64>),
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl NoticeCall<'_> {
    fn mode(&self) -> &'static str {
        match self {
            Self::Claim { .. } => "claim",
            Self::Sent(_) => "sent",
            Self::Failed { .. } => "failed",
            Self::Forget { .. } => "forget",
        }
    }
}

impl Function for NoticeCall<'_> {
    const OP: Op = Op::Notice;
    type Reply = NoticeReply;

    fn args(&self, call: &mut Cmd) {
        call.arg(self.mode());
        match self {
            Self::Claim { claim, look } => {
                call.arg(millis(*claim)).arg(millis(*look));
            }
            Self::Sent(ticket) => {
                call.arg(ticket.expose());
            }
            Self::Failed { ticket, retry, why } => {
                call.arg(ticket.expose()).arg(millis(*retry)).arg(*why);
            }
            Self::Forget { member, score } => {
                call.arg(*member).arg(*score);
            }
        }
    }

    fn decode(reply: &mut Cursor) -> Result<NoticeReply, Error> {
        let first = reply.uint()?;
        if reply.is_empty() {
            return Ok(NoticeReply::Done((first > 0).then_some(first)));
        }
        let n = reply.count()?;
        let mut notices = Vec::with_capacity(n);
        for _ in 0..n {
            let ticket = LeaseId::parse(&reply.text()?)
                .map_err(|_| Error::Protocol("a notice names no ticket".into()))?;
            notices.push(Claimed {
                ticket,
                url: reply.text()?,
                fencing_token: reply.uint()?,
                pickup_by_ms: reply.uint()?,
            });
        }
        Ok(NoticeReply::Claimed {
            notices,
            next_ms: (first > 0).then_some(first),
        })
    }
}
