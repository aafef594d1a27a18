//! `baton acquire`, `refresh`, `release`, `status` and `list`: one call each
//! (retried while a failure may pass), for jobs that take a lock in one step
//! and release it in a later one: the lease goes from step to step in the
//! variables of [`super::variables`], a semaphore's as a lock's.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::answer::{failure, unreadable};
use super::args::{
    AcquireArgs, KindOption, LeaseOutput, ListArgs, Output, RefreshArgs, ReleaseArgs, StatusArgs,
};
use super::duration::{human, millis};
use super::exit::{signal_status, Failure, UNAVAILABLE};
use super::http::{call, json, Service};
use super::line;
use super::messages::{print, say, show, NotPrinted};
use super::request::Request;
use super::signals::Signals;
use super::target::Target;
use super::variables::LeaseVariables;
use crate::domain::Kind;
use crate::wire::{LeaseBody, Listing, Mode, Refresh, StatusBody};

/// What a call on `name` is about: the semaphore with `--limit`; else the
/// kind that the variables of a lease give for that very name (`baton
/// acquire --output env` of a semaphore, a `baton run` around this); else
/// `None`: the lock, unless said otherwise.
///
/// # Errors
/// Unreadable lease variables (64).
pub(super) fn kind_of(option: &KindOption, name: &str) -> Result<Option<Kind>, Failure> {
    if let Some(kind) = option.kind() {
        return Ok(Some(kind));
    }
    Ok(LeaseVariables::from_env(name)?.map(|lease| lease.kind))
}

