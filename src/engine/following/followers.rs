//! This instance's holders' streams, by name: a name's channel joined while
//! a stream is open on the name, the dispatch of what the channel says to
//! each stream's mailbox (as one of the channels' listeners), and the
//! renewal of the names' "followed" mark in Redis.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::domain::{Kind, Name};
use crate::engine::channel::{HolderMessage, Listener, NameChannels, NameMessage, Subscription};
use crate::engine::functions::follow::KeepFollowing;
use crate::engine::functions::invoker::Invoker;

/// How often an instance renews the "followed" mark of the names it has
/// streams on (`follow.lua` sets it for 30 s), and lets go of the channels
/// of names it no longer has any on.
pub(super) const RENEW_EVERY: Duration = Duration::from_secs(10);
/// Renewals in flight at once.
const RENEWALS_AT_ONCE: usize = 16;
/// Words a stream may fall behind before it is told to ask Redis instead.
const MAILBOX_MAX: usize = 16;

/// What a stream's mailbox holds.
#[derive(Debug, Clone)]
pub(super) enum Heard {
    Message(HolderMessage),
    /// Messages may have been missed: ask Redis.
    Resync,
}

/// A stream's mailbox: what its name's channel said about its lease.
#[derive(Default)]
pub(super) struct Mailbox {
    heard: Mutex<VecDeque<Heard>>,
    ready: Notify,
}

impl Mailbox {
    fn post(&self, heard: Heard) {
        let mut queue = self.heard.lock().unwrap_or_else(|e| e.into_inner());
        if queue.len() >= MAILBOX_MAX {
            queue.clear();
            queue.push_back(Heard::Resync);
        } else {
            queue.push_back(heard);
        }
        drop(queue);
        self.ready.notify_one();
    }

    /// The next word for this stream.
    pub(super) async fn next(&self) -> Heard {
        loop {
            let next = self
                .heard
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front();
            if let Some(heard) = next {
                return heard;
            }
            self.ready.notified().await;
        }
    }
}

/// This instance's streams on one name.
struct NameFollowers {
    kind: Kind,
    name: Name,
    streams: HashMap<u64, Arc<Mailbox>>,
    /// Where the subscription of the name's channel stands.
    subscribed: watch::Receiver<Subscription>,
}

/// This instance's holders' streams, by name channel.
pub(crate) struct Followers {
    pub(super) invoker: Arc<Invoker>,
    names: Mutex<HashMap<Arc<str>, NameFollowers>>,
    /// The names' channels, joined while a stream is open on the name.
    channels: Arc<NameChannels>,
    next_key: AtomicU64,
    pub(super) shutdown: CancellationToken,
}

impl Followers {
    /// Starts the task that renews the names' marks; it stops on
    /// `shutdown`. The streams hear the names' channels as one of their
    /// listeners.
    pub(crate) fn start(
        invoker: Arc<Invoker>,
        channels: Arc<NameChannels>,
        shutdown: CancellationToken,
        tasks: &TaskTracker,
    ) -> Arc<Self> {
        let followers = Arc::new(Self {
            invoker,
            names: Mutex::default(),
            channels,
            next_key: AtomicU64::new(1),
            shutdown,
        });
        tasks.spawn(followers.clone().keep(tasks.clone()));
        followers
    }

    fn names(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, NameFollowers>> {
        // Every change under this lock is one insert or remove.
        self.names.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a stream on `name`, joining its channel if it is the
    /// first.
    pub(super) fn register(self: &Arc<Self>, kind: Kind, name: &Name) -> Slot {
        let channel = self.invoker.keys().name_channel(kind, name);
        let mailbox = Arc::new(Mailbox::default());
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let mut names = self.names();
        let channel = match names.get_key_value(channel.as_str()) {
            Some((shared, _)) => shared.clone(),
            None => {
                let channel: Arc<str> = Arc::from(channel);
                names.insert(
                    channel.clone(),
                    NameFollowers {
                        kind,
                        name: name.clone(),
                        streams: HashMap::new(),
                        subscribed: self.channels.join(&channel),
                    },
                );
                channel
            }
        };
        let subscribed = names.get_mut(&channel).map(|entry| {
            entry.streams.insert(key, mailbox.clone());
            entry.subscribed.clone()
        });
        drop(names);
        Slot {
            followers: self.clone(),
            channel,
            key,
            mailbox,
            subscribed,
        }
    }

    /// Every [`RENEW_EVERY`] lets go of the names without streams and
    /// renews the others' mark in Redis.
    async fn keep(self: Arc<Self>, tasks: TaskTracker) {
        let mut renew = tokio::time::interval(RENEW_EVERY);
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        renew.tick().await;
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => return,
                _ = renew.tick() => {
                    let followed = self.sort_names();
                    if !followed.is_empty() {
                        tasks.spawn(renew_all(self.invoker.clone(), followed));
                    }
                }
            }
        }
    }

    /// Takes the names without streams out (leaving their channels), and
    /// lists the others (to renew).
    fn sort_names(&self) -> Vec<(Kind, Name)> {
        let mut names = self.names();
        names.retain(|channel, entry| {
            let open = !entry.streams.is_empty();
            if !open {
                self.channels.leave(channel);
            }
            open
        });
        names
            .values()
            .map(|entry| (entry.kind, entry.name.clone()))
            .collect()
    }
}

/// Renews the "followed" mark of `names` in Redis, a few at once. A name
/// no longer held needs none: its streams end at their own lease's end.
async fn renew_all(invoker: Arc<Invoker>, names: Vec<(Kind, Name)>) {
    futures_util::stream::iter(names)
        .for_each_concurrent(RENEWALS_AT_ONCE, |(kind, name)| {
            let invoker = invoker.clone();
            async move {
                if let Err(err) = invoker.run(kind, &name, &KeepFollowing).await {
                    tracing::debug!(%err, "renewing a followed name failed");
                }
            }
        })
        .await;
}

/// A stream's place among the followers; dropping it takes the stream out.
pub(super) struct Slot {
    followers: Arc<Followers>,
    channel: Arc<str>,
    key: u64,
    pub(super) mailbox: Arc<Mailbox>,
    subscribed: Option<watch::Receiver<Subscription>>,
}

impl Slot {
    /// Resolves once the name's channel is subscribed, or after `at_most`
    /// (Redis is slow: a resync follows the subscription).
    pub(super) async fn subscribed(&mut self, at_most: Duration) {
        if let Some(mut subscribed) = self.subscribed.take() {
            let confirmed = subscribed.wait_for(|s| *s == Subscription::Confirmed);
            let _ = tokio::time::timeout(at_most, confirmed).await;
        }
    }

    pub(super) fn followers(&self) -> &Arc<Followers> {
        &self.followers
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(entry) = self.followers.names().get_mut(&self.channel) {
            entry.streams.remove(&self.key);
        }
    }
}

impl Listener for Followers {
    /// A word about a followed lease goes to every stream on its name here.
    fn heard(&self, channel: &str, message: &NameMessage) {
        let NameMessage::Holder(message) = message else {
            return;
        };
        if let Some(entry) = self.names().get(channel) {
            for mailbox in entry.streams.values() {
                mailbox.post(Heard::Message(message.clone()));
            }
        }
    }

    /// Words may have been missed: every stream asks Redis.
    fn resubscribed(&self) {
        for entry in self.names().values() {
            for mailbox in entry.streams.values() {
                mailbox.post(Heard::Resync);
            }
        }
    }
}
