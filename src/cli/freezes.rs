//! `baton freeze`, `baton unfreeze` and `baton freezes`: making, deleting and
//! listing freezes from a shell (making and deleting take an admin token);
//! and what `baton run` says of a freeze while it waits.

use std::time::{Duration, SystemTime};

use reqwest::Method;

use super::answer::freeze_failure as failure;
use super::args::{FreezeArgs, FreezesArgs, Output, UnfreezeArgs};
use super::exit::{Failure, NOT_ACQUIRED, NO_SUCH};
use super::http::{call, json, Service};
use super::messages::show;
use super::target::Target;
use crate::domain::{Kind, NamePattern};
use crate::wire::{FreezeBody, FreezeList, FreezeRequest};

/// `baton freeze`: makes the freeze and prints it.
///
/// # Errors
/// Bad usage or a 400 (64), refused (77), the service unreachable (69);
/// with `--check`, the name is frozen now (75).
pub async fn freeze(args: FreezeArgs) -> Result<(), Failure> {
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    if args.check {
        return check(&service, &args).await;
    }
    let until = match (args.for_, &args.until, &args.start) {
        (Some(length), _, _) => {
            Some(humantime::format_rfc3339_millis(SystemTime::now() + length).to_string())
        }
        (None, Some(until), _) => Some(until.clone()),
        (None, None, Some(_)) => None,
        (None, None, None) => {
            return Err(Failure::usage(
                "say how long: --for DURATION, --until TIME, or --start CRON --end CRON",
            ))
        }
    };
    let request = FreezeRequest {
        pattern: Some(args.pattern.clone()),
        kind: match args.kind.as_deref() {
            Some("semaphore") => Some(Kind::Semaphore),
            Some(_) => Some(Kind::Lock),
            None => None,
        },
        reason: args.reason.clone(),
        from: args.from.clone(),
        until,
        freeze_start: args.start.clone(),
        freeze_end: args.end.clone(),
        cron_timezone: args.timezone.clone(),
    };
    let answer = call(&service, Method::POST, "/freezes", Some(&json(&request))).await?;
    if answer.status != 201 {
        return Err(failure(&answer));
    }
    match args.output {
        Output::Json => show(format!("{}\n", answer.body)),
        Output::Text => {
            let freeze: FreezeBody = answer.read("freeze")?;
            show(format!("froze {}\n", describe(&freeze)))
        }
    }
}

/// `baton unfreeze`: deletes the freeze.
///
/// # Errors
/// Bad usage (64), no such freeze (66), refused (77), the service
/// unreachable (69).
pub async fn unfreeze(args: UnfreezeArgs) -> Result<(), Failure> {
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let id = crate::domain::FreezeId::parse(&args.id).map_err(|_| {
        Failure::usage("ID must be a freeze id (a UUID), as `baton freezes` prints it")
    })?;
    let answer = call(&service, Method::DELETE, &format!("/freezes/{id}"), None).await?;
    match answer.status {
        204 => show(format!("deleted freeze {id}\n")),
        404 => Err(Failure::new(NO_SUCH, format!("no freeze {id}"))),
        _ => Err(failure(&answer)),
    }
}

/// `baton freeze --check NAME`: prints the freezes that hold NAME now (of
/// the `--kind` given, else of either kind) and fails with 75, or says it is
/// not frozen and succeeds: a deploy job's guard, as GitLab's
/// `$CI_DEPLOY_FREEZE` is.
///
/// # Errors
/// Frozen (75), NAME invalid (64), refused (77), the service unreachable (69).
async fn check(service: &Service, args: &FreezeArgs) -> Result<(), Failure> {
    let name = crate::domain::Name::parse(&args.pattern)
        .map_err(|err| Failure::usage(format!("NAME {err}")))?;
    let kind = match args.kind.as_deref() {
        Some("semaphore") => Some(Kind::Semaphore),
        Some(_) => Some(Kind::Lock),
        None => None,
    };
    let answer = call(service, Method::GET, "/freezes", None).await?;
    if answer.status != 200 {
        return Err(failure(&answer));
    }
    let list: FreezeList = answer.read("freeze")?;
    let holding: Vec<&FreezeBody> = list
        .freezes
        .iter()
        .filter(|f| f.active && (f.kind.is_none() || kind.is_none() || f.kind == kind))
        .filter(|f| NamePattern::parse(&f.pattern).is_ok_and(|p| p.matches(name.as_str())))
        .collect();
    let what = match kind {
        Some(kind) => format!("{kind} '{name}'"),
        None => format!("'{name}'"),
    };
    if holding.is_empty() {
        super::messages::say(format!("{what} is not frozen now"));
        return match args.output {
            Output::Json => show("{\"freezes\":[]}\n"),
            Output::Text => Ok(()),
        };
    }
    match args.output {
        Output::Json => show(format!("{}\n", serde_json::json!({ "freezes": holding }))),
        Output::Text => show(
            holding
                .iter()
                .map(|f| format!("{}\n", describe(f)))
                .collect::<String>(),
        ),
    }?;
    Err(Failure::new(NOT_ACQUIRED, format!("{what} is frozen now")))
}

