//! `baton enqueue` and `baton leave`: a ticket, a place in line that
//! outlives the request (`keep_place_ms`), taken now and waited on later
//! (`baton run --ticket ID`, or `BATON_TICKET`), or given up.

use std::time::Duration;

use reqwest::Method;
use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

use super::answer::failure;
use super::args::{EnqueueArgs, LeaseOutput, LeaveArgs};
use super::duration::human;
use super::exit::{Failure, NO_SUCH, USAGE};
use super::http::{call, Service};
use super::messages::{print, say};
use super::request::Request;
use super::target::Target;
use super::variables::quote;
use super::waiting::{describe_holder, Echo};
use crate::domain::Kind;
use crate::wire::{LeaseBody, StatusBody, TicketBody, TicketFrozen, TicketStateBody};

/// `baton enqueue NAME`: takes a ticket (or the lease, when the name is free:
/// its id is the ticket, which `baton run --ticket` collects) and prints it.
///
/// # Errors
/// The call failed.
pub async fn enqueue(args: EnqueueArgs) -> Result<(), Failure> {
    let kind = args.lease.kind();
    let target = Target::new(kind, &args.name)?;
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let request = Request::new(&target, args.lease.ttl, &args.lease);
    let mut body = request.body(Duration::ZERO, Some(args.keep));
    if let Some(url) = &args.notify {
        body["notify"] = Value::String(url.clone());
    }
    let answer = call(&service, Method::POST, &target.path(), Some(&body)).await?;
    // In line (202), or granted at once (201: the lease id is the ticket).
    let (ticket, queued) = match answer.status {
        202 => TicketBody::deserialize(&answer.body)
            .ok()
            .map(|queued| (queued.ticket.clone(), Some(queued))),
        201 => LeaseBody::from_json(kind, &answer.body)
            .ok()
            .map(|lease| (lease.id().to_owned(), None)),
        _ => return Err(failure(&answer, &target)),
    }
    .ok_or_else(|| Failure::new(USAGE, "the service answered without a ticket"))?;
    let mut pairs = vec![
        ("BATON_TICKET", ticket.clone()),
        ("BATON_LOCK_NAME", args.name.clone()),
        (
            "BATON_KIND",
            match kind {
                Kind::Lock => "lock",
                Kind::Semaphore => "semaphore",
            }
            .to_owned(),
        ),
    ];
    if let Some(limit) = args.lease.limit {
        pairs.push(("BATON_LIMIT", limit.to_string()));
    }
    let printed = match args.output {
        LeaseOutput::Json => print(format!("{}\n", answer.body)),
        LeaseOutput::Env => print(
            pairs
                .iter()
                .map(|(k, v)| format!("{k}={v}\n"))
                .collect::<String>(),
        ),
        LeaseOutput::Shell => print(
            pairs
                .iter()
                .map(|(k, v)| format!("export {k}={}\n", quote(v)))
                .collect::<String>(),
        ),
        LeaseOutput::Text => match queued {
            None => print(format!(
                "acquired {target} at once; its ticket collects it: baton run --ticket {ticket}\n"
            )),
            Some(queued) => print(format!(
                "in line for {target} at place {} of {}, kept until \"{}\": baton run --ticket {ticket}\n",
                queued.place, queued.waiting, queued.place_expires_at
            )),
        },
    };
    printed.map_err(|_| Failure::new(USAGE, "could not print the ticket"))
}

/// `baton leave NAME TICKET`: gives a ticket up.
///
/// # Errors
/// No such ticket (66), or the call failed.
pub async fn leave(args: LeaveArgs) -> Result<(), Failure> {
    let kind = args.kind.limit.map_or(Kind::Lock, |_| Kind::Semaphore);
    let target = Target::new(kind, &args.name)?;
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let path = format!("{}/tickets/{}", target.path(), args.ticket);
    let answer = call(&service, Method::DELETE, &path, None).await?;
    match answer.status {
        204 => {
            say(format!("left the line for {target}"));
            Ok(())
        }
        404 => Err(Failure::new(
            NO_SUCH,
            format!(
                "no such ticket for {target}: {} (it left, expired or was collected)",
                answer.describe()
            ),
        )),
        _ => Err(failure(&answer, &target)),
    }
}

/// How long a ticket keeps its place: the wait left and a minute, so that a
/// restart of the service or a dropped connection loses nothing.
pub(super) fn keep_for(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(60)
}

