//! Acquiring: one POST that waits in the service's line, repeated while that
//! makes sense (a wait longer than the service's maximum is waited in steps of
//! its `max_wait_ms`; a proxy that cuts long requests off is noticed; failures
//! that may pass are retried for up to 60 s in a row, but a URL where nothing
//! has ever answered fails at once), with the place in line
//! and the holder printed every 5 s meanwhile.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;
use tokio::time::Instant;

use super::duration::{human, millis};
use super::exit::{signal_status, Failure, NOT_ACQUIRED, REFUSED, SUPERSEDED, UNAVAILABLE, USAGE};
use super::http::{Answer, Service, Target};
use super::messages::{signal_name, warn};
use super::progress::progress;
use super::request::Request;
use super::signals::Signals;
use super::ticket::{keep_for, leave_ticket};
use super::waiting::Echo;
use crate::domain::LeaseId;
use crate::wire::{LeaseBody, Mode, ProblemType};

/// Failures that may pass are retried for at most this long in a row.
const RETRY_FOR: Duration = Duration::from_secs(60);

/// A lease just granted.
#[derive(Debug)]
pub struct Lease {
    /// The service's lease body; its id is a secret, never printed unless
    /// asked for.
    pub body: LeaseBody,
    /// The same, as the service wrote it (`--output json` prints it so).
    pub json: Value,
    /// When the request that got it was sent, and when its answer came
    /// ([`super::clock`] time): the grant happened in between.
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
    let deadline = started + request.wait;
    let mut step: Option<Duration> = None;
    let mut failing_since: Option<Instant> = None;
    let mut backoff = Duration::from_secs(1);
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
        let mut wait = deadline.saturating_duration_since(Instant::now());
        if let Some(step) = step {
            wait = wait.min(step);
        }
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
                serde_json::json!({"wait_ms": millis(wait), "keep_place_ms": millis(keep)}),
            ),
            None => (path.clone(), request.body(wait, keep_place.then_some(keep))),
        };
        let sent = Instant::now();
        let sent_clock = super::clock::now();
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
            signal = signals.recv() => {
                if taking {
                    // It does not wait: its answer comes at once, and what
                    // it took (a ticket, a lease) is given back.
                    if let Ok(Ok(answer)) = tokio::time::timeout(Duration::from_secs(5), &mut call).await {
                        give_back(service, target, &answer).await;
                    }
                }
                leave_ticket(service, ticket.as_deref()).await;
                return Err(Failure::new(
                    signal_status(signal),
                    format!("got {} while waiting for {target}; giving up", signal_name(signal)),
                ));
            }
        };
        let now = Instant::now();
        let why = match outcome {
            Ok(answer) if answer.status == 201 => {
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
                    received: super::clock::now(),
                });
            }
            Ok(answer) if answer.status == 202 => {
                // Not granted yet; the place is kept as a ticket.
                failing_since = None;
                backoff = Duration::from_secs(1);
                if let Some(id) = answer.body.get("ticket").and_then(Value::as_str) {
                    ticket = Some(format!("{}/tickets/{id}", target.path()));
                }
                if now - sent < wait / 2 {
                    nap(
                        Duration::from_secs(1).min(deadline.saturating_duration_since(now)),
                        signals,
                        target,
                    )
                    .await?;
                }
                if Instant::now() < deadline {
                    continue;
                }
                // --wait ran out: the ticket is left, and one last request
                // that does not wait says who is in the way (409).
                leave_ticket(service, ticket.take().as_deref()).await;
                keep_place = false;
                continue;
            }
            Ok(answer) if answer.status == 404 && ticket.is_some() => {
                // The ticket is gone (its place expired, or Redis lost it):
                // in line again, at the back.
                ticket = None;
                continue;
            }
            Ok(answer) if taking && matches!(answer.status, 409 | 423) => {
                // A service that does not keep places (it ignored
                // keep_place_ms): wait in line as before.
                keep_place = false;
                continue;
            }
            Ok(answer) if answer.status == 409 => {
                failing_since = None;
                backoff = Duration::from_secs(1);
                let problem = answer.problem();
                if problem.as_ref().and_then(|p| p.problem_type()) == Some(ProblemType::Superseded)
                {
                    let by = problem
                        .and_then(|p| p.owner)
                        .map(|o| format!(" (by {o})"))
                        .unwrap_or_default();
                    return Err(Failure::new(
                        SUPERSEDED,
                        format!("superseded: a newer --newest-wins request for {target}{by} took this one's place in line"),
                    ));
                }
                // A wait cut short (a step of max_wait_ms, or a proxy): wait again.
                if now - sent < wait / 2 {
                    nap(
                        Duration::from_secs(1).min(deadline.saturating_duration_since(now)),
                        signals,
                        target,
                    )
                    .await?;
                }
                if Instant::now() < deadline {
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
            Ok(answer) if answer.status == 423 => {
                // Frozen when its wait ended (or it did not wait).
                failing_since = None;
                if Instant::now() < deadline && now - sent < wait / 2 {
                    nap(
                        Duration::from_secs(1).min(deadline.saturating_duration_since(now)),
                        signals,
                        target,
                    )
                    .await?;
                    continue;
                }
                let until = answer
                    .problem()
                    .and_then(|p| p.until.map(|until| (until, p.reason)))
                    .map(|(until, reason)| match reason {
                        Some(reason) => format!(" until {until} ({reason})"),
                        None => format!(" until {until}"),
                    })
                    .unwrap_or_default();
                return Err(Failure::new(
                    NOT_ACQUIRED,
                    format!("{target} is frozen{until}; not acquired"),
                ));
            }
            Ok(answer)
                if matches!(answer.status, 400 | 422)
                    && keep_place
                    && answer.describe().contains("keep_place_ms") =>
            {
                // A service that keeps places for less (or not at all).
                keep_place = false;
                continue;
            }
            Ok(answer) if matches!(answer.status, 400 | 422) => {
                // A wait over the service's maximum: wait in steps of its max_wait_ms.
                if let Some(max) = answer.problem().and_then(|p| p.max_wait_ms) {
                    if max > 0 && max < millis(wait) {
                        step = Some(Duration::from_millis(max));
                        continue;
                    }
                }
                return Err(Failure::new(
                    USAGE,
                    format!("the service rejected the request: {}", answer.describe()),
                ));
            }
            Ok(answer) if matches!(answer.status, 401 | 403) => {
                return Err(Failure::new(
                    REFUSED,
                    format!(
                        "the service refused the request: {} (check --token or BATON_TOKEN)",
                        answer.describe()
                    ),
                ));
            }
            Ok(answer) if answer.status == 429 || answer.status >= 500 => Retry::Answer(answer),
            Ok(answer) => {
                return Err(Failure::new(
                    UNAVAILABLE,
                    format!(
                        "unexpected answer from {}{path}: {} (check --url or BATON_URL)",
                        service.url(),
                        answer.describe()
                    ),
                ));
            }
            // Nothing serves at --url: no wait makes it appear.
            Err(why) if service.is_not_there(&why) && ticket.is_none() => {
                return Err(Failure::new(
                    UNAVAILABLE,
                    format!("{why} (check --url or BATON_URL)"),
                ));
            }
            Err(why) => Retry::NoAnswer(why.why),
        };
        // A waiting request cut off early (no answer, or a gateway's 502/504
        // after 10 s or more): a proxy's timeout, most likely. Wait in
        // shorter requests.
        let took = now - sent;
        if took >= Duration::from_secs(10) && took < wait && why.cut_off() {
            let shorter = took * 3 / 4;
            step = Some(shorter);
            warn(format!(
                "a waiting request was cut off after {} ({}); waiting in requests of {}",
                human(took),
                why.describe(),
                human(shorter)
            ));
            continue;
        }
        let since = *failing_since.get_or_insert(now);
        if now >= deadline || now - since >= RETRY_FOR {
            return Err(Failure::new(
                UNAVAILABLE,
                format!("{}; gave up after {}", why.describe(), human(now - since)),
            ));
        }
        warn(format!(
            "{}; retrying in {}",
            why.describe(),
            human(backoff)
        ));
        nap(backoff.min(deadline - now), signals, target).await?;
        backoff = (backoff * 2).min(Duration::from_secs(8));
    }
}

