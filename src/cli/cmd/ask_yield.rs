//! `baton yield NAME [--reason TEXT]`: asks the holders of a lock (or with
//! `--limit`, of a semaphore) to finish early; nothing is taken from them.

use clap::Args;
use reqwest::Method;

use crate::cli::answer::failure;
use crate::cli::exit::Failure;
use crate::cli::http::{call, json, Service};
use crate::cli::messages::say;
use crate::cli::options::{kind_of, Connection, KindOption};
use crate::cli::target::Target;
use crate::domain::Kind;
use crate::wire::{YieldAnswer, YieldRequest};

/// `baton yield`
#[derive(Args, Debug, Clone)]
pub struct YieldArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub kind: KindOption,

    /// Why, shown to the holders (at most 200 characters)
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,

    /// Who asks, shown to the holders (default: the CI job's URL in CI,
    /// else user@host)
    #[arg(long, value_name = "TEXT")]
    pub owner: Option<String>,

    /// The lock or semaphore
    pub name: String,
}

/// `baton yield`: says how many holders were asked. Of the lock NAME, or
/// the semaphore NAME with `--limit` (or when the lease variables say so);
/// without either, of the lock, or of the semaphore when nobody holds the
/// lock (a semaphore's yield needs no limit).
///
/// # Errors
/// As every call: the service refused (64, 77) or cannot be reached (69).
pub async fn ask_yield(args: YieldArgs) -> Result<(), Failure> {
    let said = kind_of(&args.kind, &args.name)?;
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let owner = crate::cli::owner::clean(&args.owner.clone().unwrap_or_else(|| {
        crate::cli::owner::default_owner(|k| std::env::var(k).ok(), crate::cli::owner::host_name)
    }));
    let body = json(&YieldRequest {
        owner: Some(owner).filter(|o| !o.is_empty()),
        reason: args.reason.clone(),
    });
    let ask = |kind| {
        let (service, name, body) = (&service, &args.name, &body);
        async move {
            let target = Target::new(kind, name)?;
            let path = format!("{}/yield", target.path());
            let answer = call(service, Method::POST, &path, Some(body)).await?;
            if answer.status != 202 {
                return Err(failure(&answer, &target));
            }
            let asked: YieldAnswer = answer.read("answer")?;
            Ok((
                target,
                if asked.already_asked {
                    None
                } else {
                    Some(asked.holders)
                },
            ))
        }
    };
    let (target, holders) = match said {
        Some(kind) => ask(kind).await?,
        None => match ask(Kind::Lock).await? {
            (_, Some(0)) => match ask(Kind::Semaphore).await? {
                (_, Some(0)) => {
                    say(format!(
                        "nobody holds the lock or the semaphore '{}': nobody was asked",
                        args.name
                    ));
                    return Ok(());
                }
                asked => asked,
            },
            asked => asked,
        },
    };
    let Some(holders) = holders else {
        say(format!(
            "you asked the holders of {target} less than 10 s ago: they were not asked again"
        ));
        return Ok(());
    };
    match holders {
        0 => say(format!("nobody holds {target}: nobody was asked")),
        1 => say(format!("asked the holder of {target} to yield")),
        n => say(format!("asked the {n} holders of {target} to yield")),
    }
    Ok(())
}
