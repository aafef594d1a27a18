//! This instance's one subscription to the names' channels: a name's
//! channel is subscribed while any listener (the waiters, the holders'
//! streams) has joined it, each message is decoded once and handed to every
//! listener, and every listener is told when messages may have been missed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::message::NameMessage;
use crate::engine::connection::{PubSub, PubSubNotice, PubSubNotices, Store};

/// One who hears the names' channels it has joined.
pub(in crate::engine) trait Listener: Send + Sync {
    /// A message on `channel` (one this listener may not have joined: every
    /// listener hears every message and keeps what concerns it).
    fn heard(&self, channel: &str, message: &NameMessage);
    /// Every joined channel is subscribed (again) on a new connection:
    /// messages may have been missed before.
    fn resubscribed(&self);
}

/// Where a joined channel's subscription stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::engine) enum Subscription {
    /// Asked for, not answered yet.
    Asked,
    /// Redis did not confirm it (disconnected, or the call failed): it is
    /// made again with the connection, and [`Listener::resubscribed`]
    /// follows.
    Failed,
    /// Redis confirmed it.
    Confirmed,
}

/// A channel as long as anyone has joined it.
struct Joined {
    /// How many have joined it (each leaves once).
    count: usize,
    state: Arc<watch::Sender<Subscription>>,
}

/// The names' channels this instance subscribes to, on one connection.
pub(in crate::engine) struct NameChannels {
    pubsub: PubSub,
    joined: Mutex<HashMap<Arc<str>, Joined>>,
    tasks: TaskTracker,
}

impl NameChannels {
    /// Opens the subscription connection (it stops on `shutdown`); its
    /// notices are for [`Self::hear`], once the listeners exist.
    pub(in crate::engine) fn open(
        store: &Store,
        shutdown: CancellationToken,
        tasks: TaskTracker,
    ) -> (Arc<Self>, PubSubNotices) {
        let (pubsub, notices) = store.pubsub(shutdown);
        let channels = Arc::new(Self {
            pubsub,
            joined: Mutex::default(),
            tasks,
        });
        (channels, notices)
    }

    fn joined(&self) -> MutexGuard<'_, HashMap<Arc<str>, Joined>> {
        // Every change under this lock is one count, insert or remove.
        self.joined.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Joins `channel`: the first to join has it subscribed, asked at once
    /// (in the order of every join and leave). Say [`Self::leave`] once
    /// done. The answer follows where the subscription stands.
    pub(in crate::engine) fn join(&self, channel: &Arc<str>) -> watch::Receiver<Subscription> {
        let mut joined = self.joined();
        if let Some(entry) = joined.get_mut(channel) {
            entry.count += 1;
            return entry.state.subscribe();
        }
        let state = Arc::new(watch::Sender::new(Subscription::Asked));
        let answer = self.pubsub.ask_shard(true, channel);
        joined.insert(
            channel.clone(),
            Joined {
                count: 1,
                state: state.clone(),
            },
        );
        drop(joined);
        let subscribed = state.subscribe();
        self.tasks.spawn(async move {
            let confirmed = answer.await.unwrap_or(false);
            state.send_if_modified(|now| {
                let next = match (confirmed, *now) {
                    (true, _) => Subscription::Confirmed,
                    (false, Subscription::Asked) => Subscription::Failed,
                    // Confirmed meanwhile, on a new connection.
                    (false, _) => return false,
                };
                *now = next;
                true
            });
        });
        subscribed
    }

    /// Leaves `channel`; the last to leave has it let go of.
    pub(in crate::engine) fn leave(&self, channel: &str) {
        let mut joined = self.joined();
        let Some(entry) = joined.get_mut(channel) else {
            return;
        };
        entry.count -= 1;
        if entry.count == 0 {
            joined.remove(channel);
            // Nobody waits for the answer: a message that comes meanwhile
            // finds no listener that joined.
            drop(self.pubsub.ask_shard(false, channel));
        }
    }

    /// Hands each message of the names' channels, decoded once, to every
    /// listener; after the connection was made again, tells each of them.
    pub(in crate::engine) async fn hear(
        self: Arc<Self>,
        mut notices: PubSubNotices,
        listeners: Vec<Arc<dyn Listener>>,
        shutdown: CancellationToken,
    ) {
        loop {
            let notice = tokio::select! {
                () = shutdown.cancelled() => return,
                notice = notices.recv() => notice,
            };
            match notice {
                Some(PubSubNotice::Message { channel, payload }) => {
                    match std::str::from_utf8(&payload)
                        .ok()
                        .and_then(NameMessage::decode)
                    {
                        Some(message) => {
                            for listener in &listeners {
                                listener.heard(&channel, &message);
                            }
                        }
                        None => tracing::debug!("unknown message on a name's channel"),
                    }
                }
                // Listeners keep what they have; they check again once
                // resubscribed.
                Some(PubSubNotice::Lost) => {}
                Some(PubSubNotice::Subscribed) => {
                    for entry in self.joined().values() {
                        entry.state.send_replace(Subscription::Confirmed);
                    }
                    for listener in &listeners {
                        listener.resubscribed();
                    }
                }
                None => return,
            }
        }
    }
}
