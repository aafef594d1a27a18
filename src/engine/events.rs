//! Change events: every lock and semaphore change made on any instance, fanned
//! out to this instance's watchers (`GET /events`, the dashboard).
//!
//! Each mutating function PUBLISHes one JSON event to the instance-wide events
//! channel (`<prefix>events`) while anyone listens there, as the calling
//! instance knows it ([`Store::events_watched`]): every instance counts the
//! channel's listeners about every second ([`COUNT_EVERY`]), and an instance
//! that starts listening says so at once on `<prefix>events:hello`, which
//! every instance hears and acknowledges on `<prefix>events:ack` once it
//! publishes, and its watchers read nothing before every instance did (or
//! [`HELLO_WAIT`] passed: one may be paused). A cluster always publishes. An instance subscribes to it while it has watchers, and for [`LINGER`] after
//! the last one leaves: ONE dedicated subscription whatever the number of
//! watchers, each event handed to them through a [`tokio::sync::broadcast`]
//! channel, so Redis's cost does not grow with watchers, and is nothing at
//! all while nobody watches. Events are parsed into [`ChangeEvent`], which
//! has no field for a lease id, so none can reach a watcher even if a script
//! sent one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::connection::{PubSub, PubSubNotice, PubSubNotices};
use super::Store;
use crate::domain::{Kind, NamePrefix};

/// How many notices a slow watcher may fall behind before it is told it
/// missed some (and should read the state afresh).
const BACKLOG: usize = 1024;
/// How long the subscription outlives the last watcher, so that watchers
/// that come and go (acquisitions that report progress) do not make it churn.
const LINGER: Duration = Duration::from_secs(10);
/// How long a new listener waits for every instance to acknowledge its hello.
const HELLO_WAIT: Duration = Duration::from_secs(1);
/// How often an instance counts the events channel's listeners.
const COUNT_EVERY: Duration = Duration::from_secs(1);
/// How long a new watch waits for the subscription before it reads anything.
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(2);

/// What happened to a lock or semaphore.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    Acquired,
    Released,
    Refreshed,
    Expired,
    ForceReleased,
    Queued,
    Left,
}

impl Change {
    /// The event's name on the wire (`force-released`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Acquired => "acquired",
            Self::Released => "released",
            Self::Refreshed => "refreshed",
            Self::Expired => "expired",
            Self::ForceReleased => "force-released",
            Self::Queued => "queued",
            Self::Left => "left",
        }
    }
}

/// One change, as published by a script (`{"event", "kind", "name", "owner"?,
/// "fencing_token"?, "holders"?, "waiting"}`); any other member, a lease id
/// included, is dropped on parsing.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ChangeEvent {
    pub event: Change,
    pub kind: Kind,
    pub name: String,
    #[serde(default)]
    pub owner: Option<String>,
    /// Lua's cjson prints large numbers in floating point, so scripts may send
    /// tokens as decimal strings; both forms are read.
    #[serde(default, deserialize_with = "whole_number")]
    pub fencing_token: Option<u64>,
    #[serde(default, deserialize_with = "whole_number")]
    pub holders: Option<u64>,
    #[serde(default, deserialize_with = "whole_number")]
    pub waiting: Option<u64>,
}

impl ChangeEvent {
    /// Parses one published message; `None` for anything that is not a change
    /// event (e.g. another version's payload on the same channel).
    pub fn parse(payload: &[u8]) -> Option<Self> {
        serde_json::from_slice(payload).ok()
    }
}

/// An integer sent as a JSON integer or as a decimal string.
fn whole_number<'de, D: Deserializer<'de>>(de: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Int(u64),
        Text(String),
    }
    match Option::<Raw>::deserialize(de)? {
        None => Ok(None),
        Some(Raw::Int(n)) => Ok(Some(n)),
        Some(Raw::Text(s)) => s.parse().map(Some).map_err(serde::de::Error::custom),
    }
}

/// What a watcher receives.
#[derive(Debug, Clone)]
pub enum Notice {
    /// One change.
    Change(Arc<ChangeEvent>),
    /// Changes may have been missed (the subscription was lost, or the watcher
    /// fell behind): read the current state again.
    Resync,
}

/// The cap on open watches was reached.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("too many event streams are open")]
pub struct TooManyWatches {
    pub max: usize,
}

/// The instance's fan-out of change events: one subscription, many watchers.
pub struct Events {
    sender: broadcast::Sender<Notice>,
    /// Watches and follows alive: the subscription is up while any is.
    demand: Arc<watch::Sender<usize>>,
    open: Arc<AtomicUsize>,
    max_watches: usize,
    stop: CancellationToken,
    /// True while the subscription is up.
    subscribed: watch::Receiver<bool>,
}

