//! This instance's holders' streams, by name: one subscription connection
//! of their own (a name's channel subscribed while a stream is open on the
//! name), the dispatch of what the channel says to each stream's mailbox,
//! and the renewal of the names' "followed" mark in Redis.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{mpsc, watch, Notify};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::notice::{Heard, HolderMessage};
use crate::domain::{Kind, Name};
use crate::engine::connection::{PubSub, PubSubNotice, PubSubNotices};
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
    /// Whether the name's channel is subscribed.
    subscribed: watch::Sender<bool>,
}

/// This instance's holders' streams, by name channel.
pub(crate) struct Followers {
    pub(super) invoker: Arc<Invoker>,
    names: Mutex<HashMap<Arc<str>, NameFollowers>>,
    /// The channels to subscribe, to the task that owns the subscriptions.
    subscribe: mpsc::UnboundedSender<Arc<str>>,
    next_key: AtomicU64,
    pub(super) shutdown: CancellationToken,
}

impl Followers {
    /// Starts the streams' subscription connection and its tasks; all stop
    /// on `shutdown`.
    pub(crate) fn start(
        invoker: Arc<Invoker>,
        shutdown: CancellationToken,
        tasks: &TaskTracker,
    ) -> Arc<Self> {
        let (pubsub, notices) = invoker.store().pubsub(shutdown.clone());
        let (subscribe, requests) = mpsc::unbounded_channel();
        let followers = Arc::new(Self {
            invoker,
            names: Mutex::default(),
            subscribe,
            next_key: AtomicU64::new(1),
            shutdown,
        });
        tasks.spawn(followers.clone().hear(notices));
        tasks.spawn(followers.clone().keep(pubsub, requests, tasks.clone()));
        followers
    }

    fn names(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, NameFollowers>> {
        // Every change under this lock is one insert or remove.
        self.names.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a stream on `name`, subscribing its channel if it is the
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
                        subscribed: watch::Sender::new(false),
                    },
                );
                let _ = self.subscribe.send(channel.clone());
                channel
            }
        };
        let subscribed = names.get_mut(&channel).map(|entry| {
            entry.streams.insert(key, mailbox.clone());
            entry.subscribed.subscribe()
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

    /// Hands each word of the names' channels to the streams of its name;
    /// after the connection was made again, every stream asks Redis.
    async fn hear(self: Arc<Self>, mut notices: PubSubNotices) {
        loop {
            let notice = tokio::select! {
                () = self.shutdown.cancelled() => return,
                notice = notices.recv() => notice,
            };
            match notice {
                Some(PubSubNotice::Message { channel, payload }) => {
                    let Some(message) = std::str::from_utf8(&payload)
                        .ok()
                        .and_then(HolderMessage::decode)
                    else {
                        continue;
                    };
                    if let Some(entry) = self.names().get(channel.as_str()) {
                        for mailbox in entry.streams.values() {
                            mailbox.post(Heard::Message(message.clone()));
                        }
                    }
                }
                Some(PubSubNotice::Lost) => {}
                Some(PubSubNotice::Subscribed) => {
                    for entry in self.names().values() {
                        entry.subscribed.send_replace(true);
                        for mailbox in entry.streams.values() {
                            mailbox.post(Heard::Resync);
                        }
                    }
                }
                None => return,
            }
        }
    }

    /// Owns the subscriptions: subscribes each new name's channel, in the
    /// order asked; every [`RENEW_EVERY`] lets go of the names without
    /// streams and renews the others' mark in Redis. One task, so a channel
    /// let go of and subscribed again are done in that order.
    async fn keep(
        self: Arc<Self>,
        pubsub: PubSub,
        mut requests: mpsc::UnboundedReceiver<Arc<str>>,
        tasks: TaskTracker,
    ) {
        let mut renew = tokio::time::interval(RENEW_EVERY);
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        renew.tick().await;
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => return,
                channel = requests.recv() => {
                    let Some(channel) = channel else { return };
                    if !self.names().contains_key(&channel) {
                        continue;
                    }
                    if pubsub.subscribe_shard(&channel).await {
                        if let Some(entry) = self.names().get(&channel) {
                            entry.subscribed.send_replace(true);
                        }
                    }
                }
                _ = renew.tick() => {
                    let (idle, followed) = self.sort_names();
                    for channel in idle {
                        pubsub.unsubscribe_shard(&channel).await;
                    }
                    if !followed.is_empty() {
                        tasks.spawn(renew_all(self.invoker.clone(), followed));
                    }
                }
            }
        }
    }

    /// Takes the names without streams out (their channels, to let go of),
    /// and lists the others (to renew).
    fn sort_names(&self) -> (Vec<Arc<str>>, Vec<(Kind, Name)>) {
        let mut names = self.names();
        let idle: Vec<Arc<str>> = names
            .iter()
            .filter(|(_, entry)| entry.streams.is_empty())
            .map(|(channel, _)| channel.clone())
            .collect();
        for channel in &idle {
            names.remove(channel);
        }
        let followed = names
            .values()
            .map(|entry| (entry.kind, entry.name.clone()))
            .collect();
        (idle, followed)
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
    subscribed: Option<watch::Receiver<bool>>,
}

impl Slot {
    /// Resolves once the name's channel is subscribed, or after `at_most`
    /// (Redis is slow: a resync follows the subscription).
    pub(super) async fn subscribed(&mut self, at_most: Duration) {
        if let Some(mut subscribed) = self.subscribed.take() {
            let _ = tokio::time::timeout(at_most, subscribed.wait_for(|up| *up)).await;
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
