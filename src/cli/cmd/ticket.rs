//! `baton enqueue` and `baton leave`: a ticket, a place in line that
//! outlives the request (`keep_place_ms`), taken now and waited on later
//! (`baton run --ticket ID`, or `BATON_TICKET`), or given up.

use std::time::Duration;

use clap::Args;
use reqwest::Method;
use serde::Deserialize;

use crate::cli::answer::failure;
use crate::cli::duration;
use crate::cli::exit::{Failure, NO_SUCH, USAGE};
use crate::cli::http::{call, Service};
use crate::cli::line::request::Request;
use crate::cli::messages::{print, say};
use crate::cli::options::{Connection, KindOption, LeaseOptions, LeaseOutput};
use crate::cli::target::Target;
use crate::cli::variables::quote;
use crate::domain::Kind;
use crate::wire::{LeaseBody, TicketBody};

/// `baton enqueue`
#[derive(Args, Debug, Clone)]
pub struct EnqueueArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub lease: LeaseOptions,

    /// How long the ticket keeps its place (the service's maximum bounds it)
    #[arg(long, value_name = "DURATION", default_value = "1d", value_parser = duration::parse)]
    pub keep: Duration,

    /// When the ticket's turn comes while nobody waits on it, the service
    /// POSTs a signed turn notice here (its host must be one of the
    /// service's BATON_WEBHOOK_HOSTS)
    #[arg(long, value_name = "URL")]
    pub notify: Option<String>,

    /// How to print the ticket (env, shell: BATON_TICKET= with BATON_LOCK_NAME,
    /// BATON_KIND and BATON_LIMIT)
    #[arg(long, value_enum, default_value_t)]
    pub output: LeaseOutput,

    /// The lock (or with --limit, the semaphore)
    pub name: String,
}

/// `baton leave`
#[derive(Args, Debug, Clone)]
pub struct LeaveArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub kind: KindOption,

    /// The lock or semaphore
    #[arg(env = "BATON_LOCK_NAME")]
    pub name: String,

    /// The ticket that `baton enqueue` printed
    #[arg(env = "BATON_TICKET", hide_env_values = true)]
    pub ticket: String,
}

/// `baton enqueue NAME`: takes a ticket (or the lease, when the name is free:
/// its id is the ticket, which `baton run --ticket` collects) and prints it.
///
/// # Errors
/// The call failed.
pub async fn enqueue(args: EnqueueArgs) -> Result<(), Failure> {
    let kind = args.lease.kind();
    let target = Target::new(kind, &args.name)?;
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let request = Request {
        notify: args.notify.clone(),
        ..Request::new(&target, args.lease.ttl, &args.lease)
    };
    let body = request.body(Duration::ZERO, Some(args.keep));
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
                "in line for {target} at place {} of {}, kept until {}: baton run --ticket {ticket}\n",
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
