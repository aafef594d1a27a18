//! `baton acquire`, `refresh`, `release`, `status` and `list`: one call each
//! (retried while a failure may pass), for jobs that take a lock in one step
//! and release it in a later one: the lease goes from step to step in the
//! variables of [`super::variables`], a semaphore's as a lock's.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use super::args::{
    AcquireArgs, KindOption, LeaseOutput, ListArgs, Output, RefreshArgs, ReleaseArgs, StatusArgs,
};
use super::duration::{human, millis};
use super::exit::{
    signal_status, Failure, LOST, NOT_ACQUIRED, REFUSED, SUPERSEDED, UNAVAILABLE, USAGE,
};
use super::http::{Answer, Service, Target};
use super::line::{self, Request};
use super::messages::{print, say, show, NotPrinted};
use super::signals::Signals;
use super::variables::LeaseVariables;
use crate::domain::Kind;

/// How long one call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// What a call on `name` is about: the semaphore with `--limit`; else the
/// kind that the variables of a lease give for that very name (`baton
/// acquire --output env` of a semaphore, a `baton run` around this); else
/// `None`: the lock, unless said otherwise.
///
/// # Errors
/// Unreadable lease variables (64).
fn kind_of(option: &KindOption, name: &str) -> Result<Option<Kind>, Failure> {
    if option.limit.is_some() {
        return Ok(Some(Kind::Semaphore));
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
    let kind = if options.limit.is_some() {
        Kind::Semaphore
    } else {
        Kind::Lock
    };
    let target = Target::new(kind, &args.name)?;
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let request = Request::new(&target, options.ttl, options);
    let mut signals = Signals::catch()
        .map_err(|err| Failure::new(UNAVAILABLE, format!("cannot catch signals: {err}")))?;
    let lease = line::acquire(&service, &request, &mut signals).await?;
    let token = lease
        .fencing_token
        .map_or_else(|| "?".to_owned(), |t| t.to_string());
    let variables = LeaseVariables {
        name: target.name.to_string(),
        id: lease.id.clone(),
        fencing_token: lease.fencing_token,
        kind,
        limit: options.limit,
    };
    let printed = match args.output {
        LeaseOutput::Json => print(format!("{}\n", lease.body)),
        LeaseOutput::Env => print(variables.env_lines()),
        LeaseOutput::Shell => print(variables.shell_lines()),
        LeaseOutput::Text => print(format!(
            "acquired {target}: lease {}, fencing token {token}, expires at {}\n",
            lease.id,
            lease
                .body
                .get("expires_at")
                .and_then(Value::as_str)
                .unwrap_or("?")
        )),
    };
    if let Err(not_printed) = printed {
        // Nobody got the lease id, so nobody could release it: do it now.
        let path = target.lease_path(&lease.id);
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
    let body = args.ttl.map(|ttl| json!({"ttl_ms": millis(ttl)}));
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
            Output::Text => show(format!(
                "refreshed {target}: expires at {}\n",
                answer.str("expires_at").unwrap_or("?")
            )),
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
            if answer.status == 200 {
                Ok((target, answer.body))
            } else {
                Err(failure(&answer, &target))
            }
        }
    };
    let (target, body) = match said {
        Some(kind) => get(kind).await?,
        None => {
            let in_use = |status: &Value| {
                let count = |key| status.get(key).and_then(Value::as_u64).unwrap_or(0);
                status.get("held") == Some(&Value::Bool(true))
                    || count("holders") > 0
                    || count("waiting") > 0
            };
            let lock = get(Kind::Lock).await?;
            if in_use(&lock.1) {
                lock
            } else {
                let semaphore = get(Kind::Semaphore).await?;
                if in_use(&semaphore.1) {
                    semaphore
                } else {
                    lock
                }
            }
        }
    };
    match args.output {
        Output::Json => show(format!("{body}\n")),
        Output::Text => show(describe_status(target.kind, &body, true)),
    }
}