/// `baton freezes`: every freeze, one a line.
///
/// # Errors
/// Refused (77), the service unreachable (69).
pub async fn list(args: FreezesArgs) -> Result<(), Failure> {
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let answer = call(&service, Method::GET, "/freezes", None).await?;
    if answer.status != 200 {
        return Err(failure(&answer));
    }
    match args.output {
        Output::Json => show(format!("{}\n", answer.body)),
        Output::Text => {
            let list: FreezeList = answer.read("freeze")?;
            if list.freezes.is_empty() {
                return show("no freezes\n");
            }
            let lines: String = list
                .freezes
                .iter()
                .map(|f| format!("{}\n", describe(f)))
                .collect();
            show(lines)
        }
    }
}

/// What holds `target` now among the freezes the service lists, for people:
/// `frozen until TIME (reason)`; `None` when none does (or the list cannot be
/// read: a `baton run` waits on all the same).
pub async fn frozen_now(service: &Service, target: &Target) -> Option<String> {
    let answer = service
        .call(Method::GET, "/freezes", None, Duration::from_secs(5))
        .await
        .ok()?;
    let list: FreezeList = answer.read("freeze").ok()?;
    let name = target.name.to_string();
    list.freezes
        .iter()
        .filter(|f| f.active && f.kind.is_none_or(|k| k == target.kind))
        .filter(|f| NamePattern::parse(&f.pattern).is_ok_and(|p| p.matches(&name)))
        .filter_map(|f| f.ends_at.as_ref().map(|until| (until, &f.reason)))
        .max_by(|a, b| a.0.cmp(b.0))
        .map(|(until, reason)| match reason {
            Some(reason) => format!("frozen until {until} ({reason})"),
            None => format!("frozen until {until}"),
        })
}

/// One freeze, for people.
fn describe(freeze: &FreezeBody) -> String {
    let kind = freeze
        .kind
        .map(|k| format!(" ({}s only)", k.as_str()))
        .unwrap_or_default();
    let window = match (&freeze.until, &freeze.freeze_start, &freeze.freeze_end) {
        (Some(until), _, _) => format!(
            "from {} until {until}",
            freeze.from.as_deref().unwrap_or("now")
        ),
        (None, Some(start), Some(end)) => format!(
            "from '{start}' to '{end}' ({})",
            freeze.cron_timezone.as_deref().unwrap_or("UTC")
        ),
        _ => String::new(),
    };
    let state = match (&freeze.ends_at, &freeze.next_start) {
        (Some(ends), _) if freeze.active => format!("; active until {ends}"),
        (_, Some(next)) => format!("; next from {next}"),
        _ => String::new(),
    };
    let reason = freeze
        .reason
        .as_ref()
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    format!(
        "{} {}{kind} {window}{state}{reason}",
        freeze.id, freeze.pattern
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freeze_reads_for_people() {
        let freeze: FreezeBody = serde_json::from_value(serde_json::json!({
            "id": "3b2c0f6e-4f7c-4f43-9a51-7d0c2e1b9a10", "match": "deploy-*",
            "freeze_start": "0 23 * * 5", "freeze_end": "0 7 * * 1",
            "cron_timezone": "Europe/Berlin", "active": true,
            "ends_at": "2026-11-30T06:00:00.000Z", "created_at": "2026-11-20T10:00:00.000Z",
            "reason": "weekend"
        }))
        .unwrap();
        assert_eq!(
            describe(&freeze),
            "3b2c0f6e-4f7c-4f43-9a51-7d0c2e1b9a10 deploy-* from '0 23 * * 5' to '0 7 * * 1' \
             (Europe/Berlin); active until 2026-11-30T06:00:00.000Z: weekend"
        );
    }
}
