//! The chaos checker: one pure function, [`judge`], from a recorded
//! [`History`] to a [`Verdict`], so that a synthetic history tests it.
//!
//! A hold lasts, as its client was told, from the receipt of its 201 until
//! the client sent a release that ended it (answered 204 or 404, or unanswered
//! but perhaps received: after that it no longer relies on the lease; a
//! release answered 503 ends nothing), a force-release of its name was sent,
//! Redis lost its data (unless its 201 came once Redis was back, from an
//! instance no fault held up: baton confirms a lease before telling it, a
//! claim each of its leases), or else its `expires_at` (as the latest refresh
//! answered told it; a refresh that went unanswered may have shortened it).
//! The last [`EXPIRY_GRACE`] before an `expires_at` is not counted, for the
//! clocks of the client and of Redis. For the line's room the other end
//! counts: until when Redis may still have held the lease.
//!
//! The checks count capacity, not leases: a lease takes its [`Ask::weight`]
//! of its name's capacity ([`Ask::capacity`]). What is judged, each as one
//! [`Rule`], in the file of `rules/` named below beside its unit tests
//! (the helpers they share: `spans.rs`, their limits: `limits.rs`):
//!
//! - capacity and tokens (`capacity.rs`, `tokens.rs`; the holds as told,
//!   `holds.rs`): never more held as told than the name's capacity; every token
//!   granted once, above every token told before it was asked;
//! - what a lease body says (`answers.rs`, `expiries.rs`): what was asked, and
//!   an `expires_at` that is the `ttl_ms` asked from a moment between the
//!   call's sending and its answer, on Redis's clock;
//! - the line (`line.rs`, `overtaken.rs`): no waiter stayed queued more than
//!   [`STUCK`] in all while the head of its name's line surely had room, with
//!   the time any fault could explain (its span and [`SETTLE`] after it)
//!   subtracted, and the time a request that got no answer may still have been
//!   in line (it counts as in line, see [`LEAVE`]); no acquisition refused
//!   while its name was free and nobody else asked; none granted ahead of one
//!   queued well before it ([`ORDER_SLACK`]), away from faults (a stall of
//!   Redis is no excuse: the line keeps its order through one);
//! - answers (`answers.rs`): a missing answer only when a fault of its instance
//!   or of Redis overlapped the call; a 503 only during or right after such a
//!   fault ([`UNAVAILABLE_AFTER`]); a 404 for a lease its holder was told it
//!   held only after a force-release or a loss of Redis's data;
//! - claims (`claims.rs`, `claim_runs.rs`): none refused (409 `claim-refused`)
//!   after every one of its names was free, away from faults, for more than
//!   [`CLAIM_FREE`] before its wait ran out; its answer as for any call (no
//!   answer and 503 only around a fault); its leases are holds like any other;
//! - freezes (`frozen.rs`): no lease of a frozen name granted inside the
//!   freeze's window (from [`FREEZE_SLACK`] after its `POST` was answered until
//!   its `DELETE` was sent, as instances apply a freeze within a second), away
//!   from faults of Redis, restarts of its instance and a loss of Redis's data;
//!   a pause of its instance excuses only a grant that may have come before the
//!   window (its 201 held up until the resume), see its `earliest_grant`; the
//!   lines of a frozen name are not judged from the `POST` until [`SETTLE`]
//!   after the window surely ended;
//! - a lease's own stream (`streams.rs`): `held` first, `released` or `lost`
//!   last and only as its holder's calls (or a force-release) allow, `lost` by
//!   expiry neither before the holder was told it would end nor more than
//!   [`STREAM_LATE`] after the expiry (or a fault of the stream's instance or
//!   of Redis then); no `refreshed` or `expiring` after the expiry passed;
//! - tickets (`tickets.rs`): none still waiting after a later request of the
//!   same or a lower priority was granted, none granted twice;
//! - the run (`data_loss.rs`, `paths.rs`): Redis without persistence lost its
//!   data at least once (and with persistence never); every required [`Path`]
//!   was taken during a fault.

mod judge;
mod limits;
mod rules;
mod spans;
#[cfg(test)]
mod synthetic;
mod timeline;
mod verdict;

pub use judge::judge;
pub use limits::{
    CLAIM_FREE, CLOCK_TOLERANCE, EXPIRY_GRACE, FREEZE_SLACK, LEAVE, MIN_STRETCH, NO_ANSWER_SLACK,
    ORDER_SLACK, QUEUED_AFTER, RUN_ON_LIMIT, SETTLE, STREAM_LATE, STUCK, UNAVAILABLE_AFTER,
};
pub use verdict::{Hold, Path, Rule, Rules, Verdict, Violation};
