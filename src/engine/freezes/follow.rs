//! The task that keeps this instance's freezes in step with Redis: it reads
//! the list at start, whenever a change is told on the freezes channel,
//! when its subscription is made again (a message may have been missed),
//! and every [`RELOAD_EVERY`] as a safety net.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Freezes;
use crate::engine::connection::{PubSub, PubSubNotice, PubSubNotices};

/// How often the list is read again though nobody said it changed.
const RELOAD_EVERY: Duration = Duration::from_secs(5);
/// How soon a read that failed is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

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
    let mut reload = true;
    let mut next = RELOAD_EVERY;
    loop {
        if reload {
            next = match freezes.reload().await {
                Ok(()) => RELOAD_EVERY,
                Err(err) => {
                    tracing::debug!(%err, "reading the freezes failed; retrying");
                    RETRY_AFTER
                }
            };
        }
        tokio::select! {
            () = stop.cancelled() => return,
            notice = notices.recv() => {
                reload = match notice {
                    None => return,
                    Some(PubSubNotice::Message { .. } | PubSubNotice::Subscribed) => true,
                    Some(PubSubNotice::Lost) => false,
                };
            }
            () = tokio::time::sleep(next) => reload = true,
        }
    }
}
