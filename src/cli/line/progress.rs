//! The progress line while a request waits in the service's line: every
//! 5 s, our place in line and the holder, from the name's status (or the
//! ticket's own place, waiting on a ticket: `ticket.rs`); while the name is
//! frozen, only when it says something new, or every 5 minutes ([`Echo`]).

use std::time::Duration;

use reqwest::Method;
use tokio::time::Instant;

use crate::cli::duration::{human, millis};
use crate::cli::http::Service;
use crate::cli::line::request::Request;
use crate::cli::line::waiting::{describe_holder, Echo};
use crate::cli::target::Target;
use crate::domain::NamePattern;
use crate::wire::{FreezeList, StatusBody};

/// Every 5 s while the request waits (the first after 1 s): the place in line
/// and the holder, from the status (or the ticket's place, waiting on one),
/// through `echo`.
pub(crate) async fn progress(
    service: &Service,
    request: &Request,
    ticket: Option<&str>,
    sent: Instant,
    started: Instant,
    echo: &mut Echo,
) {
    if let Some(at) = ticket {
        return crate::cli::line::ticket::progress(service, request, at, started, echo).await;
    }
    let path = request.target.path();
    tokio::time::sleep(Duration::from_secs(1)).await;
    loop {
        if let Ok(answer) = service
            .call(Method::GET, &path, None, Duration::from_secs(5))
            .await
        {
            // A status it cannot read says nothing: the next one may.
            let status = (answer.status == 200)
                .then(|| StatusBody::from_json(request.target.kind, &answer.body).ok())
                .flatten();
            if let Some(status) = status {
                let now = Instant::now();
                let frozen = frozen_now(service, &request.target).await;
                let line = format!(
                    "waiting for {}: {}{}; waited {} of {}",
                    request.target,
                    frozen
                        .as_ref()
                        .map(|frozen| format!("{frozen}; "))
                        .unwrap_or_default(),
                    describe_line(&status, request, now - sent),
                    human(now - started),
                    human(request.wait)
                );
                echo.say(frozen.is_some(), line);
            }
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

/// `place 2 of 3 in line; held by X (expires in 52s)`: ours is the waiter
/// with our owner that has waited about as long as our request.
fn describe_line(status: &StatusBody, request: &Request, waited: Duration) -> String {
    let waited = i128::from(millis(waited));
    let place = status
        .waiters()
        .iter()
        .filter(|w| w.owner.as_deref() == Some(request.owner.as_str()))
        .map(|w| {
            (
                (i128::from(w.waited_ms) - waited).abs(),
                w.position,
                w.eta_ms,
            )
        })
        .min()
        .map(|(_, position, eta)| (position, eta));
    let waiting = status.waiting();
    let mut out = match place {
        Some((place, _)) => format!("place {place} of {waiting} in line; "),
        None => format!("{waiting} waiting; "),
    };
    out.push_str(&describe_holder(status));
    // The expected wait, once the name has a typical hold.
    if let Some((_, Some(ms))) = place {
        out.push_str(&format!(
            "; about {} left",
            human(Duration::from_millis(ms))
        ));
    }
    out
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

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::domain::Kind;

    fn request(kind: Kind) -> Request {
        crate::cli::line::request::example(kind)
    }

    /// The status `body` of a `kind`, as the client reads it.
    fn read_status(kind: Kind, body: Value) -> StatusBody {
        StatusBody::from_json(kind, &body).unwrap()
    }

    #[test]
    fn the_line_shows_our_place_and_the_holder() {
        let status = read_status(
            Kind::Lock,
            json!({"name": "line", "held": true, "owner": "ci-1", "expires_in_ms": 52_000,
                "waiting": 3, "waiters": [
                    {"position": 1, "owner": "me", "waited_ms": 90_000},
                    {"position": 2, "owner": "me", "waited_ms": 35_000},
                    {"position": 3, "owner": "other", "waited_ms": 1_000}]}),
        );
        assert_eq!(
            describe_line(&status, &request(Kind::Lock), Duration::from_secs(35)),
            "place 2 of 3 in line; held by ci-1 (expires in 52s)"
        );
        let free = read_status(
            Kind::Lock,
            json!({"name": "line", "held": false, "waiting": 0, "waiters": []}),
        );
        assert_eq!(
            describe_line(&free, &request(Kind::Lock), Duration::ZERO),
            "0 waiting; free"
        );
        let full = read_status(
            Kind::Semaphore,
            json!({"name": "line", "holders": 2, "used": 4, "limit": 4, "waiting": 1,
                "waiters": [{"position": 1, "owner": "me", "waited_ms": 10, "permits": 3}]}),
        );
        assert_eq!(
            describe_line(&full, &request(Kind::Semaphore), Duration::ZERO),
            "place 1 of 1 in line; 4 of 4 permits used"
        );
        let shared = read_status(
            Kind::Lock,
            json!({"name": "line", "held": true, "mode": "shared", "holders": 2,
                "leases": [{"owner": "r1", "fencing_token": 1, "expires_in_ms": 5_000, "shared": true},
                    {"owner": "r2", "fencing_token": 2, "expires_in_ms": 9_000, "shared": true}],
                "waiting": 1, "waiters": [{"position": 1, "owner": "me", "waited_ms": 10}]}),
        );
        assert_eq!(
            describe_line(&shared, &request(Kind::Lock), Duration::ZERO),
            "place 1 of 1 in line; held shared by 2 (the last expires in 9.0s)"
        );
    }
}
