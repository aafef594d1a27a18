//! The holders' own streams on this instance: a holder follows its lease
//! (`GET /locks/{name}/{id}/events`) and hears at once, from any instance,
//! that it was refreshed, released or force-released, that someone asks it
//! to yield, that it is about to expire, and that it did (once Redis says
//! so).
//!
//! What it costs: nothing for a lease nobody follows. A stream's instance
//! marks the name followed in Redis (`follow.lua`: a field of the owners
//! hash with a time limit, renewed every 10 s while a
//! stream is open on the name), and only then do the calls that change a
//! lease publish a word about it on the name's channel (`r`, `l`, `f`, `y`:
//! `channel/message.rs` decodes them); each instance hears them on its one
//! subscription to the names' channels (`channel/`), joined to a name's
//! channel while it has a stream there (`followers.rs`), and hands them to
//! the streams' mailboxes.
//! An expiry is nobody's call: each stream keeps a timer at its lease's
//! expiry and asks Redis then (`stream.rs`), and says `lost` only once Redis
//! confirms that the lease is gone.

mod event;
mod followers;
mod stream;

pub use event::{HolderEvent, LostReason};
pub(in crate::engine) use followers::Followers;
pub use stream::HolderStream;
