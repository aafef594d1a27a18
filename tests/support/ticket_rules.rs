//! The checker's rules for tickets (a child of `checker.rs`).
//!
//! - `TicketOvertaken`: a ticket answered still waiting (a collect answered
//!   202) after a 201 had been received by a request of the same name with
//!   the same or a lower priority that was sent after the ticket was taken
//!   (its take answered 202). A 202 proves the ticket kept its place until
//!   then (one whose place expired, that was left, or that Redis lost answers
//!   404), and a 201 received proves its grant came before; a granted but
//!   uncollected ticket is never answered 202, so it is not judged waiting
//!   after its grant. Only a lock asked exclusive is used, so the line is in
//!   order: same or lower priority never goes first.
//! - `TicketTwice`: one ticket collected with two different fencing tokens,
//!   or one token told to two different acquisitions of the name.
//! - `Unclear`: an answer the contract does not name for the call.

use std::collections::BTreeMap;

use super::super::history::{when, History, TicketOp};
use super::{Rule, Verdict};

/// Judges the history's tickets.
pub(super) fn tickets(history: &History, verdict: &mut Verdict) {
    for ticket in &history.tickets {
        for call in &ticket.calls {
            let named: &[u16] = match call.op {
                TicketOp::Take => &[0, 201, 202, 409, 423, 503],
                TicketOp::Collect => &[0, 201, 202, 404, 503],
                TicketOp::Leave => &[0, 204, 404, 503],
            };
            if !named.contains(&call.status) {
                let text = format!(
                    "ticket of client {} on {}: {:?} answered {}",
                    ticket.client, ticket.name, call.op, call.status
                );
                verdict.flag(Rule::Unclear, text);
            }
        }
    }
    twice(history, verdict);
    overtaken(history, verdict);
}

fn twice(history: &History, verdict: &mut Verdict) {
    let mut told: BTreeMap<(&str, u64), usize> = BTreeMap::new();
    for (i, ticket) in history.tickets.iter().enumerate() {
        let mut tokens: Vec<u64> = ticket.grants().map(|(_, t)| t).collect();
        tokens.sort_unstable();
        tokens.dedup();
        if tokens.len() > 1 {
            verdict.flag(
                Rule::TicketTwice,
                format!(
                    "a ticket of client {} on {} collected as {tokens:?}",
                    ticket.client, ticket.name
                ),
            );
        }
        for token in tokens {
            if let Some(other) = told.insert((ticket.name.as_str(), token), i) {
                verdict.flag(
                    Rule::TicketTwice,
                    format!(
                        "token {token} of {} told to clients {} and {}",
                        ticket.name, history.tickets[other].client, ticket.client
                    ),
                );
            }
        }
    }
}

fn overtaken(history: &History, verdict: &mut Verdict) {
    for ticket in history.tickets.iter().filter(|t| t.taken()) {
        let taken = ticket.calls[0].answered;
        let waiting = ticket
            .calls
            .iter()
            .filter(|c| c.op == TicketOp::Collect && c.status == 202);
        for seen in waiting {
            let ahead = history.tickets.iter().find_map(|later| {
                if later.name != ticket.name
                    || later.priority > ticket.priority
                    || later.calls.first().is_none_or(|c| c.sent <= taken)
                {
                    return None;
                }
                later
                    .grants()
                    .find(|(grant, _)| grant.answered < seen.sent)
                    .map(|(_, token)| (later.client, token))
            });
            if let Some((client, token)) = ahead {
                verdict.flag(
                    Rule::TicketOvertaken,
                    format!(
                        "a ticket of client {} on {} (priority {}, taken {}) still waiting at {}, \
                         after client {client}'s later request got token {token}",
                        ticket.client,
                        ticket.name,
                        ticket.priority,
                        when(taken),
                        when(seen.sent)
                    ),
                );
            }
        }
    }
}
