//! `baton run --lock A --lock B --semaphore POOL:LIMIT`: one claim of
//! several names (`POST /claims`), all of them held or none, waited for
//! until `--wait` by the loop one lease waits in too (`attempts.rs`: steps
//! of `max_wait_ms`, a pause after an early 409, a proxy's cut noticed, 5xx
//! retried for up to 60 s). Once held, the
//! claim is refreshed and released through `/claims/{id}` exactly as one
//! lease is through its path, and each of its leases is followed on its own
//! holder's stream, so that the loss of any stops COMMAND as the loss of one
//! lease does (see [`crate::cli::run`]). A nested `baton run` of one of its
//! names finds the claim by [`CLAIM_ID`] (`nested.rs`).

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::cli::answer::{unexpected, unreachable, unreadable};
use crate::cli::attempts::{Attempts, Retry};
use crate::cli::duration::{human, millis};
use crate::cli::exit::{Failure, NOT_ACQUIRED, UNAVAILABLE};
use crate::cli::http::{json, Service};
use crate::cli::messages::say;
use crate::cli::run::acquired::{Acquired, Follow};
use crate::cli::run::args::RunArgs;
use crate::cli::signals::Signals;
use crate::cli::target::Target;
use crate::domain::{ClaimId, Kind, Limit, Name};
use crate::wire::{ClaimBody, ClaimLock, ClaimRequest, ClaimSemaphore};

/// The variable that holds the claim id (a secret) in COMMAND's environment.
pub const CLAIM_ID: &str = "BATON_CLAIM_ID";
/// The variable that lists the claim's leases as JSON, without their ids:
/// `[{"kind", "name", "fencing_token"}]`.
pub const CLAIM_LEASES: &str = "BATON_CLAIM_LEASES";

/// A claim that `baton run` asks for.
pub struct Claim {
    locks: Vec<Name>,
    /// Each semaphore with its limit and the permits taken of it.
    semaphores: Vec<(Name, Limit, u64)>,
    shared: bool,
    ttl: Duration,
    wait: Duration,
    owner: String,
    /// Its place in each name's line.
    priority: Option<u8>,
    /// Granted through a freeze, for this reason (an admin token).
    override_reason: Option<String>,
}

/// `NAME:LIMIT` or `NAME:LIMIT:PERMITS` (the name may hold `:`): the name,
/// the limit and the permits, as written. When the last two parts are both
/// numbers they are LIMIT and PERMITS, so a name that itself ends in
/// `:digits` is written with its permits: `build:1:4:1` is one permit of the
/// semaphore `build:1` of limit 4.
fn semaphore_parts(raw: &str) -> Option<(&str, &str, Option<&str>)> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (rest, last) = raw.rsplit_once(':')?;
    if !digits(last) {
        return Some((rest, last, None));
    }
    match rest.rsplit_once(':') {
        Some((name, limit)) if digits(limit) && !name.is_empty() => Some((name, limit, Some(last))),
        _ => Some((rest, last, None)),
    }
}

impl Claim {
    /// The claim the `--lock` and `--semaphore` options of `args` ask for.
    ///
    /// # Errors
    /// A name the service would refuse, or a `--semaphore` without its
    /// `:LIMIT` (64).
    pub fn new(args: &RunArgs, ttl: Duration) -> Result<Self, Failure> {
        let name =
            |raw: &str| Name::parse(raw).map_err(|err| Failure::usage(format!("NAME {err}")));
        let locks = args
            .locks
            .iter()
            .map(|raw| name(raw))
            .collect::<Result<_, _>>()?;
        let semaphores = args
            .semaphores
            .iter()
            .map(|raw| {
                let (raw_name, raw_limit, permits) = semaphore_parts(raw).ok_or_else(|| {
                    Failure::usage(format!(
                        "--semaphore {raw}: write it NAME:LIMIT or NAME:LIMIT:PERMITS, \
                         e.g. build-farm:4 or test-envs:3:2"
                    ))
                })?;
                let limit = raw_limit
                    .parse::<u64>()
                    .ok()
                    .and_then(|n| Limit::new(n).ok())
                    .ok_or_else(|| {
                        Failure::usage(format!(
                            "--semaphore {raw}: LIMIT must be a number from 1 to {}",
                            Limit::MAX
                        ))
                    })?;
                let permits = match permits {
                    None => 1,
                    Some(p) => p
                        .parse::<u64>()
                        .ok()
                        .filter(|p| (1..=u64::from(limit.get())).contains(p))
                        .ok_or_else(|| {
                            Failure::usage(format!(
                                "--semaphore {raw}: PERMITS must be a number from 1 to its LIMIT"
                            ))
                        })?,
                };
                Ok((name(raw_name)?, limit, permits))
            })
            .collect::<Result<_, Failure>>()?;
        let owner = crate::cli::owner::clean(&args.lease.owner.clone().unwrap_or_else(|| {
            crate::cli::owner::default_owner(
                |k| std::env::var(k).ok(),
                crate::cli::owner::host_name,
            )
        }));
        Ok(Self {
            locks,
            semaphores,
            shared: args.lease.shared,
            ttl,
            wait: args.lease.wait,
            owner,
            priority: args.lease.priority,
            override_reason: args.lease.override_reason.clone(),
        })
    }

    /// What it holds, for messages: `lock 'a', lock 'b', semaphore 'pool'`.
    fn label(&self) -> String {
        let locks = self.locks.iter().map(|name| format!("lock '{name}'"));
        let semaphores = self
            .semaphores
            .iter()
            .map(|(name, _, _)| format!("semaphore '{name}'"));
        locks.chain(semaphores).collect::<Vec<_>>().join(", ")
    }

