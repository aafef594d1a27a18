//! Freezes as this instance keeps them: the list in Redis made, read and
//! deleted ([`Freezes`]), and the task that keeps this instance's copy
//! (`freeze_book.rs`) in step: it hears every change on a channel and
//! reads the list again then (and every few seconds, should a message be
//! lost), so a new or deleted freeze applies everywhere within a second.

mod admin;
mod follow;

pub use admin::{Freezes, Put, MAX_FREEZES_PER_NAME};
pub(in crate::engine) use follow::follow;
