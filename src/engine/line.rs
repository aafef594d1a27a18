//! This instance's side of the waiting lines: its waiters by name, one
//! keep-alive task per name while it has waiters there, and the one pub/sub
//! connection that hears about grants.
//!
//! The line itself lives in Redis (`functions/core/`). A waiter joins it with one
//! script and then sleeps: the script that ends a lease grants it to the head
//! of the line and publishes the grant on the name's channel, which this
//! instance subscribes to only while it has a waiter on that name. The
//! per-name task keeps this instance's waiters alive in Redis with one call
//! about every second (however many wait), has them ask again when the line
//! lost them (pruned while this instance looked dead, or its keys lost), and
//! serves the line when a lease of the name expires.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::connection::{PubSub, PubSubNotice, PubSubNotices};
use super::functions::caller::Caller;
use super::functions::keep_alive::KeepAlive;
use super::functions::message::Message;
use super::functions::tail::Tail;
use super::Error;
use crate::domain::{Kind, Name, Owner};

/// How often an instance tells Redis that its waiters on a name are alive.
const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(1);

/// What a waiter hears while it waits.
#[derive(Debug)]
pub(crate) enum Notice {
    /// The line granted it a lease: held until `expires_at_ms` when `held`,
    /// else provisional, to be confirmed before it is answered.
    Granted {
        token: u64,
        expires_at_ms: u64,
        held: bool,
    },
    /// A newer `newest_wins` request took its place.
    Superseded { owner: Option<Owner> },
    /// Messages may have been missed: ask Redis again.
    Recheck,
    /// The service is shutting down: stop waiting.
    ShuttingDown,
}

/// One waiter, as the dispatcher needs it.
struct Slot {
    mailbox: Arc<Mailbox>,
    /// Whether it is in the line in Redis, as far as this instance knows
    /// (joined, and not granted nor superseded since).
    in_line: bool,
}

/// A waiter's notices: the one that ends its wait (a grant or superseding),
/// and whether it should ask Redis again. A few dozen bytes, where a channel
/// would allocate room for 32 notices for every waiter.
#[derive(Default)]
struct Mailbox {
    mail: Mutex<Mail>,
    ready: Notify,
}

#[derive(Default)]
struct Mail {
    last: Option<Notice>,
    recheck: bool,
}

impl Mailbox {
    fn post(&self, notice: Notice) {
        {
            // One assignment under the lock: poisoning cannot leave it half done.
            let mut mail = self.mail.lock().unwrap_or_else(|e| e.into_inner());
            match notice {
                Notice::Recheck => mail.recheck = true,
                // The first that ends the wait stays.
                ending => {
                    mail.last.get_or_insert(ending);
                }
            }
        }
        self.ready.notify_one();
    }

    async fn next(&self) -> Notice {
        loop {
            {
                let mut mail = self.mail.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(notice) = mail.last.take() {
                    return notice;
                }
                if std::mem::take(&mut mail.recheck) {
                    return Notice::Recheck;
                }
            }
            // A post between the check and here leaves a permit: not missed.
            self.ready.notified().await;
        }
    }
}

/// This instance's waiters on one name.
struct NameLine {
    kind: Kind,
    name: Name,
    waiters: HashMap<u64, Slot>,
    /// A call that may have served the line failed: its messages for this
    /// instance's waiters may be lost, so they ask Redis again once it answers.
    unsure: bool,
    /// When a lease of the name ends, as far as this instance knows.
    wake_at: Option<Instant>,
    /// Wakes the name's task (earlier expiry, the last waiter gone).
    nudge: Arc<Notify>,
    /// The subscription generation this name is subscribed under (0: not yet).
    subscribed: watch::Sender<u64>,
}

/// The registry of this instance's waiters, by name channel.
pub(crate) struct Line {
    /// How this instance calls the library (and its id in Redis's lines).
    caller: Arc<Caller>,
    names: Mutex<HashMap<Arc<str>, NameLine>>,
    count: AtomicUsize,
    max: usize,
    /// Set once the service shuts down (under the `names` lock): no waiter
    /// registers after it, and every one registered before is told.
    closed: std::sync::atomic::AtomicBool,
    /// The instance's subscription connection (the names' channels only).
    pubsub: PubSub,
    /// Bumped each time the pub/sub connection is (re)established.
    generation: watch::Sender<u64>,
    shutdown: CancellationToken,
    tasks: tokio_util::task::TaskTracker,
}

