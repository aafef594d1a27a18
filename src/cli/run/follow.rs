//! `baton run` follows its own lease's stream (`GET .../{id}/events`), or
//! under a claim the stream of every lease of the claim: a lost lease stops
//! COMMAND at once, not at the next refresh, and a yield request on any of
//! them is passed on to COMMAND (`--on-yield SIGNAL`) or said on stderr.
//! The streams only add speed: the refreshes keep the promise without them,
//! so a stream that cannot be had is simply tried again.

use std::time::Duration;

use futures_util::future::select_all;

use crate::cli::answer::{outcome, Outcome};
use crate::cli::http::Service;
use crate::cli::messages::{signal_name, warn};
use crate::cli::run::acquired::Follow;
use crate::cli::run::group;
use crate::wire::{HolderEventBody, HolderEventName, Problem};

/// How long the stream may take to answer, and the pause before it is
/// opened again after it failed or ended.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);
const AGAIN_AFTER: Duration = Duration::from_secs(1);

/// The signal `--on-yield` names: `TERM`, `SIGTERM` or `15`.
///
/// # Errors
/// A name or number that is no signal.
pub fn parse_signal(text: &str) -> Result<i32, String> {
    let name = text.trim().to_ascii_uppercase();
    let name = name.strip_prefix("SIG").unwrap_or(&name);
    let signal = match name {
        "HUP" => libc::SIGHUP,
        "INT" => libc::SIGINT,
        "QUIT" => libc::SIGQUIT,
        "TERM" => libc::SIGTERM,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "WINCH" => libc::SIGWINCH,
        "KILL" => libc::SIGKILL,
        number => number
            .parse::<i32>()
            .ok()
            .filter(|n| (1..=64).contains(n))
            .ok_or_else(|| format!("not a signal: {text} (e.g. TERM, USR1, 15)"))?,
    };
    Ok(signal)
}

/// Follows every lease of `leases` at once while COMMAND (group `pgid`)
/// runs; returns why one of them is lost (naming it when there are
/// several), once the service says so. Never returns otherwise (nor for
/// none).
pub async fn follow_all(
    service: &Service,
    leases: &[Follow],
    pgid: i32,
    on_yield: Option<i32>,
) -> String {
    if leases.is_empty() {
        return std::future::pending().await;
    }
    let followers = leases.iter().map(|lease| {
        Box::pin(async move {
            let why = follow(service, &lease.path, pgid, on_yield).await;
            match &lease.label {
                Some(label) => format!("{label}: {why}"),
                None => why,
            }
        })
    });
    select_all(followers).await.0
}

/// Follows the lease at `lease_path` while COMMAND (group `pgid`) runs;
/// returns why the lease is lost, once the service says so. Never returns
/// otherwise.
pub async fn follow(
    service: &Service,
    lease_path: &str,
    pgid: i32,
    on_yield: Option<i32>,
) -> String {
    let path = format!("{lease_path}/events");
    let mut warned = false;
    loop {
        match service.open_stream(&path, ANSWER_WITHIN).await {
            Ok(response) if response.status() == 200 => {
                if let Some(why) = read(response, pgid, on_yield).await {
                    return why;
                }
            }
            Ok(response) => {
                let status = response.status();
                let body: serde_json::Value = response.json().await.unwrap_or_default();
                match outcome(status.as_u16(), Problem::from_json(&body)) {
                    Outcome::LeaseGone => {
                        return "the service no longer has it (404 lease-not-found)".to_owned();
                    }
                    // A service without holders' streams (its 404 names
                    // another problem).
                    Outcome::NotFound => {
                        warn("the service has no stream of its leases; relying on the refreshes");
                        return std::future::pending().await;
                    }
                    refused => {
                        if !warned {
                            warn(format!(
                                "cannot follow the lease ({status}); relying on the refreshes"
                            ));
                            warned = true;
                        }
                        if refused == Outcome::Refused {
                            return std::future::pending().await;
                        }
                    }
                }
            }
            Err(_) => {}
        }
        tokio::time::sleep(AGAIN_AFTER).await;
    }
}

/// Reads one stream to its end: why the lease is lost, if the stream says so.
async fn read(mut response: reqwest::Response, pgid: i32, on_yield: Option<i32>) -> Option<String> {
    let mut buffer = String::new();
    loop {
        let chunk = response.chunk().await.ok()??;
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let (name, data) = parse_event(&block);
            let Some(body) = data else { continue };
            match HolderEventName::from_name(&name) {
                Some(lost @ HolderEventName::Lost) => {
                    let reason = body.reason.unwrap_or_else(|| lost.as_str().to_owned());
                    return Some(format!("the service no longer has it ({reason})"));
                }
                Some(released @ HolderEventName::Released) => {
                    let released = released.as_str();
                    return Some(format!("the service no longer has it ({released})"));
                }
                Some(HolderEventName::YieldRequested) => asked_to_yield(&body, pgid, on_yield),
                _ => {}
            }
        }
    }
}

/// One event block: its name and its data.
fn parse_event(block: &str) -> (String, Option<HolderEventBody>) {
    let mut name = String::from("message");
    let mut data = Vec::new();
    for line in block.lines() {
        if let Some(v) = line.strip_prefix("event:") {
            v.trim().clone_into(&mut name);
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    let body = (!data.is_empty())
        .then(|| serde_json::from_str(&data.join("\n")).ok())
        .flatten();
    (name, body)
}

/// Someone asks this run to finish early: COMMAND's group gets the signal
/// of `--on-yield`, or stderr says so.
fn asked_to_yield(body: &HolderEventBody, pgid: i32, on_yield: Option<i32>) {
    let by = body
        .by
        .as_deref()
        .map(|by| format!(" by {by}"))
        .unwrap_or_default();
    let reason = body
        .reason
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    match on_yield {
        Some(signal) => {
            warn(format!(
                "asked to yield{by}{reason}: sending {} to COMMAND",
                signal_name(signal)
            ));
            group::signal(pgid, signal);
        }
        None => warn(format!(
            "asked to yield{by}{reason}; {} waiting (--on-yield SIGNAL passes this on to COMMAND)",
            body.waiting.unwrap_or(0)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_by_name_with_or_without_sig_or_by_number() {
        assert_eq!(parse_signal("TERM"), Ok(libc::SIGTERM));
        assert_eq!(parse_signal("sigusr1"), Ok(libc::SIGUSR1));
        assert_eq!(parse_signal("2"), Ok(libc::SIGINT));
        assert!(parse_signal("NOPE").is_err());
        assert!(parse_signal("0").is_err());
    }

    #[test]
    fn an_event_block_gives_its_name_and_data() {
        let (name, body) = parse_event(
            "event: lost\ndata: {\"fencing_token\":7,\"reason\":\"force-released\"}\n\n",
        );
        assert_eq!(name, "lost");
        assert_eq!(
            body.and_then(|b| b.reason).as_deref(),
            Some("force-released")
        );
        assert_eq!(parse_event(": keep-alive\n\n").1, None);
    }
}
