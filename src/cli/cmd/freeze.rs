//! `baton freeze`, `baton unfreeze` and `baton freezes`: making, deleting and
//! listing freezes from a shell (making and deleting take an admin token),
//! and `baton freeze --check`, a deploy job's guard.

use std::time::{Duration, SystemTime};

use clap::Args;
use reqwest::Method;

use crate::cli::answer::freeze_failure as failure;
use crate::cli::duration;
use crate::cli::exit::{Failure, NOT_ACQUIRED, NO_SUCH};
use crate::cli::http::{call, json, Service};
use crate::cli::messages::show;
use crate::cli::options::{Connection, Output};
use crate::domain::{Kind, NamePattern};
use crate::wire::{FreezeBody, FreezeList, FreezeRequest};

/// `baton freeze`
#[derive(Args, Debug, Clone)]
pub struct FreezeArgs {
    #[command(flatten)]
    pub connection: Connection,

    /// A one-off freeze of this long, from now (e.g. 2h, 3d is 72h)
    #[arg(long = "for", value_name = "DURATION", value_parser = duration::parse,
        conflicts_with_all = ["until", "start"])]
    pub for_: Option<Duration>,

    /// A one-off freeze until this time: RFC 3339 (2026-12-27T08:00:00Z), or
    /// a date (2026-12-27: midnight UTC at the start of that day)
    #[arg(long, value_name = "TIME", conflicts_with = "start", value_parser = moment)]
    pub until: Option<String>,

    /// With --until: from this time instead of now (RFC 3339, or a date:
    /// midnight UTC at its start)
    #[arg(long, value_name = "TIME", requires = "until", value_parser = moment)]
    pub from: Option<String>,

    /// A recurring freeze: a five-field cron expression for each start (e.g. '0 23 * * 5')
    #[arg(long, value_name = "CRON", requires = "end")]
    pub start: Option<String>,

    /// A recurring freeze: a five-field cron expression for each end (e.g. '0 7 * * 1')
    #[arg(long, value_name = "CRON", requires = "start")]
    pub end: Option<String>,

    /// The IANA time zone of --start and --end (default UTC)
    #[arg(long, value_name = "ZONE", requires = "start")]
    pub timezone: Option<String>,

    /// Only locks, or only semaphores (default: both)
    #[arg(long, value_parser = ["lock", "semaphore"])]
    pub kind: Option<String>,

    /// Why, shown to everyone it refuses
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,

    /// How to print the freeze
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,

    /// Make no freeze: check whether MATCH, a name, is frozen now (with
    /// --kind, as that kind). Frozen: print the freezes that hold it, exit
    /// 75; not frozen: exit 0. A deploy job's guard, like GitLab's
    /// $CI_DEPLOY_FREEZE (any token that may read the name)
    #[arg(long, conflicts_with_all = ["for_", "until", "from", "start", "end", "timezone", "reason"])]
    pub check: bool,

    /// The name to freeze, or a prefix ending in '*' (quote it: 'deploy-*');
    /// with --check, the name to check
    #[arg(value_name = "MATCH")]
    pub pattern: String,
}

/// A moment of `--until` or `--from`: a date alone (`2026-12-06`) is
/// midnight UTC at its start (`2026-12-06T00:00:00Z`); anything else goes to
/// the service as it is, which reads RFC 3339 and names what it refuses.
fn moment(raw: &str) -> Result<String, String> {
    let raw = raw.trim();
    if raw.len() == 10 && raw.as_bytes().get(4) == Some(&b'-') {
        return chrono::NaiveDate::parse_from_str(raw, "%Y-%m-%d")
            .map(|date| format!("{date}T00:00:00Z"))
            .map_err(|err| format!("not a date YYYY-MM-DD ({err})"));
    }
    Ok(raw.to_owned())
}

/// `baton unfreeze`
#[derive(Args, Debug, Clone)]
pub struct UnfreezeArgs {
    #[command(flatten)]
    pub connection: Connection,

    /// The freeze's id, as `baton freeze` or `baton freezes` printed it
    pub id: String,
}

/// `baton freezes`
#[derive(Args, Debug, Clone)]
pub struct FreezesArgs {
    #[command(flatten)]
    pub connection: Connection,

    /// How to print the list
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
}

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
        crate::cli::messages::say(format!("{what} is not frozen now"));
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