/// A waiter's registration; dropping it takes the waiter out of the registry.
pub(crate) struct Registration {
    line: Arc<Line>,
    /// The name's channel, shared with the registry's key.
    channel: Arc<str>,
    kind: Kind,
    pub tag: u64,
    mailbox: Arc<Mailbox>,
}

impl Line {
    /// Starts the registry and its pub/sub connection; both stop on `shutdown`.
    pub(crate) fn start(
        caller: Arc<Caller>,
        max: usize,
        shutdown: CancellationToken,
        tasks: tokio_util::task::TaskTracker,
    ) -> Arc<Self> {
        let (pubsub, notices) = caller.store().pubsub(shutdown.clone());
        let line = Arc::new(Self {
            caller,
            names: Mutex::default(),
            closed: std::sync::atomic::AtomicBool::new(false),
            count: AtomicUsize::new(0),
            max,
            pubsub,
            generation: watch::Sender::new(0),
            shutdown,
            tasks,
        });
        line.tasks.spawn(subscriber(line.clone(), notices));
        line.tasks.spawn({
            let line = line.clone();
            async move {
                line.shutdown.cancelled().await;
                line.close();
            }
        });
        line
    }

    /// Tells every waiter that the service is shutting down, and lets no
    /// new one register.
    fn close(&self) {
        let names = self.names();
        self.closed.store(true, Ordering::Relaxed);
        for line in names.values() {
            for slot in line.waiters.values() {
                slot.mailbox.post(Notice::ShuttingDown);
            }
        }
    }

    pub(crate) fn instance(&self) -> &str {
        self.caller.instance()
    }