/// `baton list`: every page.
///
/// # Errors
/// The call failed.
pub async fn list(args: ListArgs) -> Result<(), Failure> {
    let kind = if args.kind.limit.is_some() {
        Kind::Semaphore
    } else {
        Kind::Lock
    };
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let key = kind.plural();
    let encode = |s: &str| {
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
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
        entries.extend(
            answer
                .body
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .cloned(),
        );
        cursor = answer.str("next_cursor").map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    match args.output {
        Output::Json => show(format!("{}\n", json!({ key: entries }))),
        Output::Text => show(
            entries
                .iter()
                .map(|entry| describe_status(kind, entry, false))
                .collect::<String>(),
        ),
    }
}

fn lease_path(target: &Target, id: &str) -> Result<String, Failure> {
    crate::domain::LeaseId::parse(id).map_err(|_| {
        Failure::usage("ID must be the lease id that `baton acquire` printed (a UUID)")
    })?;
    Ok(target.lease_path(id))
}

/// One call, tried three times while a failure may pass (not when nothing
/// serves at `--url`).
pub(super) async fn call(
    service: &Service,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Result<Answer, Failure> {
    let mut why = String::new();
    for attempt in 1..=3 {
        match service.call(method.clone(), path, body, CALL_TIMEOUT).await {
            Ok(answer) if answer.status != 429 && answer.status < 500 => return Ok(answer),
            Ok(answer) => why = answer.describe(),
            // Nothing serves at --url: trying again will not change that.
            Err(no_answer) if service.is_not_there(&no_answer) => {
                return Err(Failure::new(
                    UNAVAILABLE,
                    format!("{no_answer} (check --url or BATON_URL)"),
                ));
            }
            Err(no_answer) => why = no_answer.why,
        }
        if attempt < 3 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    Err(Failure::new(UNAVAILABLE, why))
}

/// What an answer that is not a success means, as an exit status.
fn failure(answer: &Answer, target: &Target) -> Failure {
    let described = answer.describe();
    match (answer.status, answer.slug()) {
        (400 | 422, _) => Failure::new(
            USAGE,
            format!("the service rejected the request: {described}"),
        ),
        (401 | 403, _) => Failure::new(
            REFUSED,
            format!("the service refused the request: {described} (check --token or BATON_TOKEN)"),
        ),
        (404, Some("lease-not-found")) => Failure::new(
            LOST,
            format!("{target} is no longer held by this lease (expired or force-released)"),
        ),
        (409, Some("superseded")) => Failure::new(SUPERSEDED, format!("superseded: {described}")),
        (409, _) => Failure::new(NOT_ACQUIRED, format!("{target} is taken: {described}")),
        _ => Failure::new(
            UNAVAILABLE,
            format!("unexpected answer: {described} (check --url or BATON_URL)"),
        ),
    }
}

/// A status for people: one line, and with `detail` the holders and the line.
fn describe_status(kind: Kind, status: &Value, detail: bool) -> String {
    let str = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let num = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64);
    let expires = |v: &Value| {
        num(v, "expires_in_ms")
            .map(|ms| format!(", expires in {}", human(Duration::from_millis(ms))))
            .unwrap_or_default()
    };
    // What a lease or a waiter takes, when it is not the kind's plain one.
    let takes = |v: &Value| match kind {
        Kind::Lock if v.get("shared") == Some(&Value::Bool(true)) => ", shared".to_owned(),
        Kind::Lock => String::new(),
        Kind::Semaphore => match num(v, "permits") {
            Some(p) if p != 1 => format!(", {p} permits"),
            _ => String::new(),
        },
    };
    let name = str(status, "name").unwrap_or_default();
    let waiting = num(status, "waiting").unwrap_or(0);
    let held = status.get("held") == Some(&Value::Bool(true));
    let mut out = match kind {
        Kind::Lock if held && str(status, "mode").as_deref() == Some("shared") => format!(
            "lock '{name}': held shared by {}; {waiting} waiting\n",
            num(status, "holders").unwrap_or(0)
        ),
        Kind::Lock if held => format!(
            "lock '{name}': held by {} (fencing token {}{}); {waiting} waiting\n",
            str(status, "owner").unwrap_or_else(|| "someone without an owner label".into()),
            num(status, "fencing_token").map_or_else(|| "?".into(), |t| t.to_string()),
            expires(status)
        ),
        Kind::Lock => format!("lock '{name}': free; {waiting} waiting\n"),
        Kind::Semaphore => {
            let holders = num(status, "holders").unwrap_or(0);
            format!(
                "semaphore '{name}': {} of {} permits used by {holders} {}; {waiting} waiting\n",
                num(status, "used").unwrap_or(holders),
                num(status, "limit").map_or_else(|| "?".into(), |l| l.to_string()),
                if holders == 1 { "lease" } else { "leases" }
            )
        }
    };
    // An exclusive lock's one lease is the line above already.
    let leases_shown = kind == Kind::Semaphore || str(status, "mode").as_deref() == Some("shared");
    if detail {
        for lease in status
            .get("leases")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|_| leases_shown)
        {
            out.push_str(&format!(
                "  held by {} (fencing token {}{}{})\n",
                str(lease, "owner").unwrap_or_else(|| "-".into()),
                num(lease, "fencing_token").map_or_else(|| "?".into(), |t| t.to_string()),
                takes(lease),
                expires(lease)
            ));
        }
        for waiter in status
            .get("waiters")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.push_str(&format!(
                "  {}. {} (waited {}{})\n",
                num(waiter, "position").unwrap_or(0),
                str(waiter, "owner").unwrap_or_else(|| "-".into()),
                human(Duration::from_millis(num(waiter, "waited_ms").unwrap_or(0))),
                takes(waiter)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_as_sentences() {
        let held = json!({"name": "deploy", "held": true, "owner": "ci-7", "fencing_token": 12,
            "expires_in_ms": 42_000, "waiting": 1,
            "waiters": [{"position": 1, "owner": "ci-8", "waited_ms": 3_000}]});
        assert_eq!(
            describe_status(Kind::Lock, &held, true),
            "lock 'deploy': held by ci-7 (fencing token 12, expires in 42s); 1 waiting\n  1. ci-8 (waited 3.0s)\n"
        );
        let free = json!({"name": "x", "held": false, "waiting": 0, "waiters": []});
        assert_eq!(
            describe_status(Kind::Lock, &free, true),
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
            describe_status(Kind::Lock, &shared, true),
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
            describe_status(Kind::Semaphore, &sem, true),
            "semaphore 'pool': 4 of 5 permits used by 2 leases; 1 waiting\n  \
             held by a (fencing token 7, 3 permits, expires in 9.0s)\n  \
             held by b (fencing token 8, expires in 9.0s)\n  \
             1. c (waited 0.1s, 2 permits)\n"
        );
    }

    #[test]
    fn answers_map_to_exit_statuses() {
        let target = Target::new(Kind::Lock, "x").unwrap();
        let answer = |status, slug: &str| Answer {
            status,
            body: json!({"type": format!("https://baton/problems/{slug}")}),
        };
        for (status, slug, exit) in [
            (400, "invalid-request", USAGE),
            (401, "unauthorized", REFUSED),
            (403, "forbidden", REFUSED),
            (404, "lease-not-found", LOST),
            (409, "lock-held", NOT_ACQUIRED),
            (409, "superseded", SUPERSEDED),
            (404, "not-found", UNAVAILABLE),
        ] {
            assert_eq!(
                failure(&answer(status, slug), &target).status,
                exit,
                "{status} {slug}"
            );
        }
    }
}
