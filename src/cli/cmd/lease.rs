//! `baton refresh` and `baton release`: one call each on a lease that
//! `baton acquire` printed (retried while a failure may pass).

use std::time::Duration;

use clap::Args;
use reqwest::Method;

use crate::cli::answer::{failure, unreadable};
use crate::cli::duration::{self, millis};
use crate::cli::exit::Failure;
use crate::cli::http::{call, json, Service};
use crate::cli::messages::{say, show};
use crate::cli::options::{kind_of, Connection, KindOption, Output};
use crate::cli::target::Target;
use crate::domain::Kind;
use crate::wire::{LeaseBody, Refresh};

/// `baton refresh`
#[derive(Args, Debug, Clone)]
pub struct RefreshArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub kind: KindOption,

    /// The new time to live (default: the lease's own)
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub ttl: Option<Duration>,

    /// How to print the lease
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,

    /// The lock or semaphore
    #[arg(env = "BATON_LOCK_NAME")]
    pub name: String,

    /// The lease id that `baton acquire` printed
    #[arg(env = "BATON_LEASE_ID", hide_env_values = true)]
    pub id: String,
}

/// `baton release`
#[derive(Args, Debug, Clone)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub kind: KindOption,

    /// Print only warnings and errors
    #[arg(short, long)]
    pub quiet: bool,

    /// The lock or semaphore
    #[arg(env = "BATON_LOCK_NAME")]
    pub name: String,

    /// The lease id that `baton acquire` printed
    #[arg(env = "BATON_LEASE_ID", hide_env_values = true)]
    pub id: String,
}

/// `baton refresh`
///
/// # Errors
/// The lease is gone (76), or the call failed.
pub async fn refresh(args: RefreshArgs) -> Result<(), Failure> {
    let kind = kind_of(&args.kind, &args.name)?.unwrap_or(Kind::Lock);
    let target = Target::new(kind, &args.name)?;
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let body = args.ttl.map(|ttl| {
        json(&Refresh {
            ttl_ms: Some(millis(ttl)),
        })
    });
    let answer = call(
        &service,
        Method::PATCH,
        &lease_path(&target, &args.id)?,
        body.as_ref(),
    )
    .await?;
    match answer.status {
        200 => match args.output {
            Output::Json => show(format!("{}\n", answer.body)),
            Output::Text => {
                let lease = LeaseBody::from_json(kind, &answer.body)
                    .map_err(|err| unreadable("lease", &err))?;
                show(format!(
                    "refreshed {target}: expires at {}\n",
                    lease.expires_at()
                ))
            }
        },
        _ => Err(failure(&answer, &target)),
    }
}

/// `baton release`
///
/// # Errors
/// The lease is gone (76), or the call failed.
pub async fn release(args: ReleaseArgs) -> Result<(), Failure> {
    crate::cli::messages::set_quiet(args.quiet);
    let kind = kind_of(&args.kind, &args.name)?.unwrap_or(Kind::Lock);
    let target = Target::new(kind, &args.name)?;
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let answer = call(
        &service,
        Method::DELETE,
        &lease_path(&target, &args.id)?,
        None,
    )
    .await?;
    match answer.status {
        204 => {
            say(format!("released {target}"));
            Ok(())
        }
        _ => Err(failure(&answer, &target)),
    }
}

fn lease_path(target: &Target, id: &str) -> Result<String, Failure> {
    crate::domain::LeaseId::parse(id).map_err(|_| {
        Failure::usage("ID must be the lease id that `baton acquire` printed (a UUID)")
    })?;
    Ok(target.lease_path(id))
}
