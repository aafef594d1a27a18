//! `ticket.lua`: tickets, a place in line that outlives the request.

use redis::Cmd;

use super::cursor::Cursor;
use super::library::{Function, Op, Serving};
use super::waiter::LineEntry;
use crate::domain::{KeepPlace, LeaseId, Owner};
use crate::engine::error::Error;
use crate::engine::model::NoticeState;

/// One call on a ticket.
pub(in crate::engine) enum TicketCall<'a> {
    /// A request that does not wait: acquires now, or joins as a ticket.
    Take(LineEntry<'a>, &'a KeepPlace),
    /// A waiting request just queued: its place is kept should it end early.
    Adopt(LineEntry<'a>, &'a KeepPlace),
    /// A waiting request ended before its grant (`gone`: nobody hears it).
    Park(LineEntry<'a>, &'a KeepPlace, bool),
    /// Wait again on a ticket, as the waiter `tag` of this instance when
    /// `Some`, or collect its lease; `keep_ms` renews its place.
    Resume {
        ticket: LeaseId,
        tag: Option<u64>,
        keep_ms: Option<u64>,
    },
    /// A ticket's state.
    Show(LeaseId),
    /// Gives a ticket up.
    Leave(LeaseId),
}

/// What a call on a ticket came to.
#[derive(Debug)]
pub(in crate::engine) enum TicketReply {
    /// No such ticket (or `Adopt`/`Leave` found nothing to do).
    Gone,
    /// Done (`Adopt`, `Leave`).
    Done,
    /// The lease, held until `expires_at_ms` by Redis, with its terms.
    Lease {
        token: u64,
        expires_at_ms: u64,
        ttl_ms: u64,
        limit: u64,
        weight: u64,
        owner: Option<Owner>,
    },
    /// In line at `place` of `waiting`, kept until `place_expires_at_ms`;
    /// `entry`: the waiter as the line keeps it now.
    Waiting {
        place: u64,
        waiting: u64,
        place_expires_at_ms: u64,
        entry: String,
    },
    /// Granted, held for it until `pickup_by_ms`.
    Granted {
        pickup_by_ms: u64,
        waiting: u64,
        place_expires_at_ms: u64,
        /// Its turn notice: delivered then (ms), or why it is not yet.
        notice: NoticeState,
    },
}

impl TicketCall<'_> {
    fn mode(&self) -> &'static str {
        match self {
            Self::Take(..) => "take",
            Self::Adopt(..) => "adopt",
            Self::Park(..) => "park",
            Self::Resume { .. } => "resume",
            Self::Show(_) => "show",
            Self::Leave(_) => "leave",
        }
    }
}

impl Function for TicketCall<'_> {
    const OP: Op = Op::Ticket;
    type Reply = TicketReply;

    fn args(&self, call: &mut Cmd) {
        call.arg(self.mode());
        match self {
            Self::Take(entry, keep) | Self::Adopt(entry, keep) | Self::Park(entry, keep, _) => {
                let gone = matches!(self, Self::Park(_, _, true));
                call.arg(entry.id.expose())
                    .arg(entry.encode())
                    .arg(keep.keep_ms)
                    .arg(keep.pickup_ms)
                    .arg(u8::from(gone))
                    .arg(keep.notify.as_ref().map_or("", |url| url.as_str()));
            }
            Self::Resume {
                ticket,
                tag,
                keep_ms,
            } => {
                call.arg(ticket.expose())
                    .arg(tag.map_or(String::new(), |t| t.to_string()))
                    .arg(keep_ms.map_or(String::new(), |k| k.to_string()))
                    .arg("")
                    .arg(u8::from(tag.is_some()))
                    .arg("");
            }
            Self::Show(ticket) | Self::Leave(ticket) => {
                call.arg(ticket.expose())
                    .arg("")
                    .arg("")
                    .arg("")
                    .arg("0")
                    .arg("");
            }
        }
    }

    fn decode(reply: &mut Cursor) -> Result<TicketReply, Error> {
        match reply.int()? {
            0 => Ok(TicketReply::Gone),
            4 => Ok(TicketReply::Done),
            1 => Ok(TicketReply::Lease {
                token: reply.uint()?,
                expires_at_ms: reply.uint()?,
                ttl_ms: reply.uint()?,
                limit: reply.uint()?,
                weight: reply.uint()?,
                owner: reply.owner()?,
            }),
            2 => Ok(TicketReply::Waiting {
                place: reply.uint()?,
                waiting: reply.uint()?,
                place_expires_at_ms: reply.uint()?,
                entry: reply.text()?,
            }),
            3 => Ok(TicketReply::Granted {
                pickup_by_ms: reply.uint()?,
                waiting: reply.uint()?,
                place_expires_at_ms: reply.uint()?,
                notice: {
                    let at = reply.uint()?;
                    let error = reply.text()?;
                    NoticeState {
                        notified_at_ms: (at > 0).then_some(at),
                        error: (!error.is_empty()).then_some(error),
                    }
                },
            }),
            code => Err(Error::Protocol(format!("ticket replied code {code}"))),
        }
    }
}

impl Serving for TicketCall<'_> {}
