//! `baton run`: takes the lock (or a semaphore slot), runs COMMAND in a
//! process group of its own while refreshing the lease, releases it when
//! every process of the group has exited, and exits with COMMAND's status.
//!
//! The promise: when the lease is lost (a refresh answered 404, or
//! refreshes failing), the group gets SIGTERM, then SIGKILL after the grace,
//! early enough that it has ended before the lease can lapse. The lease
//! surely lasts until `ok + ttl`, `ok` being when the last successful refresh
//! (or the acquiring request) was sent; SIGTERM goes out `grace + rtt` before
//! that, `rtt` being the longest a refresh may take (ttl/10, 0.5 s to 5 s).
//! Should baton run be killed (SIGKILL) and not keep it, its
//! [guard](crate::cli::run::guard) does.
//!
//! The lease's own stream (`follow.rs`) tells of a loss at once (COMMAND is
//! stopped then, as for a failed refresh) and of yield requests
//! (`--on-yield`); the refreshes alone keep the promise.
//!
//! Under a claim (`claim.rs`) the claim is refreshed through its own path
//! and every lease of it is followed on its own stream: the loss of any
//! stops COMMAND, and a yield request on any passes `--on-yield` on.
//!
//! A nested `baton run` of the same name (inside COMMAND) goes ahead at once
//! only when the service confirms that the lease of the variables (or that
//! name's lease in the claim of `BATON_CLAIM_ID`) is still held and covers
//! what the nested run asks (`nested.rs`); else it waits in line. When
//! SIGTERM and SIGKILL go out: `timing.rs`.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use crate::cli::clock;
use crate::cli::duration::{human, millis};
use crate::cli::exit::{Failure, NOT_FOUND, UNAVAILABLE};
use crate::cli::http::Service;
use crate::cli::line;
use crate::cli::line::request::Request;
use crate::cli::messages::say;
use crate::cli::run::acquired::{Acquired, Follow};
use crate::cli::run::args::RunArgs;
use crate::cli::run::claim::{Claim, CLAIM_ID};
use crate::cli::run::group;
use crate::cli::run::guard::{Guard, Message};
use crate::cli::run::held::Held;
use crate::cli::run::nested::{covered, covered_by_claim};
use crate::cli::run::timing::Timing;
use crate::cli::signals::Signals;
use crate::cli::target::Target;
use crate::cli::variables::{self, LeaseVariables};

/// `baton run`: COMMAND's status, or why it did not run or was stopped.
///
/// # Errors
/// See the exit statuses of `baton run --help`.
pub async fn run(args: RunArgs) -> Result<u8, Failure> {
    let lease_options = &args.lease;
    let timing = Timing::new(lease_options.ttl, args.grace)?;
    if lease_options.wait > Duration::from_secs(86_400) {
        return Err(Failure::usage("--wait must be at most 24h"));
    }
    let command_line = args.command_line();
    let (program, program_args) = match (&args.shell, command_line.split_first()) {
        (Some(line), _) => (OsString::from("sh"), vec!["-c".into(), line.into()]),
        (None, Some((program, rest))) => (program.clone(), rest.to_vec()),
        (None, None) => {
            return Err(Failure::usage(
                "missing COMMAND after NAME -- (or -c STRING)",
            ))
        }
    };
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let acquiring = if args.claims() {
        Acquiring::Claim(Claim::new(&args, timing.ttl)?)
    } else {
        let name = args.name.as_deref().unwrap_or_default();
        let target = Target::new(lease_options.kind(), name)?;
        let request = Request::new(&target, timing.ttl, lease_options);
        // Inside a `baton run` of this very name, or of a claim that holds
        // it: run at once if the lease held there covers this run.
        let mut covering = None;
        if let Some(outer) = LeaseVariables::from_env(name)? {
            if covered(&service, &request, &outer).await? {
                covering = Some(("the baton run around this one", None));
            }
        }
        if covering.is_none() {
            if let Some(claim_id) = std::env::var(CLAIM_ID).ok().filter(|id| !id.is_empty()) {
                if let Some(lease) = covered_by_claim(&service, &request, &claim_id).await? {
                    covering = Some(("the claim of the baton run around this one", Some(lease)));
                }
            }
        }
        if let Some((by, lease)) = covering {
            say(format!(
                "{target} is held already by {by}: running COMMAND at once"
            ));
            let mut command = std::process::Command::new(&program);
            command.args(&program_args);
            if let Some(lease) = lease {
                // COMMAND sees the lease it runs under, as under a run of
                // this name alone.
                command.env_remove(variables::LIMIT).envs(lease.pairs());
            }
            let err = command.exec();
            return Err(Failure::new(
                NOT_FOUND,
                format!("cannot run {}: {err}", program.to_string_lossy()),
            ));
        }
        Acquiring::Lease(request)
    };
    if group::find_program(Path::new(&program)).is_none() {
        return Err(Failure::new(
            NOT_FOUND,
            format!(
                "COMMAND not found or not executable: {}",
                program.to_string_lossy()
            ),
        ));
    }

    let mut signals = Signals::catch()
        .map_err(|err| Failure::new(UNAVAILABLE, format!("cannot catch signals: {err}")))?;
    let started = clock::now();
    let acquired = match acquiring {
        Acquiring::Lease(request) => {
            let lease = line::acquire(&service, &request, &mut signals).await?;
            let target = request.target;
            say(format!(
                "acquired {target} (fencing token {}) after {}",
                lease.body.fencing_token(),
                human(lease.received.saturating_sub(started))
            ));
            let variables = LeaseVariables {
                name: target.name.to_string(),
                id: lease.body.id().to_owned(),
                fencing_token: Some(lease.body.fencing_token()),
                kind: target.kind,
                limit: lease_options.limit,
            };
            Acquired {
                path: target.lease_path(lease.body.id()),
                label: target.to_string(),
                env: variables
                    .pairs()
                    .into_iter()
                    .map(|(key, value)| (key.to_owned(), value))
                    .collect(),
                sent: lease.sent,
                received: lease.received,
                follows: vec![Follow {
                    path: target.lease_path(lease.body.id()),
                    label: None,
                }],
            }
        }
        Acquiring::Claim(claim) => claim.acquire(&service, &mut signals, started).await?,
    };
    let guard = Guard::start(&Message::Lease {
        url: service.url().to_owned(),
        token: args.connection.token.clone(),
        path: acquired.path.clone(),
        grace_ms: millis(timing.grace),
    });
    let held = Held {
        service,
        path: acquired.path.clone(),
        label: acquired.label.clone(),
        env: acquired.env.clone(),
        timing,
        on_yield: args.on_yield,
        follows: acquired.follows.clone(),
        guard: Mutex::new(None),
    };
    match guard {
        Ok(guard) => {
            *held
                .guard
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(guard)
        }
        Err(err) => {
            held.release(1, true).await;
            return Err(Failure::new(
                UNAVAILABLE,
                format!("cannot start the guard that stops COMMAND should baton run be killed ({err}); released the lease"),
            ));
        }
    }
    let status = held
        .supervise(&acquired, &program, &program_args, &mut signals)
        .await;
    if let Some(guard) = held
        .guard
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
    {
        guard.done();
    }
    status
}

/// What a run acquires: one lease, or a claim of several names.
enum Acquiring {
    Lease(Request),
    Claim(Claim),
}
