//! What to acquire: the [`Request`] that `baton run`, `acquire` and
//! `enqueue` make of their options, and the body it is sent as. The line
//! (`wait.rs`) waits with it; its progress (`progress.rs`), tickets
//! (`ticket.rs`) and a nested run's check (`run/nested.rs`) read it.

use std::time::Duration;

use serde_json::Value;

use crate::cli::duration::millis;
use crate::cli::http::json;
use crate::cli::target::Target;
use crate::domain::Kind;
use crate::wire::{AcquireFields, AcquireLock, AcquireSemaphore};

/// What to acquire.
#[derive(Debug, Clone)]
pub struct Request {
    pub target: Target,
    pub ttl: Duration,
    pub wait: Duration,
    pub owner: String,
    pub newest_wins: bool,
    /// Its place in line, 0 to 9 (the service's default: 0).
    pub priority: Option<u8>,
    pub limit: Option<u32>,
    /// A shared (read) lease of a lock.
    pub shared: bool,
    /// How many of a semaphore's `limit` the lease takes (the service's default: 1).
    pub permits: Option<u32>,
    /// Print the place in line while waiting.
    pub progress: bool,
    /// A ticket to wait on (`--ticket`), instead of joining the line.
    pub ticket: Option<String>,
    /// An administrator's reason to be granted through a freeze (`--override`).
    pub override_reason: Option<String>,
    /// Ask the holders to yield when it has to wait (`--ask-yield`).
    pub ask_yield: bool,
    /// Where the service POSTs a ticket's turn notice (`baton enqueue --notify`).
    pub notify: Option<String>,
}

impl Request {
    /// The acquisition `options` ask for on `target`, with `ttl`; the owner
    /// is the one given, else the CI job's URL or user@host.
    pub fn new(
        target: &Target,
        ttl: Duration,
        options: &crate::cli::options::LeaseOptions,
    ) -> Self {
        let owner = crate::cli::owner::clean(&options.owner.clone().unwrap_or_else(|| {
            crate::cli::owner::default_owner(
                |k| std::env::var(k).ok(),
                crate::cli::owner::host_name,
            )
        }));
        Self {
            target: target.clone(),
            ttl,
            wait: options.wait,
            owner,
            newest_wins: options.newest_wins,
            priority: options.priority,
            limit: options.limit,
            shared: options.shared,
            permits: options.permits,
            progress: !options.quiet,
            ticket: options.ticket.clone(),
            override_reason: options.override_reason.clone(),
            ask_yield: options.ask_yield,
            notify: None,
        }
    }

    /// The body of a request that waits up to `wait`: what is asked, and no
    /// member whose default says the same.
    pub fn body(&self, wait: Duration, keep_place: Option<Duration>) -> Value {
        let fields = AcquireFields {
            notify: self.notify.clone(),
            ttl_ms: Some(millis(self.ttl)),
            wait_ms: Some(millis(wait)),
            owner: Some(self.owner.clone()).filter(|owner| !owner.is_empty()),
            newest_wins: self.newest_wins.then_some(true),
            override_reason: self.override_reason.clone(),
            priority: self.priority.filter(|p| *p > 0).map(u64::from),
            ask_yield: self.ask_yield.then_some(true),
            keep_place_ms: keep_place.map(millis),
        };
        match self.target.kind {
            Kind::Lock => json(&AcquireLock {
                shared: self.shared.then_some(true),
                ..fields.into()
            }),
            Kind::Semaphore => json(&AcquireSemaphore {
                limit: self.limit.map(u64::from),
                permits: self.permits.map(u64::from),
                ..fields.into()
            }),
        }
    }
}

/// A request of `kind` on the name `line` for a minute, waiting a minute,
/// with nothing else asked: what the client's unit tests start from.
#[cfg(test)]
pub(crate) fn example(kind: Kind) -> Request {
    Request {
        target: Target::new(kind, "line").unwrap(),
        ttl: Duration::from_secs(60),
        wait: Duration::from_secs(60),
        owner: "me".into(),
        newest_wins: false,
        priority: None,
        limit: None,
        shared: false,
        permits: None,
        progress: true,
        ticket: None,
        override_reason: None,
        ask_yield: false,
        notify: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(kind: Kind) -> Request {
        example(kind)
    }

    #[test]
    fn the_body_carries_what_was_asked_for() {
        let mut r = request(Kind::Semaphore);
        r.limit = Some(3);
        r.newest_wins = true;
        assert_eq!(
            r.body(Duration::from_millis(1500), None),
            json!({"ttl_ms": 60_000, "wait_ms": 1500, "owner": "me", "newest_wins": true, "limit": 3})
        );
        r.permits = Some(2);
        assert_eq!(r.body(Duration::ZERO, None)["permits"], 2);
        assert!(r.body(Duration::ZERO, None).get("priority").is_none());
        r.priority = Some(7);
        assert_eq!(r.body(Duration::ZERO, None)["priority"], 7);
        let mut r = request(Kind::Lock);
        assert!(r.body(Duration::ZERO, None).get("shared").is_none());
        r.shared = true;
        assert_eq!(r.body(Duration::ZERO, None)["shared"], true);
        assert!(r.body(Duration::ZERO, None).get("override").is_none());
        assert!(r.body(Duration::ZERO, None).get("ask_yield").is_none());
        r.override_reason = Some("hotfix".into());
        r.ask_yield = true;
        assert_eq!(r.body(Duration::ZERO, None)["override"], "hotfix");
        assert_eq!(r.body(Duration::ZERO, None)["ask_yield"], true);
    }
}
