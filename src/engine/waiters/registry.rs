//! The registry of this instance's waiters, by name: who waits on which
//! name, whether each is in the line in Redis as far as this instance
//! knows, and the dispatch of what the line says about them to their
//! mailboxes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::mailbox::{Mailbox, WaiterNotice};
use crate::domain::{Kind, Name};
use crate::engine::channel::{LineMessage, NameChannels, Subscription};
use crate::engine::freezes::FreezeBook;
use crate::engine::functions::invoker::Invoker;
use crate::engine::functions::tail::Tail;

/// One waiter, as the dispatcher needs it.
pub(super) struct WaiterSlot {
    pub(super) mailbox: Arc<Mailbox>,
    /// Whether it is in the line in Redis, as far as this instance knows
    /// (joined, and not granted nor superseded since).
    pub(super) in_line: bool,
}

/// This instance's waiters on one name.
pub(super) struct NameWaiters {
    pub(super) kind: Kind,
    pub(super) name: Name,
    pub(super) waiters: HashMap<u64, WaiterSlot>,
    /// A call that may have served the line failed: its messages for this
    /// instance's waiters may be lost, so they ask Redis again once it answers.
    pub(super) unsure: bool,
    /// When a lease of the name ends, as far as this instance knows.
    pub(super) wake_at: Option<Instant>,
    /// Wakes the name's task (earlier expiry, the last waiter gone).
    pub(super) nudge: Arc<Notify>,
    /// Where the subscription of the name's channel stands.
    pub(super) subscribed: watch::Receiver<Subscription>,
}

/// The registry of this instance's waiters, by name channel.
pub(crate) struct Registry {
    /// How this instance calls the library (and its id in Redis's lines).
    pub(super) invoker: Arc<Invoker>,
    /// The freezes, as this instance holds them: a freeze's end serves the
    /// line.
    pub(super) book: Arc<FreezeBook>,
    names: Mutex<HashMap<Arc<str>, NameWaiters>>,
    pub(super) count: AtomicUsize,
    pub(super) max: usize,
    /// Set once the service shuts down (under the `names` lock): no waiter
    /// registers after it, and every one registered before is told.
    pub(super) closed: std::sync::atomic::AtomicBool,
    /// The names' channels, which this registry joins while it has waiters
    /// on a name.
    pub(super) channels: Arc<NameChannels>,
    /// Bumped each time the pub/sub connection is (re)established.
    pub(super) generation: watch::Sender<u64>,
    pub(super) shutdown: CancellationToken,
    pub(super) tasks: tokio_util::task::TaskTracker,
    /// Where a reply's word that a turn notice is due on a name goes (the
    /// notices' deliverer); `None` while notices are off.
    notices_due: Option<UnboundedSender<(Kind, Name)>>,
}

impl Registry {
    /// Starts the registry; it stops on `shutdown`. It hears the names'
    /// channels as one of their listeners.
    pub(crate) fn start(
        invoker: Arc<Invoker>,
        book: Arc<FreezeBook>,
        channels: Arc<NameChannels>,
        max: usize,
        shutdown: CancellationToken,
        tasks: tokio_util::task::TaskTracker,
        notices_due: Option<UnboundedSender<(Kind, Name)>>,
    ) -> Arc<Self> {
        let registry = Arc::new(Self {
            invoker,
            book,
            names: Mutex::default(),
            closed: std::sync::atomic::AtomicBool::new(false),
            count: AtomicUsize::new(0),
            max,
            channels,
            generation: watch::Sender::new(0),
            shutdown,
            tasks,
            notices_due,
        });
        registry.tasks.spawn({
            let registry = registry.clone();
            async move {
                registry.shutdown.cancelled().await;
                registry.close();
            }
        });
        registry
    }

    /// Tells every waiter that the service is shutting down, and lets no
    /// new one register.
    fn close(&self) {
        let names = self.names();
        self.closed.store(true, Ordering::Relaxed);
        for entry in names.values() {
            for slot in entry.waiters.values() {
                slot.mailbox.post(WaiterNotice::ShuttingDown);
            }
        }
    }

    pub(crate) fn instance(&self) -> &str {
        self.invoker.instance()
    }

    /// How many requests wait on this instance now.
    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// The pub/sub connection has been established at least once.
    pub(crate) fn connected(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    pub(super) fn names(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, NameWaiters>> {
        // Every change under this lock is one insert or remove: a panic cannot
        // leave it inconsistent, so poisoning is ignored.
        self.names.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A lease of the name ends in `expires_in`: serve the line then.
    pub(super) fn wake_at(&self, channel: &str, expires_in: Duration) {
        if let Some(entry) = self.names().get_mut(channel) {
            // One millisecond past the expiry, so Redis has let the lease go.
            let at = Instant::now() + expires_in + Duration::from_millis(1);
            if entry.wake_at.is_none_or(|w| at < w) {
                entry.wake_at = Some(at);
                entry.nudge.notify_one();
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
        let channel = self.invoker.keys().name_channel(kind, name);
        for message in tail.messages {
            if message == LineMessage::NoticeDue {
                if let Some(due) = &self.notices_due {
                    let _ = due.send((kind, name.clone()));
                }
                continue;
            }
            self.dispatch(&channel, message);
        }
    }

    /// This instance's waiters on `name` ask Redis again once the name's next
    /// keep-alive succeeds (within about a second of Redis answering again):
    /// a call that may have granted to them failed, and with it the message
    /// of the grant. Not at once: while Redis is away, asking fails too.
    pub(crate) fn ask_again(&self, kind: Kind, name: &Name) {
        let channel = self.invoker.keys().name_channel(kind, name);
        if let Some(entry) = self.names().get_mut(channel.as_str()) {
            entry.unsure = true;
        }
    }

    /// One message about a name's line, from its channel or a function's reply.
    pub(super) fn dispatch(&self, channel: &str, message: LineMessage) {
        let tag = message.tag();
        let notice = match message {
            LineMessage::Granted {
                token,
                expires_at_ms,
                expires_in,
                held,
                ..
            } => {
                // Whoever holds it, the line moves again when it expires
                // (for a provisional grant: when it lapses unconfirmed).
                self.wake_at(channel, expires_in);
                WaiterNotice::Granted {
                    token,
                    expires_at_ms,
                    held,
                }
            }
            LineMessage::Superseded { owner, .. } => WaiterNotice::Superseded { owner },
            LineMessage::EndsSooner { expires_in } => {
                self.wake_at(channel, expires_in);
                return;
            }
            // Only ever in the caller's reply (heard()).
            LineMessage::NoticeDue => return,
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
    pub(super) fn recheck(&self, channel: &str) {
        if let Some(entry) = self.names().get(channel) {
            for slot in entry.waiters.values() {
                slot.mailbox.post(WaiterNotice::Recheck);
            }
        }
    }

    /// Every waiter asks Redis again (after messages may have been missed).
    pub(super) fn recheck_all(&self) {
        for entry in self.names().values() {
            for slot in entry.waiters.values() {
                slot.mailbox.post(WaiterNotice::Recheck);
            }
        }
    }
}
