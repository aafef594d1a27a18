//! The Redis core: locks and semaphores as one lease core over one function
//! of baton's Redis Functions library per operation, and the waiting line
//! that lives in Redis. Nothing here knows about HTTP; the routes turn its
//! results into responses.
//!
//! Its rooms, from the bottom up (each uses only those below it):
//!
//! - `error.rs`, `model/` (a name's history in `model/history.rs`), `keys.rs`: what the core reports and answers
//!   with, and the name of every Redis key and channel.
//! - `connection/`: the connection to Redis in each deployment, its calls and
//!   its subscriptions.
//! - `channel/`: the names' channels as this instance hears them: one
//!   subscription per channel, one decoder for every message the library
//!   writes, handed to the waiters and the holders' streams, its listeners.
//! - [`events`]: change events, fanned out to this instance's watchers, and
//!   whether anyone listens (so that calls publish only then).
//! - `functions/`: baton's library, the lease core (`core/*.lua`) and one
//!   function per operation, each with its typed Rust side, and the one
//!   invoker that makes every call (with the freeze a name's calls carry,
//!   from the book `freezes/` keeps).
//! - `freezes/`: the freezes in one room: this instance's copy of them
//!   (the book, which every call of a name asks for the window it
//!   carries), their function in the library, and the task that keeps the
//!   copy in step.
//! - [`following`]: the holders' own streams on this instance, told of
//!   their leases by the name's channel while someone follows.
//! - `waiters/`: this instance's waiters, what each hears, and the tasks
//!   that keep them alive in the line; [`notices`]:
//!   tickets' turn notices, delivered by whichever instance claims them.
//! - `handle.rs`: the [`Engine`]: one instance's core, its start and stop.
//! - `leases/`: the operations of both kinds ([`Leases`]): acquiring (at
//!   once or by waiting in line), refresh, check, release, force-release,
//!   status, listing, and a waiter's place.
//! - `claims/`: several names held together ([`Claims`]), taken one by one
//!   in one global order through the names' own lines.

mod channel;
mod claims;
mod connection;
mod error;
pub mod events;
pub mod following;
mod freezes;
mod functions;
mod handle;
mod keys;
mod leases;
mod model;
pub mod notices;
mod waiters;

pub use claims::{Claim, ClaimProgress, ClaimRefused, ClaimWaiting, Claims, Refreshed};
pub use error::Error;
pub use freezes::{
    wall_clock_ms, FreezeBook, Freezes, NameFreeze, Put, Timeline, MAX_FREEZES_PER_NAME,
};
pub use functions::library::{call_context, function_name, history_terms, library_code};
pub use handle::{Engine, JOINS_AT_ONCE, READS_AT_ONCE};
pub use keys::Keys;
pub use leases::{Acquiring, InLine, Leases, PageCursor, PageLimit, Shown, TicketWait, Waiting};
pub use model::{
    Busy, FrozenBy, History, HistoryCursor, HistoryEntry, HistoryLimit, Holder, Lease, LeaseEnd,
    NoticeState, Page, PageSize, Place, Refusal, Status, TicketPlace, Waiter,
};
