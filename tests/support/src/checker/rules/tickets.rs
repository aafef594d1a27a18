//! The checker's rules for tickets.
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

use crate::checker::{Rule, Verdict};
use crate::history::{when, History, TicketOp};

/// Judges the history's tickets.
pub(crate) fn tickets(history: &History, verdict: &mut Verdict) {
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

#[cfg(test)]
mod tests {
    use crate::checker::synthetic::*;

    #[test]
    fn the_checker_flags_a_ticket_overtaken_or_granted_twice() {
        use crate::history::{Ticket, TicketCall};
        let call = |op, (sent, answered): (u64, u64), status, token| TicketCall {
            op,
            instance: 0,
            sent: at(sent),
            answered: at(answered),
            status,
            token,
        };
        let ticket = |client, priority, calls| Ticket {
            client,
            name: TICKETS.to_owned(),
            priority,
            abandoned: false,
            calls,
        };
        // Taken at 100 (priority 1), still waiting at 2000-3500, collected at
        // 4000 with token 3.
        let waiting = |token: u64| {
            ticket(
                1,
                1,
                vec![
                    call(TicketOp::Take, (0, 100), 202, None),
                    call(TicketOp::Collect, (2000, 3500), 202, None),
                    call(TicketOp::Collect, (3600, 4000), 201, Some(token)),
                ],
            )
        };
        // A later request (sent at `sent`, priority `priority`) granted token 2
        // at `granted`.
        let later = |sent: u64, priority: u8, granted: u64| {
            ticket(
                2,
                priority,
                vec![call(TicketOp::Take, (sent, granted), 201, Some(2))],
            )
        };
        let judged = |tickets: Vec<Ticket>| {
            let mut history = history(Vec::new(), Vec::new());
            history.tickets = tickets;
            judge(&history, &Rules::default())
        };
        // Granted before the ticket was answered still waiting: overtaken, by
        // the same priority and by a lower one.
        for priority in [0, 1] {
            let verdict = judged(vec![waiting(3), later(500, priority, 1000)]);
            assert_eq!(verdict.count(Rule::TicketOvertaken), 1, "{:?}", verdict);
            assert_eq!(verdict.violations.len(), 1, "{:?}", verdict.violations);
        }
        // Not by a higher priority, one sent before the ticket was taken, one
        // granted after the ticket's last wait was sent, nor when the ticket was
        // never answered waiting after it (left, or its place expired: 404).
        let left = ticket(
            1,
            1,
            vec![
                call(TicketOp::Take, (0, 100), 202, None),
                call(TicketOp::Collect, (2000, 2100), 404, None),
            ],
        );
        for tickets in [
            vec![waiting(3), later(500, 2, 1000)],
            vec![waiting(3), later(50, 1, 1000)],
            vec![waiting(3), later(500, 1, 2500)],
            vec![left, later(500, 1, 1000)],
        ] {
            let verdict = judged(tickets);
            assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
        }
        // Granted twice: one ticket collected with two tokens, or one token told
        // to two acquisitions.
        let mut twice = waiting(3);
        twice
            .calls
            .push(call(TicketOp::Collect, (4100, 4200), 201, Some(4)));
        let verdict = judged(vec![twice]);
        assert_eq!(verdict.count(Rule::TicketTwice), 1, "{:?}", verdict);
        let verdict = judged(vec![waiting(2), later(5000, 1, 5100)]);
        assert_eq!(verdict.count(Rule::TicketTwice), 1, "{:?}", verdict);
        // A retried collect that gets the same lease is no second grant.
        let mut retried = waiting(3);
        retried
            .calls
            .push(call(TicketOp::Collect, (4100, 4200), 201, Some(3)));
        let verdict = judged(vec![retried, later(5000, 1, 5100)]);
        assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
    }
}
