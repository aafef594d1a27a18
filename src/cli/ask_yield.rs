//! `baton yield NAME [--reason TEXT]`: asks the holders of a lock (or with
//! `--limit`, of a semaphore) to finish early; nothing is taken from them.

use reqwest::Method;

use super::args::YieldArgs;
use super::calls::{failure, kind_of};
use super::exit::Failure;
use super::http::call;
use super::http::{json, unreadable, Service, Target};
use super::messages::say;
use crate::domain::Kind;
use crate::wire::{YieldAnswer, YieldRequest};

/// `baton yield`: says how many holders were asked.
///
/// # Errors
/// As every call: the service refused (64, 77) or cannot be reached (69).
pub async fn ask_yield(args: YieldArgs) -> Result<(), Failure> {
    let kind = kind_of(&args.kind, &args.name)?.unwrap_or(Kind::Lock);
    let target = Target::new(kind, &args.name)?;
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let owner = super::owner::clean(&args.owner.clone().unwrap_or_else(|| {
        super::owner::default_owner(|k| std::env::var(k).ok(), super::owner::host_name)
    }));
    let body = json(&YieldRequest {
        owner: Some(owner).filter(|o| !o.is_empty()),
        reason: args.reason.clone(),
    });
    let path = format!("{}/yield", target.path());
    let answer = call(&service, Method::POST, &path, Some(&body)).await?;
    if answer.status != 202 {
        return Err(failure(&answer, &target));
    }
    let asked: YieldAnswer =
        serde_json::from_value(answer.body).map_err(|err| unreadable("answer", &err))?;
    if asked.already_asked {
        say(format!(
            "you asked the holders of {target} less than 10 s ago: they were not asked again"
        ));
        return Ok(());
    }
    match asked.holders {
        0 => say(format!("nobody holds {target}: nobody was asked")),
        1 => say(format!("asked the holder of {target} to yield")),
        n => say(format!("asked the {n} holders of {target} to yield")),
    }
    Ok(())
}
