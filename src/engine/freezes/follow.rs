//! The task that keeps this instance's freezes in step with Redis: it reads
//! the list at start, whenever a change is told on the freezes channel,
//! when its subscription is made again (a message may have been missed),
//! and every [`RELOAD_EVERY`] as a safety net; and it checks the list's
//! version when a call that may grant finds it getting old
//! (`FreezeBook::ready`), so that the list is fresh (`book.rs`)
//! whenever a call needs it, and costs Redis nothing while nobody calls: a
//! list not found to be Redis's for [`FRESH_FOR`] grants nothing.
//! Each turn it also works out again the windows of freezes whose window
//! has passed, so that requests only look them up.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::admin::Freezes;
use super::clock::wall_clock_ms;
#[cfg(doc)]
use super::clock::FRESH_FOR;
use crate::engine::connection::{PubSub, PubSubNotice, PubSubNotices};

/// How often the list is read again though nobody said it changed.
const RELOAD_EVERY: Duration = Duration::from_secs(5);
/// How soon a read or a check that failed is tried again.
const RETRY_AFTER: Duration = Duration::from_millis(300);

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
        // The safety net's read, or a failed read or check tried again.
        let retry_at = match done {
            Ok(()) if next == Next::Reload => {
                reload_at = tokio::time::Instant::now() + RELOAD_EVERY;
                reload_at
            }
            Ok(()) => reload_at,
            Err(err) => {
                tracing::debug!(%err, "reading the freezes failed; retrying");
                // Read whole next time: a change may have been missed.
                reload_at = tokio::time::Instant::now();
                reload_at + RETRY_AFTER
            }
        };
        // A window that passed is worked out again here, not by a request.
        book.work_ahead(wall_clock_ms());
        next = tokio::select! {
            () = stop.cancelled() => return,
            notice = notices.recv() => match notice {
                None => return,
                Some(PubSubNotice::Message { .. } | PubSubNotice::Subscribed) => Next::Reload,
                Some(PubSubNotice::Lost) => Next::Nothing,
            },
            () = book.wanted() => Next::Check,
            () = tokio::time::sleep_until(retry_at) => Next::Reload,
        };
        if next == Next::Check && tokio::time::Instant::now() >= reload_at {
            next = Next::Reload;
        }
    }
}
