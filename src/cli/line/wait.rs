//! Acquiring one lease: one POST that waits in the service's line, repeated
//! while that makes sense by the rules of [`crate::cli::attempts`] (steps of
//! `max_wait_ms`, a proxy's cut noticed, failures that may pass retried for
//! up to 60 s in a row; a URL where nothing has ever answered fails at once),
//! its place kept as a ticket across requests, with the place in line and
//! the holder printed every 5 s meanwhile.

use std::time::Duration;

use reqwest::Method;
use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

use crate::cli::answer::{unexpected, unreachable, Answer, Outcome};
use crate::cli::attempts::{Attempts, Retry};
use crate::cli::duration::{human, millis};
use crate::cli::exit::{Failure, NOT_ACQUIRED, SUPERSEDED, UNAVAILABLE};
use crate::cli::http::{json, Service};
use crate::cli::line::progress::progress;
use crate::cli::line::request::Request;
use crate::cli::line::ticket::{keep_for, leave_ticket};
use crate::cli::line::waiting::Echo;
use crate::cli::signals::Signals;
use crate::cli::target::Target;
use crate::domain::LeaseId;
use crate::wire::{LeaseBody, Mode, TicketBody, TicketWaitBody};

/// A lease just granted.
#[derive(Debug)]
pub struct Lease {
    /// The service's lease body; its id is a secret, never printed unless
    /// asked for.
    pub body: LeaseBody,
    /// The same, as the service wrote it (`--output json` prints it so).
    pub json: Value,
    /// When the request that got it was sent, and when its answer came
    /// ([`crate::cli::clock`] time): the grant happened in between.
    pub sent: Duration,
    pub received: Duration,
}

/// Waits for `request` in line until it is granted or may not be.
///
/// # Errors
/// Not acquired (75), superseded (79), refused (64, 77), unreachable (69), or
/// a signal (128+N).
pub async fn acquire(
    service: &Service,
    request: &Request,
    signals: &mut Signals,
) -> Result<Lease, Failure> {
    let target = &request.target;
    let path = target.path();
    let started = Instant::now();
    let mut attempts = Attempts::new(target.to_string(), request.wait, signals);
    let deadline = attempts.deadline();
    // The waiting line as last printed, across the requests of this wait.
    let mut echo = Echo::default();
    // A wait keeps its place across the service's cap, restarts and
    // dropped connections: the first request asks keep_place_ms, and once
    // the service answers 202 with a ticket, every later request waits on
    // that ticket (`POST .../tickets/ID`), in the same place.
    let mut keep_place = !request.wait.is_zero();
    let mut ticket: Option<String> = request
        .ticket
        .as_ref()
        .map(|id| format!("{}/tickets/{id}", target.path()));
    loop {
        let mut wait = attempts.next_wait();
        // The place is taken first without waiting (201, or 202 with the
        // ticket), then waited on as a ticket: a wait that ends early (a
        // signal) then always knows which ticket to leave. A waiting request
        // that keeps its place and is cut off by a signal would leave a
        // ticket behind that nobody knows of, and its lease would hold the
        // name until its pickup ran out. (Not for --newest-wins: superseding
        // is a waiting request's.)
        let taking = keep_place && ticket.is_none() && !request.newest_wins;
        if taking {
            wait = Duration::ZERO;
        }
        let keep = keep_for(deadline);
        let (path, body) = match &ticket {
            Some(at) => (
                at.clone(),
                json(&TicketWaitBody {
                    wait_ms: Some(millis(wait)),
                    keep_place_ms: Some(millis(keep)),
                }),
            ),
            None => (path.clone(), request.body(wait, keep_place.then_some(keep))),
        };
        attempts.sending(wait);
        let sent = Instant::now();
        let sent_clock = crate::cli::clock::now();
        let printing = request.progress && !wait.is_zero();
        let call = service.call(
            Method::POST,
            &path,
            Some(&body),
            wait + Duration::from_secs(30),
        );
        tokio::pin!(call);
        let outcome = tokio::select! {
            outcome = &mut call => outcome,
            () = progress(service, request, ticket.as_deref(), sent, started, &mut echo), if printing => unreachable!("prints forever"),
            signal = attempts.signals().recv() => {
                if taking {
                    // It does not wait: its answer comes at once, and what
                    // it took (a ticket, a lease) is given back.
                    if let Ok(Ok(answer)) = tokio::time::timeout(Duration::from_secs(5), &mut call).await {
                        give_back(service, target, &answer).await;
                    }
                }
                leave_ticket(service, ticket.as_deref()).await;
                return Err(attempts.signalled(signal));
            }
        };
        attempts.came();
        let answer = match outcome {
            Ok(answer) => answer,
            // Nothing serves at --url: no wait makes it appear.
            Err(why) if service.is_not_there(&why) && ticket.is_none() => {
                return Err(unreachable(why));
            }
            Err(why) => {
                attempts.failed(Retry::NoAnswer(why.why)).await?;
                continue;
            }
        };
        match (answer.status, answer.outcome()) {
            (201, _) => {
                let not_baton = |without: String| {
                    Failure::new(
                        UNAVAILABLE,
                        format!(
                            "the service answered 201 without {without}; is {} a baton service?",
                            service.url()
                        ),
                    )
                };
                let body = LeaseBody::from_json(target.kind, &answer.body)
                    .map_err(|err| not_baton(format!("a lease ({err})")))?;
                if LeaseId::parse(body.id()).is_err() {
                    return Err(not_baton("a lease id".into()));
                }
                return Ok(Lease {
                    body,
                    json: answer.body,
                    sent: sent_clock,
                    received: crate::cli::clock::now(),
                });
            }
            (202, _) => {
                // Not granted yet; the place is kept as a ticket.
                attempts.answered();
                if let Ok(queued) = TicketBody::deserialize(&answer.body) {
                    ticket = Some(format!("{}/tickets/{}", target.path(), queued.ticket));
                }
                attempts.pause_if_early().await?;
                if !attempts.expired() {
                    continue;
                }
                // --wait ran out: the ticket is left, and one last request
                // that does not wait says who is in the way (409).
                leave_ticket(service, ticket.take().as_deref()).await;
                keep_place = false;
            }
            (404, _) if ticket.is_some() => {
                // The ticket is gone (its place expired, or Redis lost it):
                // in line again, at the back.
                ticket = None;
            }
            (_, Outcome::Busy | Outcome::Superseded { .. } | Outcome::Frozen { .. }) if taking => {
                // A service that does not keep places (it ignored
                // keep_place_ms): wait in line as before.
                keep_place = false;
            }
            (_, Outcome::Superseded { by }) => {
                let by = by.map(|o| format!(" (by {o})")).unwrap_or_default();
                return Err(Failure::new(
                    SUPERSEDED,
                    format!("superseded: a newer --newest-wins request for {target}{by} took this one's place in line"),
                ));
            }
            (_, Outcome::Busy) => {
                attempts.answered();
                // A wait cut short (a step of max_wait_ms, or a proxy): wait again.
                attempts.pause_if_early().await?;
                if !attempts.expired() {
                    continue;
                }
                let detail = holders(&answer);
                return Err(Failure::new(
                    NOT_ACQUIRED,
                    if request.wait.is_zero() {
                        format!("{target} is taken{detail}; not waiting (--wait 0)")
                    } else {
                        format!(
                            "could not acquire {target} within {}{detail}",
                            human(request.wait)
                        )
                    },
                ));
            }
            (_, Outcome::Frozen { until, reason }) => {
                // Frozen when its wait ended (or it did not wait).
                attempts.answered();
                if !attempts.expired() && attempts.early() {
                    attempts.pause_if_early().await?;
                    continue;
                }
                let until = until
                    .map(|until| match reason {
                        Some(reason) => format!(" until {until} ({reason})"),
                        None => format!(" until {until}"),
                    })
                    .unwrap_or_default();
                return Err(Failure::new(
                    NOT_ACQUIRED,
                    format!("{target} is frozen{until}; not acquired"),
                ));
            }
            (_, Outcome::Rejected { .. })
                if keep_place && answer.describe().contains("keep_place_ms") =>
            {
                // A service that keeps places for less (or not at all).
                keep_place = false;
            }
            _ => {
                let about = format!("unexpected answer from {}{path}", service.url());
                attempts
                    .otherwise(answer, "request", |answer| unexpected(&about, answer, ""))
                    .await?;
            }
        }
    }
}