    /// The body of a request that waits up to `wait`.
    fn body(&self, wait: Duration) -> serde_json::Value {
        json(&ClaimRequest {
            locks: self
                .locks
                .iter()
                .map(|name| ClaimLock {
                    name: name.to_string(),
                    shared: self.shared.then_some(true),
                })
                .collect(),
            semaphores: self
                .semaphores
                .iter()
                .map(|(name, limit, permits)| ClaimSemaphore {
                    name: name.to_string(),
                    limit: Some(u64::from(limit.get())),
                    permits: (*permits != 1).then_some(*permits),
                })
                .collect(),
            ttl_ms: Some(millis(self.ttl)),
            wait_ms: Some(millis(wait)),
            owner: Some(self.owner.clone()).filter(|owner| !owner.is_empty()),
            priority: self.priority.map(u64::from),
            override_reason: self.override_reason.clone(),
        })
    }

    /// Waits for every name until `--wait` runs out: the claim, held.
    ///
    /// # Errors
    /// Not acquired within `--wait` (75), refused (64, 77), the service
    /// unreachable or failing (69), a signal (128+N).
    pub async fn acquire(
        &self,
        service: &Service,
        signals: &mut Signals,
        started: Duration,
    ) -> Result<Acquired, Failure> {
        let label = self.label();
        let mut attempts = Attempts::new(label.clone(), self.wait, signals);
        if !self.wait.is_zero() {
            say(format!("claiming {label}: all of them, or none"));
        }
        loop {
            let wait = attempts.next_wait();
            let body = self.body(wait);
            let sent = crate::cli::clock::now();
            attempts.sending(wait);
            let outcome = tokio::select! {
                outcome = service.call(Method::POST, "/claims", Some(&body), wait + Duration::from_secs(30)) => outcome,
                signal = attempts.signals().recv() => return Err(attempts.signalled(signal)),
            };
            attempts.came();
            let answer = match outcome {
                Ok(answer) => answer,
                Err(why) if service.is_not_there(&why) => return Err(unreachable(why)),
                Err(why) => {
                    attempts.failed(Retry::NoAnswer(why.why)).await?;
                    continue;
                }
            };
            match (answer.status, answer.outcome()) {
                (201, _) => {
                    let claim = ClaimBody::from_json(&answer.body)
                        .map_err(|err| unreadable("claim", &err))?;
                    if ClaimId::parse(&claim.id).is_err() {
                        return Err(Failure::new(
                            UNAVAILABLE,
                            "the service answered 201 without a claim id; is it a baton service?",
                        ));
                    }
                    let received = crate::cli::clock::now();
                    say(format!(
                        "acquired {label} after {}",
                        human(received.saturating_sub(started))
                    ));
                    return Ok(self.acquired(&claim, sent, received));
                }
                (409, _) => {
                    attempts.answered();
                    // A wait cut short (a step of max_wait_ms, or a proxy): wait again.
                    attempts.pause_if_early().await?;
                    if !attempts.expired() {
                        continue;
                    }
                    let detail = answer.problem().map(|p| p.detail).unwrap_or_default();
                    return Err(Failure::new(
                        NOT_ACQUIRED,
                        format!(
                            "could not claim {label} within {}: {detail}",
                            human(self.wait)
                        ),
                    ));
                }
                _ => {
                    let about = format!("unexpected answer from {}/claims", service.url());
                    let hint = "is it a baton that takes claims? ";
                    attempts
                        .otherwise(answer, "claim", |answer| unexpected(&about, answer, hint))
                        .await?;
                }
            }
        }
    }

    /// The claim as `baton run` holds it: refreshed and released through
    /// `/claims/{id}`, every lease of it followed on its own holder's
    /// stream, and the variables COMMAND gets.
    fn acquired(&self, claim: &ClaimBody, sent: Duration, received: Duration) -> Acquired {
        let leases: Vec<_> = self
            .locks
            .iter()
            .map(|name| (Kind::Lock, name))
            .chain(
                self.semaphores
                    .iter()
                    .map(|(name, _, _)| (Kind::Semaphore, name)),
            )
            .filter_map(|(kind, name)| {
                let lease = claim
                    .leases
                    .iter()
                    .find(|lease| lease.kind() == kind && lease.name() == name.as_str())?;
                Some(json!({"kind": kind.as_str(), "name": name.as_str(), "fencing_token": lease.fencing_token()}))
            })
            .collect();
        let follows = claim
            .leases
            .iter()
            .filter_map(|lease| {
                let target = Target::new(lease.kind(), lease.name()).ok()?;
                Some(Follow {
                    path: target.lease_path(lease.id()),
                    label: Some(target.to_string()),
                })
            })
            .collect();
        Acquired {
            path: format!("/claims/{}", claim.id),
            label: self.label(),
            env: vec![
                (CLAIM_ID.to_owned(), claim.id.clone()),
                (
                    CLAIM_LEASES.to_owned(),
                    serde_json::Value::from(leases).to_string(),
                ),
            ],
            sent,
            received,
            follows,
        }
    }
}

#[cfg(test)]
mod parts_tests {
    use super::semaphore_parts;

    #[test]
    fn a_semaphore_is_name_limit_and_maybe_permits() {
        assert_eq!(semaphore_parts("farm:4"), Some(("farm", "4", None)));
        assert_eq!(
            semaphore_parts("test-envs:3:2"),
            Some(("test-envs", "3", Some("2")))
        );
        assert_eq!(semaphore_parts("a:b:4"), Some(("a:b", "4", None)));
        // A name that ends in :digits is written with its permits.
        assert_eq!(
            semaphore_parts("build:1:4:1"),
            Some(("build:1", "4", Some("1")))
        );
        assert_eq!(semaphore_parts(":3:2"), Some((":3", "2", None)));
        assert_eq!(semaphore_parts("farm"), None);
    }
}
