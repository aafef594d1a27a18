//! The instance's fan-out of change events: one subscription to the events
//! channel, however many watchers, each event handed to them through a
//! [`tokio::sync::broadcast`] channel; the subscription is up while anyone
//! watches (and a little after: `subscription.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::audience::Audience;
use super::change::WatchNotice;
use super::subscription::{count_listeners, Subscription};
use crate::domain::NamePrefix;
use crate::engine::connection::Store;

/// How many notices a slow watcher may fall behind before it is told it
/// missed some (and should read the state afresh).
const BACKLOG: usize = 1024;
/// How long a new watch waits for the subscription before it reads anything.
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(2);

/// The cap on open watches was reached.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("too many event streams are open")]
pub struct TooManyWatches {
    pub max: usize,
}

/// The instance's fan-out of change events: one subscription, many watchers.
pub struct Events {
    sender: broadcast::Sender<WatchNotice>,
    /// Watches and follows alive: the subscription is up while any is.
    interest: Arc<watch::Sender<usize>>,
    open: Arc<AtomicUsize>,
    max_watches: usize,
    stop: CancellationToken,
    /// True while the subscription is up.
    subscribed: watch::Receiver<bool>,
}

impl Events {
    /// Subscribes to `channel` (classic pub/sub, so on a cluster every node's
    /// events arrive) in a task of its own, which resubscribes after failures
    /// and ends when `stop` is cancelled (tracked by `tasks`), and keeps
    /// `audience` told of who listens. At most `max_watches` watches may be
    /// open at once.
    pub(in crate::engine) fn start(
        store: &Store,
        audience: Arc<Audience>,
        channel: String,
        max_watches: usize,
        stop: CancellationToken,
        tasks: &TaskTracker,
    ) -> Arc<Self> {
        let (sender, _) = broadcast::channel(BACKLOG);
        let (up, subscribed) = watch::channel(false);
        let interest = Arc::new(watch::Sender::new(0));
        // A subscription connection of its own: the waiters' channels come
        // and go on theirs, this one stays.
        let (pubsub, notices) = store.pubsub(stop.clone());
        if audience.needs_counting() {
            tasks.spawn(count_listeners(
                store.clone(),
                audience.clone(),
                channel.clone(),
                stop.clone(),
            ));
        }
        let subscription = Subscription {
            store: store.clone(),
            audience,
            pubsub,
            notices,
            channel,
            sender: sender.clone(),
            interest: interest.subscribe(),
            stop: stop.clone(),
            up,
        };
        tasks.spawn(subscription.run());
        Arc::new(Self {
            sender,
            interest,
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
    pub fn watch(&self, prefix: NamePrefix) -> Result<Watcher, TooManyWatches> {
        if self.open.fetch_add(1, Ordering::Relaxed) >= self.max_watches {
            self.open.fetch_sub(1, Ordering::Relaxed);
            return Err(TooManyWatches {
                max: self.max_watches,
            });
        }
        crate::telemetry::record_event_stream(1.0);
        Ok(Watcher {
            receiver: self.sender.subscribe(),
            prefix: prefix.as_str().to_owned(),
            stop: self.stop.clone(),
            _open: Some(OpenWatch(self.open.clone())),
            _interest: Interest::new(&self.interest),
        })
    }

    /// Counts one holder's stream against the same cap as the watches
    /// (holders' streams are event streams too), for as long as the slot
    /// lives.
    ///
    /// # Errors
    /// [`TooManyWatches`] when the cap is reached.
    pub fn count_stream(&self) -> Result<StreamSlot, TooManyWatches> {
        if self.open.fetch_add(1, Ordering::Relaxed) >= self.max_watches {
            self.open.fetch_sub(1, Ordering::Relaxed);
            return Err(TooManyWatches {
                max: self.max_watches,
            });
        }
        crate::telemetry::record_event_stream(1.0);
        Ok(StreamSlot {
            _open: OpenWatch(self.open.clone()),
        })
    }

    /// Watches the changes to `name` (and names it is a prefix of) for a
    /// request that waits in line; not counted against the cap on streams,
    /// since waiters have their own.
    pub fn follow(&self, name: &str) -> Watcher {
        Watcher {
            receiver: self.sender.subscribe(),
            prefix: name.to_owned(),
            stop: self.stop.clone(),
            _open: None,
            _interest: Interest::new(&self.interest),
        }
    }
}

/// Keeps the subscription up for as long as it lives.
struct Interest(Arc<watch::Sender<usize>>);

impl Interest {
    fn new(interest: &Arc<watch::Sender<usize>>) -> Self {
        interest.send_modify(|n| *n += 1);
        Self(interest.clone())
    }
}

impl Drop for Interest {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Counts a watch as open for as long as it lives.
struct OpenWatch(Arc<AtomicUsize>);

/// A holder's stream, counted against the cap on streams while it lives.
pub struct StreamSlot {
    /// Held only to be dropped with the slot.
    _open: OpenWatch,
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
        crate::telemetry::record_event_stream(-1.0);
    }
}

/// One watcher's view of the changes under a name prefix.
pub struct Watcher {
    receiver: broadcast::Receiver<WatchNotice>,
    prefix: String,
    stop: CancellationToken,
    /// Counts the watch against the cap, if it is counted.
    _open: Option<OpenWatch>,
    _interest: Interest,
}

impl Watcher {
    /// The next notice for this watcher; `None` once the service stops.
    pub async fn next(&mut self) -> Option<WatchNotice> {
        loop {
            let received = tokio::select! {
                () = self.stop.cancelled() => return None,
                received = self.receiver.recv() => received,
            };
            match received {
                Ok(WatchNotice::Change(change)) => {
                    if change.name.starts_with(&self.prefix) {
                        return Some(WatchNotice::Change(change));
                    }
                }
                Ok(WatchNotice::Resync) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    return Some(WatchNotice::Resync)
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Kind;
    use crate::engine::events::change::{Change, ChangeEvent};

    fn events(max: usize) -> (Arc<Events>, CancellationToken) {
        let stop = CancellationToken::new();
        let (sender, _) = broadcast::channel(4);
        let events = Arc::new(Events {
            sender,
            interest: Arc::new(watch::Sender::new(0)),
            open: Arc::default(),
            max_watches: max,
            stop: stop.clone(),
            subscribed: watch::channel(true).1,
        });
        (events, stop)
    }

    fn change(name: &str) -> WatchNotice {
        WatchNotice::Change(Arc::new(ChangeEvent {
            event: Change::Released,
            kind: Kind::Lock,
            name: name.into(),
            owner: None,
            fencing_token: Some(1),
            holders: None,
            waiting: Some(0),
            by: None,
            reason: None,
        }))
    }

    #[tokio::test]
    async fn a_watch_sees_only_its_prefix_and_ends_at_shutdown() {
        let (events, stop) = events(10);
        let mut watch = events.watch(NamePrefix::parse("ci.").unwrap()).unwrap();
        events.sender.send(change("other")).unwrap();
        events.sender.send(change("ci.deploy")).unwrap();
        match watch.next().await {
            Some(WatchNotice::Change(c)) => assert_eq!(c.name, "ci.deploy"),
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
        assert!(matches!(watch.next().await, Some(WatchNotice::Resync)));
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

    #[test]
    fn holders_streams_count_against_the_same_cap() {
        let (events, _stop) = events(2);
        let _watch = events.watch(NamePrefix::parse("").unwrap()).unwrap();
        let slot = events.count_stream().unwrap();
        assert!(events.count_stream().is_err());
        assert!(events.watch(NamePrefix::parse("").unwrap()).is_err());
        drop(slot);
        assert_eq!(events.open_watches(), 1);
        assert!(events.count_stream().is_ok());
    }
}
