//! Freezes, in one room: this instance's list of them, held in memory so
//! that no request asks Redis whether its name is frozen (`book.rs`, a
//! freeze's windows in `timeline.rs`, the clock and the freshness a call
//! needs in `clock.rs`); their own function in baton's library
//! (`freezes.lua`, its typed side `function.rs`), by which the list in
//! Redis is made, read and deleted ([`Freezes`], `admin.rs`); and the task
//! that keeps this instance's copy in step (`follow.rs`): it hears every
//! change on a channel and reads the list again then (and every few
//! seconds, should a message be lost), so a new or deleted freeze applies
//! everywhere within a second.
//!
//! The library joins `freezes.lua` after the lease core like any function
//! (it uses the core's Redis clock, nothing else of it); every other call
//! carries its name's freeze through the invoker's `FreezeField`, which the
//! book implements: `functions/` takes only `freezes.lua`'s text from here
//! (`library.rs`), and this room uses the invoker.

mod admin;
mod book;
#[cfg(test)]
mod book_tests;
mod clock;
mod follow;
mod function;
mod timeline;

pub use admin::{Freezes, Put, MAX_FREEZES_PER_NAME};
pub use book::FreezeBook;
pub use clock::{wall_clock_ms, FRESH_WAIT};
pub(in crate::engine) use follow::follow;
pub use timeline::{NameFreeze, Timeline};