/// `baton acquire`: prints the lease.
///
/// # Errors
/// As `baton run` before COMMAND; the lease could not be printed (it is
/// released then: nobody has its id).
pub async fn acquire(args: AcquireArgs) -> Result<(), Failure> {
    let options = &args.lease;
    let kind = options.kind();
    let target = Target::new(kind, &args.name)?;
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let request = Request::new(&target, options.ttl, options);
    let mut signals = Signals::catch()
        .map_err(|err| Failure::new(UNAVAILABLE, format!("cannot catch signals: {err}")))?;
    let lease = line::acquire(&service, &request, &mut signals).await?;
    let token = lease.body.fencing_token();
    let variables = LeaseVariables {
        name: target.name.to_string(),
        id: lease.body.id().to_owned(),
        fencing_token: Some(token),
        kind,
        limit: options.limit,
    };
    let printed = match args.output {
        LeaseOutput::Json => print(format!("{}\n", lease.json)),
        LeaseOutput::Env => print(variables.env_lines()),
        LeaseOutput::Shell => print(variables.shell_lines()),
        LeaseOutput::Text => print(format!(
            "acquired {target}: lease {}, fencing token {token}, expires at {}\n",
            lease.body.id(),
            lease.body.expires_at()
        )),
    };
    if let Err(not_printed) = printed {
        // Nobody got the lease id, so nobody could release it: do it now.
        let path = target.lease_path(lease.body.id());
        let released = matches!(
            call(&service, Method::DELETE, &path, None).await,
            Ok(answer) if answer.status == 204
        );
        let what = if released {
            "released it"
        } else {
            "it frees itself when its ttl runs out"
        };
        return Err(match not_printed {
            NotPrinted::Closed => Failure::new(
                signal_status(libc::SIGPIPE),
                format!("acquired {target}, but nobody read the lease (a closed pipe): {what}"),
            ),
            NotPrinted::Failed(err) => Failure::new(
                super::exit::IO_ERROR,
                format!("acquired {target}, but cannot write the lease ({err}): {what}"),
            ),
        });
    }
    say(format!(
        "acquired {target} (fencing token {token}); it expires unless refreshed within {}",
        human(options.ttl)
    ));
    Ok(())
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
    super::messages::set_quiet(args.quiet);
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

/// `baton status`: of the lock NAME, or the semaphore NAME with `--limit` or
/// when the lease variables say so; without either, of the semaphore when
/// the lock is not in use and the semaphore is.
///
/// # Errors
/// The call failed.
pub async fn status(args: StatusArgs) -> Result<(), Failure> {
    let said = kind_of(&args.kind, &args.name)?;
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let get = |kind| {
        let service = &service;
        let name = &args.name;
        async move {
            let target = Target::new(kind, name)?;
            let answer = call(service, Method::GET, &target.path(), None).await?;
            if answer.status != 200 {
                return Err(failure(&answer, &target));
            }
            let status = StatusBody::from_json(kind, &answer.body)
                .map_err(|err| unreadable("status", &err))?;
            Ok((status, answer.body))
        }
    };
    let (status, body) = match said {
        Some(kind) => get(kind).await?,
        None => {
            let lock = get(Kind::Lock).await?;
            if in_use(&lock.0) {
                lock
            } else {
                let semaphore = get(Kind::Semaphore).await?;
                if in_use(&semaphore.0) {
                    semaphore
                } else {
                    lock
                }
            }
        }
    };
    match args.output {
        Output::Json => show(format!("{body}\n")),
        Output::Text => show(describe_status(&status, true)),
    }
}

/// Whether anyone holds `status`'s lock or semaphore, or waits for it.
fn in_use(status: &StatusBody) -> bool {
    let holders = match status {
        StatusBody::Lock(lock) => {
            if lock.held {
                return true;
            }
            lock.holders.unwrap_or(0)
        }
        StatusBody::Semaphore(semaphore) => semaphore.holders,
    };
    holders > 0 || status.waiting() > 0
}

/// `baton list`: every page.
///
/// # Errors
/// The call failed.
pub async fn list(args: ListArgs) -> Result<(), Failure> {
    let kind = args.kind.kind().unwrap_or(Kind::Lock);
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let encode = |s: &str| {
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    // As the service wrote them: `--output json` prints them so.
    let mut entries: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!(
            "/{}?limit=1000&prefix={}",
            kind.plural(),
            encode(&args.prefix)
        );
        if let Some(cursor) = &cursor {
            path.push_str(&format!("&cursor={}", encode(cursor)));
        }
        let answer = call(&service, Method::GET, &path, None).await?;
        if answer.status != 200 {
            let target = Target::new(kind, "list").expect("a valid name");
            return Err(failure(&answer, &target));
        }
        let page =
            Listing::from_json(kind, &answer.body).map_err(|err| unreadable("listing", &err))?;
        entries.extend(page.entries);
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    let all = Listing {
        kind,
        entries,
        next_cursor: None,
    };
    match args.output {
        Output::Json => show(format!("{}\n", json(&all))),
        Output::Text => {
            let mut text = String::new();
            for entry in &all.entries {
                let status = StatusBody::from_json(kind, entry)
                    .map_err(|err| unreadable("listing", &err))?;
                text.push_str(&describe_status(&status, false));
            }
            show(text)
        }
    }
}

fn lease_path(target: &Target, id: &str) -> Result<String, Failure> {
    crate::domain::LeaseId::parse(id).map_err(|_| {
        Failure::usage("ID must be the lease id that `baton acquire` printed (a UUID)")
    })?;
    Ok(target.lease_path(id))
}

/// A status for people: one line, and with `detail` the holders and the line.
fn describe_status(status: &StatusBody, detail: bool) -> String {
    let expires = |ms: Option<u64>| {
        ms.map(|ms| format!(", expires in {}", human(Duration::from_millis(ms))))
            .unwrap_or_default()
    };
    let owner = |owner: &Option<String>| owner.clone().unwrap_or_else(|| "-".into());
    // What a lease or a waiter takes, when it is not the kind's plain one.
    let shared = |shared: bool| String::from(if shared { ", shared" } else { "" });
    let permits = |permits: Option<u64>| match permits {
        Some(p) if p != 1 => format!(", {p} permits"),
        _ => String::new(),
    };
    let (name, waiting) = (status.name(), status.waiting());
    let mut out = match status {
        StatusBody::Lock(lock) if lock.held && lock.mode == Some(Mode::Shared) => format!(
            "lock '{name}': held shared by {}; {waiting} waiting\n",
            lock.holders.unwrap_or(0)
        ),
        StatusBody::Lock(lock) if lock.held => format!(
            "lock '{name}': held by {} (fencing token {}{}); {waiting} waiting\n",
            lock.owner
                .clone()
                .unwrap_or_else(|| "someone without an owner label".into()),
            lock.fencing_token
                .map_or_else(|| "?".into(), |t| t.to_string()),
            expires(lock.expires_in_ms)
        ),
        StatusBody::Lock(_) => format!("lock '{name}': free; {waiting} waiting\n"),
        StatusBody::Semaphore(semaphore) => {
            let holders = semaphore.holders;
            format!(
                "semaphore '{name}': {} of {} permits used by {holders} {}; {waiting} waiting\n",
                semaphore.used.unwrap_or(holders),
                semaphore
                    .limit
                    .map_or_else(|| "?".into(), |l| l.to_string()),
                if holders == 1 { "lease" } else { "leases" }
            )
        }
    };
    if let Some(frozen) = status.frozen() {
        // `lock 'x': free; 3 waiting; frozen until T (reason)`.
        out.pop();
        out.push_str(&format!("; frozen until {}", frozen.until));
        if let Some(reason) = &frozen.reason {
            out.push_str(&format!(" ({reason})"));
        }
        out.push('\n');
    }
    if !detail {
        return out;
    }
    let held_by = |owner: String, token: u64, takes: String, expires: String| {
        format!("  held by {owner} (fencing token {token}{takes}{expires})\n")
    };
    match status {
        // An exclusive lock's one lease is the line above already.
        StatusBody::Lock(lock) if lock.mode == Some(Mode::Shared) => {
            for lease in lock.leases.iter().flatten() {
                out.push_str(&held_by(
                    owner(&lease.owner),
                    lease.fencing_token,
                    shared(lease.shared),
                    expires(Some(lease.expires_in_ms)),
                ));
            }
        }
        StatusBody::Lock(_) => {}
        StatusBody::Semaphore(semaphore) => {
            for lease in &semaphore.leases {
                out.push_str(&held_by(
                    owner(&lease.owner),
                    lease.fencing_token,
                    permits(Some(lease.permits)),
                    expires(Some(lease.expires_in_ms)),
                ));
            }
        }
    }
    for waiter in status.waiters() {
        let takes = match status.kind() {
            Kind::Lock => shared(waiter.shared == Some(true)),
            Kind::Semaphore => permits(waiter.permits),
        };
        out.push_str(&format!(
            "  {}. {} (waited {}{takes})\n",
            waiter.position,
            owner(&waiter.owner),
            human(Duration::from_millis(waiter.waited_ms)),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `describe_status` of the status `json` of a `kind`.
    fn describe(kind: Kind, json: &Value, detail: bool) -> String {
        describe_status(&StatusBody::from_json(kind, json).unwrap(), detail)
    }

    #[test]
    fn statuses_read_as_sentences() {
        let held = json!({"name": "deploy", "held": true, "owner": "ci-7", "fencing_token": 12,
            "expires_in_ms": 42_000, "waiting": 1,
            "waiters": [{"position": 1, "owner": "ci-8", "waited_ms": 3_000}]});
        assert_eq!(
            describe(Kind::Lock, &held, true),
            "lock 'deploy': held by ci-7 (fencing token 12, expires in 42s); 1 waiting\n  1. ci-8 (waited 3.0s)\n"
        );
        let free = json!({"name": "x", "held": false, "waiting": 0, "waiters": []});
        assert_eq!(
            describe(Kind::Lock, &free, true),
            "lock 'x': free; 0 waiting\n"
        );
        let shared = json!({"name": "docs", "held": true, "mode": "shared", "holders": 2,
            "leases": [
                {"owner": "r1", "fencing_token": 3, "expires_in_ms": 9_000, "shared": true},
                {"owner": "r2", "fencing_token": 4, "expires_in_ms": 20_000, "shared": true}],
            "waiting": 2, "waiters": [
                {"position": 1, "owner": "w", "waited_ms": 1_000},
                {"position": 2, "owner": "r3", "waited_ms": 500, "shared": true}]});
        assert_eq!(
            describe(Kind::Lock, &shared, true),
            "lock 'docs': held shared by 2; 2 waiting\n  \
             held by r1 (fencing token 3, shared, expires in 9.0s)\n  \
             held by r2 (fencing token 4, shared, expires in 20s)\n  \
             1. w (waited 1.0s)\n  2. r3 (waited 0.5s, shared)\n"
        );
        let sem = json!({"name": "pool", "holders": 2, "used": 4, "limit": 5,
            "leases": [
                {"owner": "a", "fencing_token": 7, "expires_in_ms": 9_000, "permits": 3},
                {"owner": "b", "fencing_token": 8, "expires_in_ms": 9_000, "permits": 1}],
            "waiting": 1, "waiters": [{"position": 1, "owner": "c", "waited_ms": 100, "permits": 2}]});
        assert_eq!(
            describe(Kind::Semaphore, &sem, true),
            "semaphore 'pool': 4 of 5 permits used by 2 leases; 1 waiting\n  \
             held by a (fencing token 7, 3 permits, expires in 9.0s)\n  \
             held by b (fencing token 8, expires in 9.0s)\n  \
             1. c (waited 0.1s, 2 permits)\n"
        );
    }
}
