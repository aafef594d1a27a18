//! `baton history NAME`: who held a lock or semaphore, from when to when,
//! and how each lease ended, newest first (one call; `--last N` entries).

use clap::Args;
use reqwest::Method;

use crate::cli::answer::failure;
use crate::cli::duration::human;
use crate::cli::exit::Failure;
use crate::cli::http::{call, Service};
use crate::cli::messages::show;
use crate::cli::options::{kind_of, Connection, KindOption, Output};
use crate::cli::target::Target;
use crate::domain::Kind;
use crate::wire::{HistoryBody, HistoryEntryBody, LeaseEndBody};

/// `baton history`
#[derive(Args, Debug, Clone)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub kind: KindOption,

    /// How many leases to show, newest first (1-100)
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub last: u8,

    /// How to print the history
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,

    /// The lock or semaphore
    #[arg(env = "BATON_LOCK_NAME")]
    pub name: String,
}

/// `baton history`: of the lock NAME, or the semaphore NAME with `--limit`
/// (or when the lease variables say so); without either, of the lock, or of
/// the semaphore when the lock has none and the semaphore has some (a
/// semaphore's history needs no limit).
///
/// # Errors
/// The call failed.
pub async fn history(args: HistoryArgs) -> Result<(), Failure> {
    let said = kind_of(&args.kind, &args.name)?;
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let page_of = |kind| {
        let (service, name, last) = (&service, &args.name, args.last);
        async move {
            let target = Target::new(kind, name)?;
            let path = format!("{}/history?limit={last}", target.path());
            let answer = call(service, Method::GET, &path, None).await?;
            if answer.status != 200 {
                return Err(failure(&answer, &target));
            }
            let page: HistoryBody = answer.read("history")?;
            Ok((page, answer.body))
        }
    };
    let (kind, (page, body)) = match said {
        Some(kind) => (kind, page_of(kind).await?),
        None => {
            let lock = page_of(Kind::Lock).await?;
            if lock.0.entries.is_empty() {
                let semaphore = page_of(Kind::Semaphore).await?;
                if semaphore.0.entries.is_empty() {
                    let name = &args.name;
                    return match args.output {
                        Output::Json => show(format!("{}\n", lock.1)),
                        Output::Text => show(format!(
                            "no history: neither the lock nor the semaphore '{name}' was held lately\n"
                        )),
                    };
                }
                (Kind::Semaphore, semaphore)
            } else {
                (Kind::Lock, lock)
            }
        }
    };
    match args.output {
        Output::Json => show(format!("{body}\n")),
        Output::Text => show(describe(kind, &page)),
    }
}

/// A page of history for people: one line per lease, newest first.
fn describe(kind: Kind, page: &HistoryBody) -> String {
    let noun = match kind {
        Kind::Lock => "lock",
        Kind::Semaphore => "semaphore",
    };
    if page.entries.is_empty() {
        return format!("{noun} '{}': no history\n", page.name);
    }
    let mut text = format!("{noun} '{}', newest first:\n", page.name);
    for entry in &page.entries {
        text.push_str(&line(entry));
        text.push('\n');
    }
    text
}

/// One lease: its token, owner, what it took, when, how long and how it ended.
fn line(entry: &HistoryEntryBody) -> String {
    let owner = entry.owner.as_deref().unwrap_or("(no owner)");
    let mut text = format!("  #{} {owner}", entry.fencing_token);
    if entry.shared == Some(true) {
        text.push_str(" shared");
    }
    if let Some(permits) = entry.permits.filter(|p| *p > 1) {
        text.push_str(&format!(" {permits} permits"));
    }
    if let Some(priority) = entry.priority {
        text.push_str(&format!(" priority {priority}"));
    }
    text.push_str(&format!(" from {}", entry.acquired_at));
    if entry.waited_ms > 0 {
        text.push_str(&format!(
            " (waited {})",
            human(std::time::Duration::from_millis(entry.waited_ms))
        ));
    }
    let end = match entry.end {
        LeaseEndBody::Held => "held now".to_owned(),
        LeaseEndBody::Released => "released".to_owned(),
        LeaseEndBody::Expired => "expired".to_owned(),
        LeaseEndBody::ForceReleased => "force-released".to_owned(),
        LeaseEndBody::NotCollected => "not collected".to_owned(),
    };
    match (&entry.ended_at, entry.held_ms) {
        (Some(at), Some(held)) => text.push_str(&format!(
            " to {at}, {end} after {}",
            human(std::time::Duration::from_millis(held))
        )),
        _ => text.push_str(&format!(", {end}")),
    }
    if let Some(by) = &entry.by {
        text.push_str(&format!(" [token {by}]"));
    }
    if let Some(by) = &entry.ended_by {
        text.push_str(&format!(" [force-released by token {by}]"));
    }
    if let Some(reason) = &entry.override_reason {
        text.push_str(&format!(" [override: {reason}]"));
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_history_reads_one_line_per_lease() {
        let page: HistoryBody = serde_json::from_value(json!({"name": "deploy", "entries": [
            {"fencing_token": 9, "owner": "bob", "shared": false, "priority": 5,
             "acquired_at": "2026-11-28T07:00:00.000Z", "waited_ms": 2000, "end": "held",
             "expires_at": "2026-11-28T07:01:00.000Z"},
            {"fencing_token": 8, "owner": "alice", "shared": false,
             "acquired_at": "2026-11-28T06:59:00.000Z", "waited_ms": 0, "end": "expired",
             "ended_at": "2026-11-28T06:59:30.000Z", "held_ms": 30000, "by": "ci"},
            {"fencing_token": 7, "owner": "carol", "acquired_at": "2026-11-28T06:58:00.000Z",
             "waited_ms": 0, "end": "force-released", "ended_at": "2026-11-28T06:58:10.000Z",
             "held_ms": 10000, "ended_by": "ops"}]}))
        .unwrap();
        let text = describe(Kind::Lock, &page);
        assert!(text.starts_with("lock 'deploy', newest first:\n"), "{text}");
        assert!(
            text.contains(
                "#9 bob priority 5 from 2026-11-28T07:00:00.000Z (waited 2.0s), held now"
            ),
            "{text}"
        );
        assert!(text.contains("#8 alice from 2026-11-28T06:59:00.000Z to 2026-11-28T06:59:30.000Z, expired after 30s [token ci]"), "{text}");
        assert!(
            text.contains("force-released after 10s [force-released by token ops]"),
            "{text}"
        );
        let empty: HistoryBody =
            serde_json::from_value(json!({"name": "x", "entries": []})).unwrap();
        assert_eq!(
            describe(Kind::Semaphore, &empty),
            "semaphore 'x': no history\n"
        );
    }
}