    /// How many requests wait on this instance now.
    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// The pub/sub connection has been established at least once.
    pub(crate) fn connected(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    fn names(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, NameLine>> {
        // Every change under this lock is one insert or remove: a panic cannot
        // leave it inconsistent, so poisoning is ignored.
        self.names.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a waiter for `id` on `name`, starting the name's task if it
    /// is the first.
    ///
    /// # Errors
    /// [`Error::TooManyWaiters`] when the cap is reached;
    /// [`Error::ShuttingDown`] once the service is shutting down.
    pub(crate) fn register(
        self: &Arc<Self>,
        kind: Kind,
        name: &Name,
        tag: u64,
    ) -> Result<Registration, Error> {
        if self.count.fetch_add(1, Ordering::Relaxed) >= self.max {
            self.count.fetch_sub(1, Ordering::Relaxed);
            return Err(Error::TooManyWaiters);
        }
        crate::telemetry::record_waiting(kind.as_str(), 1.0);
        let channel = self.caller.keys().name_channel(kind, name);
        let mailbox = Arc::new(Mailbox::default());
        let mut names = self.names();
        if self.closed.load(Ordering::Relaxed) {
            drop(names);
            self.count.fetch_sub(1, Ordering::Relaxed);
            crate::telemetry::record_waiting(kind.as_str(), -1.0);
            return Err(Error::ShuttingDown);
        }
        let channel = match names.get_key_value(channel.as_str()) {
            Some((shared, _)) => shared.clone(),
            None => Arc::from(channel),
        };
        let entry = names.entry(channel.clone()).or_insert_with(|| {
            let line = NameLine {
                kind,
                name: name.clone(),
                waiters: HashMap::new(),
                unsure: false,
                wake_at: None,
                nudge: Arc::new(Notify::new()),
                subscribed: watch::Sender::new(0),
            };
            self.tasks.spawn(keep_alive(
                self.clone(),
                channel.clone(),
                line.nudge.clone(),
            ));
            line
        });
        entry.waiters.insert(
            tag,
            Slot {
                mailbox: mailbox.clone(),
                in_line: false,
            },
        );
        drop(names);
        Ok(Registration {
            line: self.clone(),
            channel,
            kind,
            tag,
            mailbox,
        })
    }

    /// A lease of the name ends in `expires_in`: serve the line then.
    fn wake_at(&self, channel: &str, expires_in: Duration) {
        if let Some(line) = self.names().get_mut(channel) {
            // One millisecond past the expiry, so Redis has let the lease go.
            let at = Instant::now() + expires_in + Duration::from_millis(1);
            if line.wake_at.is_none_or(|w| at < w) {
                line.wake_at = Some(at);
                line.nudge.notify_one();
            }
        }
    }

    /// What a serving function's reply ends with: the expired leases it
    /// noticed, counted and audited, and the messages for this instance's
    /// waiters, delivered as the name's channel would have.
    pub(crate) fn heard(&self, kind: Kind, name: &Name, tail: Tail) {
        tail.note_expired(kind, name);
        if tail.messages.is_empty() {
            return;
        }
        let channel = self.caller.keys().name_channel(kind, name);
        for message in tail.messages {
            self.dispatch(&channel, message);
        }
    }

    /// This instance's waiters on `name` ask Redis again once the name's next
    /// keep-alive succeeds (within about a second of Redis answering again):
    /// a call that may have granted to them failed, and with it the message
    /// of the grant. Not at once: while Redis is away, asking fails too.
    pub(crate) fn ask_again(&self, kind: Kind, name: &Name) {
        let channel = self.caller.keys().name_channel(kind, name);
        if let Some(line) = self.names().get_mut(channel.as_str()) {
            line.unsure = true;
        }
    }

    /// One message about a name's line, from its channel or a function's reply.
    fn dispatch(&self, channel: &str, message: Message) {
        let tag = message.tag();
        let notice = match message {
            Message::Granted {
                token,
                expires_at_ms,
                expires_in,
                held,
                ..
            } => {
                // Whoever holds it, the line moves again when it expires
                // (for a provisional grant: when it lapses unconfirmed).
                self.wake_at(channel, expires_in);
                Notice::Granted {
                    token,
                    expires_at_ms,
                    held,
                }
            }
            Message::Superseded { owner, .. } => Notice::Superseded { owner },
            Message::EndsSooner { expires_in } => {
                self.wake_at(channel, expires_in);
                return;
            }
        };
        let mut names = self.names();
        let slot = tag.and_then(|tag| names.get_mut(channel)?.waiters.get_mut(&tag));
        if let Some(slot) = slot {
            // Granted or superseded, it is out of the line in Redis now.
            slot.in_line = false;
            slot.mailbox.post(notice);
        }
    }

    /// The waiters of one name ask Redis again.
    fn recheck(&self, channel: &str) {
        if let Some(line) = self.names().get(channel) {
            for slot in line.waiters.values() {
                slot.mailbox.post(Notice::Recheck);
            }
        }
    }

    /// Every waiter asks Redis again (after messages may have been missed).
    fn recheck_all(&self) {
        for line in self.names().values() {
            for slot in line.waiters.values() {
                slot.mailbox.post(Notice::Recheck);
            }
        }
    }
}

impl Registration {
    /// Resolves once the name's channel is subscribed, or after `at_most`.
    pub(crate) async fn subscribed(&self, at_most: Duration) {
        let subscribed = self
            .line
            .names()
            .get(&self.channel)
            .map(|line| line.subscribed.subscribe());
        if let Some(mut subscribed) = subscribed {
            let _ = tokio::time::timeout(at_most, subscribed.wait_for(|g| *g > 0)).await;
        }
    }

    /// The next notice for this waiter.
    pub(crate) async fn notice(&mut self) -> Notice {
        self.mailbox.next().await
    }

    /// The waiter is in the line in Redis (its call just said so); a lease
    /// of the name ends in `next_expiry_in`, when the name's task serves
    /// the line.
    pub(crate) fn in_line(&self, next_expiry_in: Option<Duration>) {
        if let Some(slot) = self
            .line
            .names()
            .get_mut(&self.channel)
            .and_then(|line| line.waiters.get_mut(&self.tag))
        {
            slot.in_line = true;
        }
        if let Some(expires_in) = next_expiry_in {
            self.line.wake_at(&self.channel, expires_in);
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(line) = self.line.names().get_mut(&self.channel) {
            line.waiters.remove(&self.tag);
            // The name's task ends once nothing is left for it to do.
            if line.waiters.is_empty() {
                line.nudge.notify_one();
            }
        }
        self.line.count.fetch_sub(1, Ordering::Relaxed);
        crate::telemetry::record_waiting(self.kind.as_str(), -1.0);
    }
}

/// A new waiter's tag: a number naming it among this instance's waiters.
pub(crate) fn new_tag() -> u64 {
    // The low 53 bits: Lua keeps them exact when it copies the tag around.
    let bytes = *uuid::Uuid::new_v4().as_bytes();
    u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) >> 11
}

/// The task of one name on this instance: keeps its waiters alive, has them
/// ask again when the line lost them, serves the line when a lease expires;
/// ends (unsubscribing) when the name has no waiter.
async fn keep_alive(line: Arc<Line>, channel: Arc<str>, nudge: Arc<Notify>) {
    let Some((kind, name)) = line.names().get(&channel).map(|l| (l.kind, l.name.clone())) else {
        return;
    };
    let mut generation = line.generation.subscribe();
    let mut next_tick = Instant::now();
    // When the line last lost waiters, as this task's keep-alives heard it.
    let mut heard_lost = None;
    // Subscribed before the first waiter joins the line (it waits for this);
    // a subscription made later is followed by a re-check of every waiter.
    line.pubsub.subscribe_shard(&channel).await;
    if let Some(entry) = line.names().get(&channel) {
        entry.subscribed.send_replace(1);
    }
    loop {
        generation.borrow_and_update();
        let wake_at = {
            let mut names = line.names();
            match names.get_mut(&channel) {
                None => return,
                Some(entry) if entry.waiters.is_empty() => {
                    names.remove(&channel);
                    None
                }
                Some(entry) => Some(entry.wake_at),
            }
        };
        let Some(wake_at) = wake_at else {
            line.pubsub.unsubscribe_shard(&channel).await;
            // A waiter that came meanwhile has a new task, whose subscription
            // this may have undone: subscribe again, and have its waiters ask
            // Redis in case a message was missed.
            if line.names().contains_key(&channel) {
                line.pubsub.subscribe_shard(&channel).await;
                line.recheck(&channel);
            }
            return;
        };
        let due = wake_at.map_or(next_tick, |w| w.min(next_tick));
        tokio::select! {
            biased;
            () = line.shutdown.cancelled() => return,
            r = generation.changed() => {
                if r.is_err() {
                    return;
                }
                continue;
            }
            () = nudge.notified() => continue,
            () = tokio::time::sleep_until(due) => {}
        }
        let in_line = {
            let mut names = line.names();
            let Some(entry) = names.get_mut(&channel) else {
                return;
            };
            if entry.wake_at.is_some_and(|w| w <= Instant::now()) {
                entry.wake_at = None;
            }
            entry.waiters.values().filter(|slot| slot.in_line).count()
        };
        let beat = KeepAlive {
            in_line,
            heard_lost,
        };
        let call = line.caller.call(kind, &name, &beat);
        match line.caller.run_serving::<KeepAlive>(&call).await {
            Ok((beat, tail)) => {
                line.heard(kind, &name, tail);
                heard_lost = Some(beat.lost);
                let unsure = line
                    .names()
                    .get_mut(&channel)
                    .is_some_and(|entry| std::mem::take(&mut entry.unsure));
                if unsure || beat.missing {
                    // Messages may be lost, or the line lost waiters of this
                    // instance: they ask again (and rejoin).
                    line.recheck(&channel);
                }
                next_tick = Instant::now() + KEEP_ALIVE_EVERY;
                if let Some(expires_in) = beat.next_expiry_in {
                    line.wake_at(&channel, expires_in);
                }
            }
            Err(err) => {
                tracing::debug!(%err, "keep-alive failed; retrying");
                if let Some(entry) = line.names().get_mut(&channel) {
                    // It may have served the line to this instance's waiters.
                    entry.unsure = true;
                }
                next_tick = Instant::now() + Duration::from_millis(250);
            }
        }
    }
}

/// Hands the messages of the names' channels to the registry; when messages
/// may have been missed (a new connection), every waiter asks Redis again.
async fn subscriber(line: Arc<Line>, mut notices: PubSubNotices) {
    let mut generation = 0u64;
    loop {
        let notice = tokio::select! {
            () = line.shutdown.cancelled() => return,
            notice = notices.recv() => notice,
        };
        match notice {
            Some(PubSubNotice::Message { channel, payload }) => {
                match std::str::from_utf8(&payload).ok().and_then(Message::decode) {
                    Some(message) => line.dispatch(&channel, message),
                    None => tracing::debug!("unknown message on a name's channel"),
                }
            }
            // Waiters keep their place; they ask again once resubscribed.
            Some(PubSubNotice::Lost) => {}
            Some(PubSubNotice::Subscribed) => {
                generation += 1;
                line.generation.send_replace(generation);
                line.recheck_all();
            }
            None => return,
        }
    }
}
