//! `baton status`: who holds a lock or semaphore and who waits for it, as
//! a sentence for people (also each entry of `baton list`) or the
//! service's JSON.

use std::time::Duration;

use clap::Args;
use reqwest::Method;

use crate::cli::answer::{failure, unreadable};
use crate::cli::duration::human;
use crate::cli::exit::Failure;
use crate::cli::http::{call, Service};
use crate::cli::messages::show;
use crate::cli::options::{kind_of, Connection, KindOption, Output};
use crate::cli::target::Target;
use crate::domain::Kind;
use crate::wire::{Mode, StatusBody};

/// `baton status`
#[derive(Args, Debug, Clone)]
pub struct StatusArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub kind: KindOption,

    /// How to print the status
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,

    /// The lock or semaphore (without --limit: the semaphore when the lock
    /// is not in use and the semaphore is)
    #[arg(env = "BATON_LOCK_NAME")]
    pub name: String,
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

/// A status for people: one line, and with `detail` the holders and the line.
pub(crate) fn describe_status(status: &StatusBody, detail: bool) -> String {
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
    use serde_json::{json, Value};

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
