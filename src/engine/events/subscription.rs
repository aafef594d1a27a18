//! The subscription to the events channel, and how an instance makes sure
//! every instance publishes before its watchers read anything.
//!
//! Each mutating function PUBLISHes one JSON event to the instance-wide events
//! channel (`<prefix>events`) while anyone listens there, as the calling
//! instance knows it ([`Audience`]): every instance counts the channel's
//! listeners about every second ([`COUNT_EVERY`]), and an instance that
//! starts listening says so at once on `<prefix>events:hello`, which every
//! instance hears and acknowledges on `<prefix>events:ack` once it
//! publishes, and its watchers read nothing before every instance did (or
//! [`HELLO_WAIT`] passed: one may be paused). A cluster always publishes.
//! An instance subscribes to the channel while it has watchers, and for
//! [`LINGER`] after the last one leaves: one dedicated subscription whatever
//! the number of watchers, so Redis's cost does not grow with watchers, and
//! is nothing at all while nobody watches.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::audience::Audience;
use super::change::{ChangeEvent, WatchNotice};
use crate::engine::connection::{PubSub, PubSubNotice, PubSubNotices, Store};

/// How long the subscription outlives the last watcher, so that watchers
/// that come and go (acquisitions that report progress) do not make it churn.
const LINGER: Duration = Duration::from_secs(10);
/// How long a new listener waits for every instance to acknowledge its hello.
const HELLO_WAIT: Duration = Duration::from_secs(1);
/// How often an instance counts the events channel's listeners.
const COUNT_EVERY: Duration = Duration::from_secs(1);

/// A hello this instance sent, and the acknowledgements it still waits for.
struct Greeting {
    nonce: String,
    awaiting: u64,
    until: Instant,
}

/// Tells every instance (this one at once) that this one listens on the
/// events channel now, so that their calls publish events from now on.
/// Returns the greeting whose acknowledgements to wait for before the
/// watchers read anything (none on a cluster, which always publishes, or
/// when Redis did not answer: the next count includes this listener).
async fn say_hello(store: &Store, audience: &Audience, channels: &Channels) -> Option<Greeting> {
    audience.told();
    if !audience.needs_counting() {
        return None;
    }
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let mut publish = redis::cmd("PUBLISH");
    publish.arg(&channels.hello).arg(&nonce);
    let heard_by = store.query::<u64>(&publish).await.ok()?;
    (heard_by > 0).then(|| Greeting {
        nonce,
        awaiting: heard_by,
        until: Instant::now() + HELLO_WAIT,
    })
}

/// The channels of the hello handshake, beside the events channel.
struct Channels {
    hello: String,
    ack: String,
}

/// Counts the events channel's listeners every [`COUNT_EVERY`], until `stop`.
pub(super) async fn count_listeners(
    store: Store,
    audience: Arc<Audience>,
    channel: String,
    stop: CancellationToken,
) {
    let mut numsub = redis::cmd("PUBSUB");
    numsub.arg("NUMSUB").arg(&channel);
    loop {
        if let Ok((_, listeners)) = store.query::<(String, u64)>(&numsub).await {
            audience.counted(listeners > 0);
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(COUNT_EVERY) => {}
        }
    }
}

/// Sleeps until `at`; forever without one.
async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

/// The subscription to the events channel, as the task that keeps it runs it.
pub(super) struct Subscription {
    pub store: Store,
    /// Told of every listener this instance hears of.
    pub audience: Arc<Audience>,
    /// The subscription connection of its own, and what it hears.
    pub pubsub: PubSub,
    pub notices: PubSubNotices,
    /// The events channel (`<prefix>events`).
    pub channel: String,
    /// Every event and resync, to the watchers.
    pub sender: broadcast::Sender<WatchNotice>,
    /// How many watches and follows want the subscription up.
    pub interest: watch::Receiver<usize>,
    pub stop: CancellationToken,
    /// Whether the subscription is up (and every instance publishes).
    pub up: watch::Sender<bool>,
}

impl Subscription {
    /// The subscription loop: subscribes to the channel while `interest` is
    /// above zero (and for [`LINGER`] after), parses every message and
    /// broadcasts it, until `stop`; says in `up` whether the subscription is
    /// up.
    pub(super) async fn run(self) {
        let Self {
            store,
            audience,
            pubsub,
            mut notices,
            channel,
            sender,
            mut interest,
            stop,
            up,
        } = self;
        let channels = Channels {
            hello: format!("{channel}:hello"),
            ack: format!("{channel}:ack"),
        };
        if audience.needs_counting() {
            // Heard for as long as the instance runs: the hellos of another
            // instance's new listeners, and the acknowledgements of this one's.
            pubsub.subscribe(&channels.hello).await;
            pubsub.subscribe(&channels.ack).await;
        }
        // The hello whose acknowledgements the watchers wait for.
        let mut greeting: Option<Greeting> = None;
        let mut tracked = false;
        let mut lost = false;
        // When the subscription goes, while nobody wants it.
        let mut idle_until: Option<Instant> = None;
        loop {
            let wanted = *interest.borrow_and_update() > 0;
            idle_until = match (wanted, tracked) {
                (false, true) => Some(idle_until.unwrap_or_else(|| Instant::now() + LINGER)),
                _ => None,
            };
            if wanted && !tracked {
                // Tracked from now on: subscribed again after every reconnect or failover.
                tracked = true;
                lost = false;
                if pubsub.subscribe(&channel).await {
                    greeting = say_hello(&store, &audience, &channels).await;
                    up.send_replace(greeting.is_none());
                }
            }
            let notice = tokio::select! {
                () = stop.cancelled() => return,
                changed = interest.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    continue;
                }
                () = sleep_until(greeting.as_ref().map(|g| g.until)), if greeting.is_some() => {
                    // Not every instance answered (one is paused): go on anyway.
                    greeting = None;
                    up.send_replace(tracked);
                    continue;
                }
                () = sleep_until(idle_until), if idle_until.is_some() => {
                    tracked = false;
                    up.send_replace(false);
                    pubsub.unsubscribe(&channel).await;
                    continue;
                }
                notice = notices.recv() => notice,
            };
            match notice {
                None => return,
                Some(PubSubNotice::Message {
                    channel: from,
                    payload,
                }) => {
                    if from == channels.hello {
                        // Publishing from now on; then the new listener hears so.
                        audience.told();
                        let mut ack = redis::cmd("PUBLISH");
                        ack.arg(&channels.ack).arg(payload);
                        let _ = store.query::<u64>(&ack).await;
                    } else if from == channels.ack {
                        if let Some(g) = greeting.as_mut() {
                            if payload == g.nonce.as_bytes() {
                                g.awaiting = g.awaiting.saturating_sub(1);
                                if g.awaiting == 0 {
                                    greeting = None;
                                    up.send_replace(tracked);
                                }
                            }
                        }
                    } else if from == channel {
                        if let Some(change) = ChangeEvent::parse(&payload) {
                            // No receiver is not an error: nobody watches.
                            let _ = sender.send(WatchNotice::Change(Arc::new(change)));
                        }
                    }
                }
                Some(PubSubNotice::Lost) => {
                    greeting = None;
                    up.send_replace(false);
                    lost = tracked;
                }
                Some(PubSubNotice::Subscribed) => {
                    if tracked {
                        greeting = say_hello(&store, &audience, &channels).await;
                    }
                    up.send_replace(tracked && greeting.is_none());
                    if std::mem::take(&mut lost) {
                        // Changes made meanwhile were not seen.
                        let _ = sender.send(WatchNotice::Resync);
                    }
                }
            }
        }
    }
}
