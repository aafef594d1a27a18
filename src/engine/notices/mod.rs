//! Turn notices (docs/tickets.md): a ticket granted while nobody waits on it
//! tells the URL it gave (`notify`) that its turn came. The grant records
//! the notice as due in the name's slot (`core/tickets.lua`) and tells the
//! instance that made the call, which delivers it at once; every instance
//! also looks, now and then, at the names an index lists, so a notice whose
//! instance died is delivered by another. Whoever delivers claims the notice
//! first (`notice.lua`): one delivery at a time, at least once.
//!
//! - `body.rs`: what is sent, and its signature.
//! - `post.rs`: one delivery over HTTP, and why it failed.
//! - `deliverer.rs`: the rounds, the retries and the look at the index.

mod body;
mod deliverer;
mod post;

pub use body::{signature, NoticeBody};
pub(in crate::engine) use deliverer::Notices;