impl Events {
    /// Subscribes to `channel` (classic pub/sub, so on a cluster every node's
    /// events arrive) in a task of its own, which resubscribes after failures
    /// and ends when `stop` is cancelled (tracked by `tasks`). At most `max_watches`
    /// watches may be open at once.
    pub fn start(
        store: &Store,
        channel: String,
        max_watches: usize,
        stop: CancellationToken,
        tasks: &TaskTracker,
    ) -> Arc<Self> {
        let (sender, _) = broadcast::channel(BACKLOG);
        let (up, subscribed) = watch::channel(false);
        let demand = Arc::new(watch::Sender::new(0));
        // A subscription connection of its own: the waiters' channels come
        // and go on theirs, this one stays.
        let (pubsub, notices) = store.pubsub(stop.clone());
        if store.events_counted() {
            tasks.spawn(count_listeners(
                store.clone(),
                channel.clone(),
                stop.clone(),
            ));
        }
        tasks.spawn(subscribe(
            store.clone(),
            (pubsub, notices),
            channel,
            sender.clone(),
            demand.subscribe(),
            stop.clone(),
            up,
        ));
        Arc::new(Self {
            sender,
            demand,
            open: Arc::default(),
            max_watches,
            stop,
            subscribed,
        })
    }

    /// Waits a little (2 s at most) for the subscription to be up; whether it
    /// is. Changes are published only while some instance listens, so a
    /// watch waits for it before it reads anything: no change made after that
    /// read goes unpublished. When Redis is slow to answer, the watch goes on
    /// anyway, and a `resync` follows once the subscription is up.
    pub async fn subscribed(&self) -> bool {
        let mut subscribed = self.subscribed.clone();
        tokio::time::timeout(SUBSCRIBE_WAIT, subscribed.wait_for(|up| *up))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// How many watches are open now.
    pub fn open_watches(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Starts watching the changes to names that start with `prefix`.
    ///
    /// # Errors
    /// [`TooManyWatches`] when the cap is reached.
    pub fn watch(&self, prefix: NamePrefix) -> Result<Watch, TooManyWatches> {
        if self.open.fetch_add(1, Ordering::Relaxed) >= self.max_watches {
            self.open.fetch_sub(1, Ordering::Relaxed);
            return Err(TooManyWatches {
                max: self.max_watches,
            });
        }
        metrics::gauge!("baton_event_streams").increment(1.0);
        Ok(Watch {
            receiver: self.sender.subscribe(),
            prefix: prefix.as_str().to_owned(),
            stop: self.stop.clone(),
            _open: Some(OpenWatch(self.open.clone())),
            _demand: Demand::new(&self.demand),
        })
    }

    /// Watches the changes to `name` (and names it is a prefix of) for a
    /// request that waits in line; not counted against the cap on streams,
    /// since waiters have their own.
    pub fn follow(&self, name: &str) -> Watch {
        Watch {
            receiver: self.sender.subscribe(),
            prefix: name.to_owned(),
            stop: self.stop.clone(),
            _open: None,
            _demand: Demand::new(&self.demand),
        }
    }
}

/// Keeps the subscription up for as long as it lives.
struct Demand(Arc<watch::Sender<usize>>);

impl Demand {
    fn new(demand: &Arc<watch::Sender<usize>>) -> Self {
        demand.send_modify(|n| *n += 1);
        Self(demand.clone())
    }
}

impl Drop for Demand {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Counts a watch as open for as long as it lives.
struct OpenWatch(Arc<AtomicUsize>);

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
        metrics::gauge!("baton_event_streams").decrement(1.0);
    }
}

/// One watcher's view of the changes under a name prefix.
pub struct Watch {
    receiver: broadcast::Receiver<Notice>,
    prefix: String,
    stop: CancellationToken,
    /// Counts the watch against the cap, if it is counted.
    _open: Option<OpenWatch>,
    _demand: Demand,
}

impl Watch {
    /// The next notice for this watcher; `None` once the service stops.
    pub async fn next(&mut self) -> Option<Notice> {
        loop {
            let received = tokio::select! {
                () = self.stop.cancelled() => return None,
                received = self.receiver.recv() => received,
            };
            match received {
                Ok(Notice::Change(change)) => {
                    if change.name.starts_with(&self.prefix) {
                        return Some(Notice::Change(change));
                    }
                }
                Ok(Notice::Resync) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    return Some(Notice::Resync)
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

/// Sleeps until `at`; forever without one.
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
async fn say_hello(store: &Store, channels: &Channels) -> Option<Greeting> {
    store.note_new_listener();
    if !store.events_counted() {
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
async fn count_listeners(store: Store, channel: String, stop: CancellationToken) {
    let mut numsub = redis::cmd("PUBSUB");
    numsub.arg("NUMSUB").arg(&channel);
    loop {
        if let Ok((_, listeners)) = store.query::<(String, u64)>(&numsub).await {
            store.note_listeners(listeners > 0);
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(COUNT_EVERY) => {}
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

/// The subscription loop: subscribes to `channel` while `demand` is above
/// zero (and for [`LINGER`] after), parses every message and broadcasts it,
/// until `stop`. `up` says whether the subscription is up.
async fn subscribe(
    store: Store,
    (pubsub, mut notices): (PubSub, PubSubNotices),
    channel: String,
    sender: broadcast::Sender<Notice>,
    mut demand: watch::Receiver<usize>,
    stop: CancellationToken,
    up: watch::Sender<bool>,
) {
    let channels = Channels {
        hello: format!("{channel}:hello"),
        ack: format!("{channel}:ack"),
    };
    if store.events_counted() {
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
        let wanted = *demand.borrow_and_update() > 0;
        idle_until = match (wanted, tracked) {
            (false, true) => Some(idle_until.unwrap_or_else(|| Instant::now() + LINGER)),
            _ => None,
        };
        if wanted && !tracked {
            // Tracked from now on: subscribed again after every reconnect or failover.
            tracked = true;
            lost = false;
            if pubsub.subscribe(&channel).await {
                greeting = say_hello(&store, &channels).await;
                up.send_replace(greeting.is_none());
            }
        }
        let notice = tokio::select! {
            () = stop.cancelled() => return,
            changed = demand.changed() => {
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
                    store.note_new_listener();
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
                        let _ = sender.send(Notice::Change(Arc::new(change)));
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
                    greeting = say_hello(&store, &channels).await;
                }
                up.send_replace(tracked && greeting.is_none());
                if std::mem::take(&mut lost) {
                    // Changes made meanwhile were not seen.
                    let _ = sender.send(Notice::Resync);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_agreed_event_and_drops_anything_else() {
        let change = ChangeEvent::parse(
            br#"{"event":"force-released","kind":"lock","name":"deploy","owner":"ci",
                 "fencing_token":"1763780000000001","waiting":2,"id":"secret-lease-id"}"#,
        )
        .expect("a change event");
        assert_eq!(change.event, Change::ForceReleased);
        assert_eq!(change.kind, Kind::Lock);
        assert_eq!(change.fencing_token, Some(1_763_780_000_000_001));
        assert_eq!(change.waiting, Some(2));
        assert_eq!(change.holders, None);

        let sem = ChangeEvent::parse(
            br#"{"event":"queued","kind":"semaphore","name":"w","holders":3,"waiting":1}"#,
        )
        .expect("a semaphore event");
        assert_eq!(sem.holders, Some(3));

        assert_eq!(ChangeEvent::parse(b"lock:deploy"), None);
        assert_eq!(
            ChangeEvent::parse(br#"{"event":"exploded","kind":"lock","name":"x","waiting":0}"#),
            None
        );
    }

    fn events(max: usize) -> (Arc<Events>, CancellationToken) {
        let stop = CancellationToken::new();
        let (sender, _) = broadcast::channel(4);
        let events = Arc::new(Events {
            sender,
            demand: Arc::new(watch::Sender::new(0)),
            open: Arc::default(),
            max_watches: max,
            stop: stop.clone(),
            subscribed: watch::channel(true).1,
        });
        (events, stop)
    }

    fn change(name: &str) -> Notice {
        Notice::Change(Arc::new(ChangeEvent {
            event: Change::Released,
            kind: Kind::Lock,
            name: name.into(),
            owner: None,
            fencing_token: Some(1),
            holders: None,
            waiting: Some(0),
        }))
    }

    #[tokio::test]
    async fn a_watch_sees_only_its_prefix_and_ends_at_shutdown() {
        let (events, stop) = events(10);
        let mut watch = events.watch(NamePrefix::parse("ci.").unwrap()).unwrap();
        events.sender.send(change("other")).unwrap();
        events.sender.send(change("ci.deploy")).unwrap();
        match watch.next().await {
            Some(Notice::Change(c)) => assert_eq!(c.name, "ci.deploy"),
            other => panic!("expected ci.deploy, got {other:?}"),
        }
        stop.cancel();
        assert!(watch.next().await.is_none());
    }

    #[tokio::test]
    async fn a_watch_that_falls_behind_is_told_to_resync() {
        let (events, _stop) = events(10);
        let mut watch = events.watch(NamePrefix::parse("").unwrap()).unwrap();
        for i in 0..10 {
            events.sender.send(change(&format!("n{i}"))).unwrap();
        }
        assert!(matches!(watch.next().await, Some(Notice::Resync)));
    }

    #[test]
    fn caps_the_open_watches_and_forgets_those_closed() {
        let (events, _stop) = events(1);
        let one = events.watch(NamePrefix::parse("").unwrap()).unwrap();
        assert!(events.watch(NamePrefix::parse("").unwrap()).is_err());
        drop(one);
        assert_eq!(events.open_watches(), 0);
        assert!(events.watch(NamePrefix::parse("").unwrap()).is_ok());
    }
}
