//! `baton enqueue` and `baton leave`: a ticket, a place in line that
//! outlives the request (`keep_place_ms`), taken now and waited on later
//! (`baton run --ticket ID`, or `BATON_TICKET`), or given up.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::args::{EnqueueArgs, LeaseOutput, LeaveArgs};
use super::calls::failure;
use super::exit::{Failure, USAGE};
use super::http::{call, Service, Target};
use super::line::Request;
use super::messages::{print, say};
use super::variables::quote;
use crate::domain::Kind;

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
    let body = request.body(Duration::ZERO, Some(args.keep));
    let answer = call(&service, Method::POST, &target.path(), Some(&body)).await?;
    let ticket = match answer.status {
        202 => answer.body.get("ticket").and_then(Value::as_str),
        201 => answer.body.get("id").and_then(Value::as_str),
        _ => return Err(failure(&answer, &target)),
    }
    .ok_or_else(|| Failure::new(USAGE, "the service answered without a ticket"))?
    .to_owned();
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
        LeaseOutput::Text if answer.status == 201 => print(format!(
            "acquired {target} at once; its ticket collects it: baton run --ticket {ticket}\n"
        )),
        LeaseOutput::Text => print(format!(
            "in line for {target} at place {} of {}, kept until {}: baton run --ticket {ticket}\n",
            answer.body["place"], answer.body["waiting"], answer.body["place_expires_at"]
        )),
    };
    printed.map_err(|_| Failure::new(USAGE, "could not print the ticket"))
}

/// `baton leave NAME TICKET`: gives a ticket up.
///
/// # Errors
/// The call failed (404: no such ticket).
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
        _ => Err(failure(&answer, &target)),
    }
}
