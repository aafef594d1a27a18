//! The task that keeps this instance's freezes in step with Redis: it reads
//! the list at start, whenever a change is told on the freezes channel,
//! when its subscription is made again (a message may have been missed),
//! and every [`RELOAD_EVERY`] as a safety net; and it checks the list's
//! version every [`CHECK_EVERY`] (and at once when a request waits for a
//! fresh list), so that the list stays fresh (`freeze_book.rs`) while Redis
//! answers: a list not found to be Redis's for [`FRESH_FOR`] grants nothing.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Freezes;
use crate::engine::connection::{PubSub, PubSubNotice, PubSubNotices};
#[cfg(doc)]
use crate::engine::freeze_book::FRESH_FOR;

/// How often the list is read again though nobody said it changed.
const RELOAD_EVERY: Duration = Duration::from_secs(5);
/// How often the list's version is checked (and a failed read tried again):
/// three checks fit in [`FRESH_FOR`], so one slow or lost reply does not make
/// the list stale. One call of three commands per instance each time,
/// whatever the traffic.
const CHECK_EVERY: Duration = Duration::from_millis(300);

/// What the next turn does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Next {
    Reload,
    Check,
    Nothing,
}

/// Follows the freezes channel with its own subscription until `stop`.
pub(in crate::engine) async fn follow(
    freezes: Freezes,
    pubsub: PubSub,
    mut notices: PubSubNotices,
    stop: CancellationToken,
) {
    let channel = freezes.invoker.keys().freezes_channel();
    // Heard again after every reconnection (`Subscribed`).
    pubsub.subscribe(&channel).await;
    let book = freezes.book().clone();
    let mut next = Next::Reload;
    let mut reload_at = tokio::time::Instant::now() + RELOAD_EVERY;
    loop {
        let done = match next {
            Next::Reload => freezes.reload().await,
            Next::Check => freezes.check().await,
            Next::Nothing => Ok(()),
        };
        match done {
            Ok(()) if next == Next::Reload => {
                reload_at = tokio::time::Instant::now() + RELOAD_EVERY
            }
            Ok(()) => {}
            Err(err) => {
                tracing::debug!(%err, "reading the freezes failed; retrying");
                // Read whole next time: a change may have been missed.
                reload_at = tokio::time::Instant::now();
            }
        }
        let check_at = tokio::time::Instant::now() + CHECK_EVERY;
        next = tokio::select! {
            () = stop.cancelled() => return,
            notice = notices.recv() => match notice {
                None => return,
                Some(PubSubNotice::Message { .. } | PubSubNotice::Subscribed) => Next::Reload,
                Some(PubSubNotice::Lost) => Next::Nothing,
            },
            () = book.wanted() => Next::Check,
            () = tokio::time::sleep_until(check_at) => Next::Check,
        };
        if next == Next::Check && tokio::time::Instant::now() >= reload_at {
            next = Next::Reload;
        }
    }
}
