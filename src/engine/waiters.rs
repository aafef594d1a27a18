//! Local waiters and the one pub/sub subscription that wakes them.
//!
//! A request that may wait registers here under its resource (`lock:NAME`,
//! `sem:NAME`) and sleeps. A release anywhere publishes an event; this
//! instance's [`Subscriber`] receives it and wakes the first local waiter in line
//! for that resource, which tries again. Waiting costs Redis nothing.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::Error;

/// Order keys of waiters that have no ticket from Redis: after every ticket
/// (tickets are microsecond timestamps, far below 2^62), in arrival order.
const LOCAL_ORDER_BASE: u64 = 1 << 62;

/// One waiting request's wake-up signal.
#[derive(Default)]
struct Slot {
    notify: Notify,
    /// Set by a wake-up, cleared when the waiter takes it; a waiter that leaves
    /// with it set passes the wake-up on, so none is lost.
    woken: AtomicBool,
}

/// The registry of this instance's waiters, by resource, in the order in
/// which they should be served.
pub struct Waiters {
    by_resource: Mutex<HashMap<String, BTreeMap<u64, Arc<Slot>>>>,
    next_seq: AtomicU64,
    count: AtomicUsize,
    max: usize,
}

impl Waiters {
    /// A registry that admits at most `max` waiters at once.
    pub fn new(max: usize) -> Self {
        Self {
            by_resource: Mutex::default(),
            next_seq: AtomicU64::new(0),
            count: AtomicUsize::new(0),
            max,
        }
    }

