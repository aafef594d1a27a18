//! Change events: every lock and semaphore change made on any instance,
//! fanned out to this instance's watchers (`GET /events`, the dashboard, a
//! wait's progress).
//!
//! The functions publish a change event only while someone listens, as the
//! calling instance knows it (`audience.rs`); one subscription per instance
//! hears them (`subscription.rs`, which also makes sure that every instance
//! publishes before a new watcher reads anything), and hands each to the
//! watchers (`fan_out.rs`) as a [`ChangeEvent`] (`change.rs`), a type with
//! no field for a lease id.

mod audience;
mod change;
mod fan_out;
mod subscription;

pub(in crate::engine) use audience::Audience;
pub use change::{Change, ChangeEvent, WatchNotice};
pub use fan_out::{Events, StreamSlot, TooManyWatches, Watcher};