/// Gives a ticket up (best effort: its place expires anyway).
pub(super) async fn leave_ticket(service: &Service, ticket: Option<&str>) {
    if let Some(at) = ticket {
        let _ = service
            .call(Method::DELETE, at, None, Duration::from_secs(5))
            .await;
    }
}

/// Every 5 s while waiting on the ticket at `at` (the first after 1 s): its
/// place, from the ticket itself (`GET .../tickets/ID`), and who is in the
/// way, from the name's status, through `echo`.
pub(super) async fn progress(
    service: &Service,
    request: &Request,
    at: &str,
    started: Instant,
    echo: &mut Echo,
) {
    tokio::time::sleep(Duration::from_secs(1)).await;
    loop {
        if let Ok(answer) = service
            .call(Method::GET, at, None, Duration::from_secs(5))
            .await
        {
            // An answer it cannot read says nothing: the next one may.
            let ticket = (answer.status == 200)
                .then(|| answer.read::<TicketStateBody>("ticket").ok())
                .flatten();
            if let Some(ticket) = ticket {
                // Who is in the way, from the name's status.
                let holder = match service
                    .call(
                        Method::GET,
                        &request.target.path(),
                        None,
                        Duration::from_secs(5),
                    )
                    .await
                {
                    Ok(status) if status.status == 200 => {
                        StatusBody::from_json(request.target.kind, &status.body)
                            .ok()
                            .map(|status| format!("; {}", describe_holder(&status)))
                    }
                    _ => None,
                };
                let place = describe_place(&ticket, &holder.unwrap_or_default());
                echo.say(
                    ticket.frozen.is_some(),
                    format!(
                        "waiting for {}: {place}; waited {} of {}",
                        request.target,
                        human(started.elapsed()),
                        human(request.wait)
                    ),
                );
            }
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

/// `place 3 of 5 in line; ticket kept until 2026-12-05T19:00:00Z` (with
/// `frozen until TIME (reason); ` before it and `about 2m00s left; ` before the ticket when the
/// ticket says so; `holder`, `; held by X`, after the place), or `granted,
/// collecting` once its turn came.
fn describe_place(ticket: &TicketStateBody, holder: &str) -> String {
    if ticket.state == "granted" {
        return "granted, collecting".to_owned();
    }
    let (place, waiting, until) = (ticket.place, ticket.waiting, &ticket.place_expires_at);
    // `frozen until TIME (reason); `, as the status-based line says it.
    let frozen = match &ticket.frozen {
        None => String::new(),
        Some(TicketFrozen {
            until,
            reason: Some(reason),
            ..
        }) => format!("frozen until {until} ({reason}); "),
        Some(TicketFrozen { until, .. }) => format!("frozen until {until}; "),
    };
    let eta = ticket
        .eta_ms
        .map(|ms| format!("about {} left; ", human(Duration::from_millis(ms))))
        .unwrap_or_default();
    format!("{frozen}place {place} of {waiting} in line{holder}; {eta}ticket kept until {until}")
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn place(ticket: Value, holder: &str) -> String {
        describe_place(&serde_json::from_value(ticket).unwrap(), holder)
    }

    #[test]
    fn the_waiting_line_shows_the_ticket_s_place() {
        let waiting = json!({"state": "waiting", "place": 3, "waiting": 5,
            "place_expires_at": "2026-12-05T19:00:00Z", "eta_ms": 120_000});
        assert_eq!(
            place(waiting, ""),
            "place 3 of 5 in line; about 2m00s left; ticket kept until 2026-12-05T19:00:00Z"
        );
        let frozen = json!({"state": "waiting", "place": 1, "waiting": 1,
            "place_expires_at": "2026-12-05T19:00:00Z", "frozen": {"until": "2026-12-06T07:00:00Z", "reason": "incident"}});
        assert_eq!(
            place(frozen, "; held by x"),
            "frozen until 2026-12-06T07:00:00Z (incident); place 1 of 1 in line; held by x; ticket kept until 2026-12-05T19:00:00Z"
        );
        let granted = json!({"state": "granted", "place": 0, "waiting": 0,
            "place_expires_at": "2026-12-05T19:00:00Z", "pickup_by": "2026-12-05T19:00:00Z"});
        assert_eq!(place(granted, ""), "granted, collecting");
    }
}
