//! What both waiting lines print alike, the one from the name's status
//! (`progress.rs`) and the one from a ticket's place (`ticket.rs`): who is
//! in the way ([`describe_holder`]), and the [`Echo`] that keeps a frozen
//! wait from repeating itself.

use std::time::Duration;

use tokio::time::Instant;

use crate::cli::duration::human;
use crate::cli::messages::say;
use crate::wire::{Mode, StatusBody};

/// How often a frozen wait repeats a waiting line that says nothing new.
const FROZEN_REPEAT: Duration = Duration::from_secs(300);

/// The waiting line as last printed, kept across the requests of one wait:
/// while the name is frozen, a line is printed only when it says something
/// new (its gist: the times that change every second left out) or
/// [`FROZEN_REPEAT`] after the last, so that a weekend's freeze is not 12
/// lines a minute; otherwise every time it is asked (every 5 s).
#[derive(Debug, Default)]
pub(crate) struct Echo {
    last: Option<(String, Instant)>,
}

impl Echo {
    /// Prints `line` (of a `frozen` name or not), unless it repeats.
    pub(crate) fn say(&mut self, frozen: bool, line: String) {
        let now = Instant::now();
        let gist = gist(&line);
        if frozen {
            if let Some((last, at)) = &self.last {
                if *last == gist && now.duration_since(*at) < FROZEN_REPEAT {
                    return;
                }
            }
        }
        say(line);
        self.last = Some((gist, now));
    }
}

/// What a waiting line says, less what changes as time passes: how long it
/// waited, the time left of a lease or of the wait, until when a ticket is
/// kept (`; `-separated parts; a freeze's part is kept whole).
fn gist(line: &str) -> String {
    line.split("; ")
        .filter(|part| {
            !(part.starts_with("waited ")
                || part.starts_with("about ")
                || part.starts_with("ticket kept until "))
        })
        .map(|part| match part.find(" (") {
            Some(at) if !part.contains("frozen until ") => &part[..at],
            _ => part,
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `held by X (expires in 52s)`, `held shared by 2 (...)`, `3 of 4 permits
/// used`, or `free`: who is in the way, from the name's status.
pub(crate) fn describe_holder(status: &StatusBody) -> String {
    let expiring = |held: String, last: &str, ms: Option<u64>| match ms {
        Some(ms) => format!(
            "{held} ({last}expires in {})",
            human(Duration::from_millis(ms))
        ),
        None => held,
    };
    let held = match status {
        StatusBody::Lock(lock) if lock.mode == Some(Mode::Shared) => {
            let held = format!("held shared by {}", lock.holders.unwrap_or(0));
            // When the last of its leases expires, as far as it lists them.
            let last = lock.leases.iter().flatten().map(|l| l.expires_in_ms).max();
            Some(expiring(held, "the last ", last))
        }
        StatusBody::Lock(lock) => match &lock.owner {
            Some(owner) => Some(format!("held by {owner}")),
            None => lock.held.then(|| "held".into()),
        }
        .map(|held| expiring(held, "", lock.expires_in_ms)),
        StatusBody::Semaphore(semaphore) => {
            let used = semaphore.used.unwrap_or(semaphore.holders);
            Some(match semaphore.limit {
                Some(limit) => format!("{used} of {limit} permits used"),
                None => format!("{used} permits used"),
            })
        }
    };
    held.unwrap_or_else(|| "free".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_s_gist_leaves_out_what_time_changes() {
        assert_eq!(
            gist(
                "waiting for lock 'x': frozen until T (weekend); place 2 of 3 in line; \
                  held by ci-1 (expires in 52s); about 2m00s left; waited 5.0s of 3d"
            ),
            "waiting for lock 'x': frozen until T (weekend); place 2 of 3 in line; held by ci-1"
        );
        assert_eq!(
            gist(
                "waiting for lock 'x': place 1 of 1 in line; free; \
                  ticket kept until 2026-12-05T19:00:00Z; waited 1m of 3d"
            ),
            gist(
                "waiting for lock 'x': place 1 of 1 in line; free; \
                  ticket kept until 2026-12-05T19:05:00Z; waited 6m of 3d"
            ),
        );
    }
}