    /// How many requests are waiting now.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Registers a waiter for `resource`, served after those already waiting.
    ///
    /// # Errors
    /// [`Error::TooManyWaiters`] when the cap is reached.
    pub fn register(self: &Arc<Self>, resource: String) -> Result<Registration, Error> {
        if self.count.fetch_add(1, Ordering::Relaxed) >= self.max {
            self.count.fetch_sub(1, Ordering::Relaxed);
            return Err(Error::TooManyWaiters);
        }
        metrics::gauge!("baton_waiters").increment(1.0);
        let order = LOCAL_ORDER_BASE + self.next_seq.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot::default());
        self.lock()
            .entry(resource.clone())
            .or_default()
            .insert(order, slot.clone());
        Ok(Registration {
            waiters: self.clone(),
            resource,
            order,
            slot,
        })
    }

    /// Wakes the first waiter of `resource` that is not awake already.
    pub fn wake_one(&self, resource: &str) {
        let map = self.lock();
        if let Some(queue) = map.get(resource) {
            if let Some(slot) = queue.values().find(|s| !s.woken.load(Ordering::Acquire)) {
                slot.woken.store(true, Ordering::Release);
                slot.notify.notify_one();
            }
        }
    }

    /// Wakes every waiter, e.g. after events may have been missed.
    pub fn wake_all(&self) {
        for slot in self.lock().values().flat_map(BTreeMap::values) {
            slot.woken.store(true, Ordering::Release);
            slot.notify.notify_one();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, BTreeMap<u64, Arc<Slot>>>> {
        // A panic while holding this lock cannot leave the map inconsistent
        // (every change is one insert or remove), so poisoning is ignored.
        self.by_resource.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A waiter's place in line; leaving it (drop) removes the waiter.
pub struct Registration {
    waiters: Arc<Waiters>,
    resource: String,
    order: u64,
    slot: Arc<Slot>,
}

impl Registration {
    /// Resolves once the waiter is woken (at once if it was woken meanwhile).
    pub async fn woken(&self) {
        self.slot.notify.notified().await;
        self.slot.woken.store(false, Ordering::Release);
    }

    /// Moves the waiter to the place Redis gave it (a semaphore queue ticket).
    pub fn reorder(&mut self, order: u64) {
        if order == self.order {
            return;
        }
        let mut map = self.waiters.lock();
        if let Some(queue) = map.get_mut(&self.resource) {
            queue.remove(&self.order);
            queue.insert(order, self.slot.clone());
        }
        self.order = order;
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let pass_on = {
            let mut map = self.waiters.lock();
            if let Some(queue) = map.get_mut(&self.resource) {
                queue.remove(&self.order);
                if queue.is_empty() {
                    map.remove(&self.resource);
                }
            }
            self.slot.woken.load(Ordering::Acquire)
        };
        // Woken but gone before trying: the next in line gets the wake-up.
        if pass_on {
            self.waiters.wake_one(&self.resource);
        }
        self.waiters.count.fetch_sub(1, Ordering::Relaxed);
        metrics::gauge!("baton_waiters").decrement(1.0);
    }
}

/// The instance's one subscription to release events.
pub struct Subscriber;

impl Subscriber {
    /// Subscribes to `channel` and wakes waiters on every event until `stop`,
    /// reconnecting after failures. `ready` is notified after each successful
    /// subscription.
    pub async fn run(
        client: redis::Client,
        channel: String,
        waiters: Arc<Waiters>,
        stop: CancellationToken,
        ready: Arc<Notify>,
    ) {
        let mut backoff = Duration::from_millis(50);
        loop {
            let session = async {
                let mut pubsub = client.get_async_pubsub().await?;
                pubsub.subscribe(&channel).await?;
                Ok::<_, redis::RedisError>(pubsub)
            };
            let connected = tokio::select! {
                () = stop.cancelled() => return,
                r = tokio::time::timeout(Duration::from_secs(2), session) => r,
            };
            match connected {
                Ok(Ok(pubsub)) => {
                    backoff = Duration::from_millis(50);
                    tracing::debug!(channel, "subscribed to release events");
                    // Events may have been missed while we were not subscribed.
                    waiters.wake_all();
                    ready.notify_waiters();
                    let mut stream = pubsub.into_on_message();
                    loop {
                        tokio::select! {
                            () = stop.cancelled() => return,
                            msg = stream.next() => match msg {
                                Some(msg) => {
                                    if let Ok(resource) = std::str::from_utf8(msg.get_payload_bytes()) {
                                        waiters.wake_one(resource);
                                    }
                                }
                                None => break,
                            },
                        }
                    }
                    tracing::warn!("lost the subscription to release events; reconnecting");
                    // Waiters try again now: they get Redis's answer (or 503)
                    // instead of sleeping through an outage.
                    waiters.wake_all();
                }
                Ok(Err(err)) => tracing::warn!(%err, "cannot subscribe to release events"),
                Err(_) => tracing::warn!("subscribing to release events timed out"),
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wakes_the_first_waiter_only() {
        let waiters = Arc::new(Waiters::new(10));
        let first = waiters.register("lock:a".into()).unwrap();
        let second = waiters.register("lock:a".into()).unwrap();
        waiters.wake_one("lock:a");
        tokio::time::timeout(Duration::from_millis(100), first.woken())
            .await
            .expect("first waiter woken");
        assert!(
            tokio::time::timeout(Duration::from_millis(20), second.woken())
                .await
                .is_err(),
            "second waiter must sleep"
        );
    }

    #[tokio::test]
    async fn a_woken_waiter_that_leaves_passes_the_wake_up_on() {
        let waiters = Arc::new(Waiters::new(10));
        let first = waiters.register("lock:a".into()).unwrap();
        let second = waiters.register("lock:a".into()).unwrap();
        waiters.wake_one("lock:a");
        drop(first);
        tokio::time::timeout(Duration::from_millis(100), second.woken())
            .await
            .expect("second waiter woken");
    }

    #[tokio::test]
    async fn reorder_follows_redis_tickets() {
        let waiters = Arc::new(Waiters::new(10));
        let mut late = waiters.register("sem:a".into()).unwrap();
        let mut early = waiters.register("sem:a".into()).unwrap();
        late.reorder(20);
        early.reorder(10);
        waiters.wake_one("sem:a");
        tokio::time::timeout(Duration::from_millis(100), early.woken())
            .await
            .expect("lowest ticket woken first");
    }

    #[test]
    fn caps_the_number_of_waiters_and_forgets_those_gone() {
        let waiters = Arc::new(Waiters::new(1));
        let one = waiters.register("lock:a".into()).unwrap();
        assert!(matches!(
            waiters.register("lock:b".into()),
            Err(Error::TooManyWaiters)
        ));
        drop(one);
        assert!(waiters.is_empty());
        assert!(waiters.lock().is_empty());
        assert!(waiters.register("lock:b".into()).is_ok());
    }
}
