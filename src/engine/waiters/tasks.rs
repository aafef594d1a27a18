//! What serves this instance's waiters: a task per name while it has
//! waiters there, which keeps them alive in the line with one call
//! about every second (however many wait), has them ask again when the
//! line lost them (pruned while this instance looked dead, or its keys
//! lost) and serves the line when a lease of the name expires; and what the
//! registry does as a listener of the names' channels.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::registry::Registry;
use crate::engine::channel::{Listener, NameMessage};
use crate::engine::freezes::{wall_clock_ms, FRESH_WAIT};
use crate::engine::functions::keep_alive::KeepAlive;

/// How often an instance tells Redis that its waiters on a name are alive.
const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(1);

impl Registry {
    /// The task of one name on this instance: keeps its waiters alive, has them
    /// ask again when the line lost them, serves the line when a lease expires;
    /// ends (unsubscribing) when the name has no waiter.
    pub(super) async fn keep_alive(self: Arc<Self>, channel: Arc<str>, nudge: Arc<Notify>) {
        let Some((kind, name)) = self
            .names()
            .get(&channel)
            .map(|entry| (entry.kind, entry.name.clone()))
        else {
            return;
        };
        let mut generation = self.generation.subscribe();
        let mut next_tick = Instant::now();
        // When the line last lost waiters, as this task's keep-alives heard it.
        let mut heard_lost = None;
        // Whether the last keep-alive was a second one, made at once because
        // the first was held back by a list of freezes gone stale.
        let mut again = false;
        loop {
            generation.borrow_and_update();
            let wake_at = {
                let mut names = self.names();
                match names.get_mut(&channel) {
                    None => return,
                    Some(entry) if entry.waiters.is_empty() => {
                        // A waiter that comes after this has a new task, and
                        // joins the channel again.
                        names.remove(&channel);
                        self.channels.leave(&channel);
                        None
                    }
                    Some(entry) => Some(entry.wake_at),
                }
            };
            let Some(wake_at) = wake_at else {
                return;
            };
            let due = wake_at.map_or(next_tick, |w| w.min(next_tick));
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => return,
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
                let mut names = self.names();
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
            let call = self.invoker.call(kind, &name, &beat);
            match self.invoker.run_serving::<KeepAlive>(&call).await {
                Ok((beat, tail)) => {
                    self.heard(kind, &name, tail);
                    heard_lost = Some(beat.lost);
                    let unsure = self
                        .names()
                        .get_mut(&channel)
                        .is_some_and(|entry| std::mem::take(&mut entry.unsure));
                    if unsure || beat.missing {
                        // Messages may be lost, or the line lost waiters of this
                        // instance: they ask again (and rejoin).
                        self.recheck(&channel);
                    }
                    next_tick = Instant::now() + KEEP_ALIVE_EVERY;
                    // Held back, and no freeze this instance knows of holds
                    // the name: the list it carried was stale (nobody here
                    // called for a while, and lists are checked only when
                    // calls need them). Checked now, and the line served
                    // again at once, once.
                    let stale = beat.held_back && !again && self.thaw_in(kind, &name).is_none();
                    again = stale;
                    if stale {
                        self.book.ready(FRESH_WAIT).await;
                        next_tick = Instant::now();
                    }
                    if let Some(expires_in) = beat.next_expiry_in {
                        self.wake_at(&channel, expires_in);
                    }
                    if let Some(thaw_in) = self.thaw_in(kind, &name) {
                        // The line is served when the freeze ends, not up
                        // to a second later (Redis judges the window again).
                        self.wake_at(&channel, thaw_in);
                    }
                }
                Err(err) => {
                    tracing::debug!(%err, "keep-alive failed; retrying");
                    if let Some(entry) = self.names().get_mut(&channel) {
                        // It may have served the line to this instance's waiters.
                        entry.unsure = true;
                    }
                    next_tick = Instant::now() + Duration::from_millis(250);
                }
            }
        }
    }

    /// How long until the freeze that holds the `kind` named `name` ends, as
    /// this instance knows it; `None` when none holds it.
    fn thaw_in(&self, kind: crate::domain::Kind, name: &crate::domain::Name) -> Option<Duration> {
        let now = wall_clock_ms();
        let freeze = self
            .book
            .for_name(kind, name.as_str(), now)
            .filter(|f| f.holds(now))?;
        // A little after, for the clocks of this instance and Redis.
        u64::try_from(freeze.window.end_ms - now + 10)
            .ok()
            .map(Duration::from_millis)
    }
}

impl Listener for Registry {
    /// A message about a name's line goes to its waiters here.
    fn heard(&self, channel: &str, message: &NameMessage) {
        if let NameMessage::Line(message) = message {
            self.dispatch(channel, message.clone());
        }
    }

    /// Messages may have been missed: every waiter asks Redis again.
    fn resubscribed(&self) {
        self.generation.send_modify(|generation| *generation += 1);
        self.recheck_all();
    }
}