/// Gives back what a request that did not wait took, as `answer` says: its
/// ticket (202) or its lease (201). Best effort: the caller is giving up.
async fn give_back(service: &Service, target: &Target, answer: &Answer) {
    let at = match answer.status {
        202 => TicketBody::deserialize(&answer.body)
            .map(|queued| format!("{}/tickets/{}", target.path(), queued.ticket)),
        201 => LeaseBody::from_json(target.kind, &answer.body)
            .map(|lease| format!("{}/{}", target.path(), lease.id())),
        _ => return,
    };
    if let Ok(at) = at {
        let _ = service
            .call(Method::DELETE, &at, None, Duration::from_secs(5))
            .await;
    }
}

/// ` (held by X)`, ` (held shared by 2)`, ` (3 of 4 permits used)`, from a 409.
fn holders(answer: &Answer) -> String {
    let Some(problem) = answer.problem() else {
        return String::new();
    };
    if problem.mode == Some(Mode::Shared) {
        return format!(" (held shared by {})", problem.holders.unwrap_or(0));
    }
    if let Some(owner) = problem.owner {
        return format!(" (held by {owner})");
    }
    match (problem.used.or(problem.holders), problem.limit) {
        (Some(used), Some(limit)) => format!(" ({used} of {limit} permits used)"),
        (Some(used), None) => format!(" ({used} permits used)"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_409_names_what_is_in_the_way() {
        let answer = |body| Answer { status: 409, body };
        assert_eq!(
            holders(&answer(
                json!({"owner": "w", "mode": "exclusive", "holders": 1})
            )),
            " (held by w)"
        );
        assert_eq!(
            holders(&answer(
                json!({"owner": "r2", "mode": "shared", "holders": 2})
            )),
            " (held shared by 2)"
        );
        assert_eq!(
            holders(&answer(json!({"holders": 1, "used": 3, "limit": 4}))),
            " (3 of 4 permits used)"
        );
    }
}