/// Gives back what a request that did not wait took, as `answer` says: its
/// ticket (202) or its lease (201). Best effort: the caller is giving up.
async fn give_back(service: &Service, target: &Target, answer: &Answer) {
    let field = match answer.status {
        202 => "ticket",
        201 => "id",
        _ => return,
    };
    let Some(id) = answer.body.get(field).and_then(Value::as_str) else {
        return;
    };
    let at = match field {
        "ticket" => format!("{}/tickets/{id}", target.path()),
        _ => format!("{}/{id}", target.path()),
    };
    let _ = service
        .call(Method::DELETE, &at, None, Duration::from_secs(5))
        .await;
}

/// A failure that may pass.
enum Retry {
    Answer(Answer),
    NoAnswer(String),
}

impl Retry {
    fn describe(&self) -> String {
        match self {
            Retry::Answer(answer) => answer.describe(),
            Retry::NoAnswer(why) => why.clone(),
        }
    }

    fn cut_off(&self) -> bool {
        match self {
            Retry::Answer(answer) => matches!(answer.status, 502 | 504),
            Retry::NoAnswer(_) => true,
        }
    }
}

/// A pause that a signal ends.
async fn nap(pause: Duration, signals: &mut Signals, target: &Target) -> Result<(), Failure> {
    tokio::select! {
        () = tokio::time::sleep(pause) => Ok(()),
        signal = signals.recv() => Err(Failure::new(
            signal_status(signal),
            format!("got {} while waiting for {target}; giving up", signal_name(signal)),
        )),
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
