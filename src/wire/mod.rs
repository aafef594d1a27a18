//! The bodies on the wire, one type each, shared by the service and its
//! client as atuin shares `atuin-common/src/api.rs`: the routes serialize
//! them (their utoipa schemas make the OpenAPI document) and deserialize the
//! requests; the client sends the requests and deserializes the answers. A
//! field renamed here breaks the client's compile, not a user's job.
//!
//! A client reads the answers of any baton, older or newer: unknown members
//! are ignored; a member the service may leave out is an `Option`; a count,
//! list or flag that is absent reads as what its absence meant (0, empty,
//! `false`; a lease's `permits` 1); a problem reads as RFC 9457 asks (every
//! member optional, one of the wrong type ignored), and so does a `mode` this
//! version does not know. What makes a body what it is (names, lease ids,
//! fencing tokens, times) is required.
//!
//! Nothing here knows the engine: the routes make these bodies of its
//! answers, and parse the requests into domain types.

mod acquire;
mod change;
mod claim;
mod field;
mod freeze;
mod health;
mod history;
mod holder;
mod lease;
mod lenient;
mod names;
mod problem;
mod progress;
mod status;
mod ticket;
mod time;

pub use acquire::{AcquireFields, AcquireLock, AcquireSemaphore};
pub use change::{ChangeEventBody, ChangeEventName};
pub use claim::{
    ClaimBody, ClaimFrozen, ClaimLock, ClaimName, ClaimQueued, ClaimRequest, ClaimSemaphore,
};
pub use freeze::{FreezeBody, FreezeList, FreezeRequest};
pub use health::Health;
pub use history::{HistoryBody, HistoryEntryBody, LeaseEndBody};
pub use holder::{HolderEventBody, HolderEventName, LostReason, YieldAnswer, YieldRequest};
pub use lease::{LeaseBody, LockLeaseBody, Refresh, SemaphoreLeaseBody};
pub use problem::{Facts, LockHeld, Problem, ProblemType, RetryAfter, SemaphoreFull};
pub use progress::{FrozenLine, ProgressEventName, Queued, QueuedBehind};
pub use status::{
    Listing, LockHolderBody, LockStatusBody, Mode, SemaphoreStatusBody, SlotBody, StatusBody,
    WaiterBody,
};
pub use ticket::{EtaBasis, TicketBody, TicketFrozen, TicketStateBody, TicketWaitBody};
pub use time::{rfc3339_ms, rfc3339_ms_signed};
