//! A waiter's registration: how a waiter joins the registry, its handle on
//! it for the length of its wait, and the tag that names it among this
//! instance's waiters.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::mailbox::{Mailbox, WaiterNotice};
use super::registry::{NameWaiters, Registry, WaiterSlot};
use crate::domain::{Kind, Name};
use crate::engine::channel::Subscription;
use crate::engine::error::Error;

impl Registry {
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
        let channel = self.invoker.keys().name_channel(kind, name);
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
            let waiters = NameWaiters {
                kind,
                name: name.clone(),
                waiters: HashMap::new(),
                unsure: false,
                wake_at: None,
                nudge: Arc::new(Notify::new()),
                subscribed: self.channels.join(&channel),
            };
            self.tasks.spawn(
                self.clone()
                    .keep_alive(channel.clone(), waiters.nudge.clone()),
            );
            waiters
        });
        entry.waiters.insert(
            tag,
            WaiterSlot {
                mailbox: mailbox.clone(),
                in_line: false,
            },
        );
        drop(names);
        Ok(Registration {
            registry: self.clone(),
            channel,
            kind,
            tag,
            mailbox,
        })
    }
}

/// A waiter's registration; dropping it takes the waiter out of the registry.
pub(crate) struct Registration {
    registry: Arc<Registry>,
    /// The name's channel, shared with the registry's key.
    channel: Arc<str>,
    kind: Kind,
    pub tag: u64,
    mailbox: Arc<Mailbox>,
}

impl Registration {
    /// Resolves once the name's channel is subscribed, or after `at_most`.
    pub(crate) async fn subscribed(&self, at_most: Duration) {
        let subscribed = self
            .registry
            .names()
            .get(&self.channel)
            .map(|entry| entry.subscribed.clone());
        if let Some(mut subscribed) = subscribed {
            // Answered, either way: a subscription that failed is made again
            // with the connection, and every waiter asks Redis then.
            let wait = subscribed.wait_for(|s| *s != Subscription::Asked);
            let _ = tokio::time::timeout(at_most, wait).await;
        }
    }

    /// The next notice for this waiter.
    pub(crate) async fn notice(&mut self) -> WaiterNotice {
        self.mailbox.next().await
    }

    /// The waiter is in the line in Redis (its call just said so); a lease
    /// of the name ends in `next_expiry_in`, when the name's task serves
    /// the line.
    pub(crate) fn in_line(&self, next_expiry_in: Option<Duration>) {
        if let Some(slot) = self
            .registry
            .names()
            .get_mut(&self.channel)
            .and_then(|entry| entry.waiters.get_mut(&self.tag))
        {
            slot.in_line = true;
        }
        if let Some(expires_in) = next_expiry_in {
            self.registry.wake_at(&self.channel, expires_in);
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(entry) = self.registry.names().get_mut(&self.channel) {
            entry.waiters.remove(&self.tag);
            // The name's task ends once nothing is left for it to do.
            if entry.waiters.is_empty() {
                entry.nudge.notify_one();
            }
        }
        self.registry.count.fetch_sub(1, Ordering::Relaxed);
        crate::telemetry::record_waiting(self.kind.as_str(), -1.0);
    }
}

/// A new waiter's tag: a number naming it among this instance's waiters.
pub(crate) fn new_tag() -> u64 {
    // The low 53 bits: Lua keeps them exact when it copies the tag around.
    let bytes = *uuid::Uuid::new_v4().as_bytes();
    u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) >> 11
}
