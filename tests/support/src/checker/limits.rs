//! The checker's limits: how much slack each rule gives the clocks, the
//! hand-overs and the faults.

use std::time::Duration;

/// The end of a lease as told that the checks ignore.
pub const EXPIRY_GRACE: Duration = Duration::from_millis(200);
/// A waiter kept this long in all, away from faults, while its name had
/// room, is stuck.
pub const STUCK: Duration = Duration::from_secs(2);
/// Stretches of room shorter than this are a hand-over in progress (the
/// grant made, its 201 on its way), not a stuck line.
pub const MIN_STRETCH: Duration = Duration::from_millis(250);
/// A request is in line this long after it was sent.
pub const QUEUED_AFTER: Duration = Duration::from_millis(100);
/// How long after a fault the line may still be settling: an unconfirmed
/// grant lapses (3 s), a resumed instance's waiters rejoin (1 s).
pub const SETTLE: Duration = Duration::from_secs(4);
/// How long after its client gave up a request may still be in line (a
/// waiter whose client is gone leaves within 5 s).
pub const LEAVE: Duration = Duration::from_secs(6);
/// A 503 is accepted until this long after a fault of its instance or of
/// Redis.
pub const UNAVAILABLE_AFTER: Duration = Duration::from_secs(3);
/// A missing answer is excused by a fault this close to the call.
pub const NO_ANSWER_SLACK: Duration = Duration::from_secs(1);
/// How far an `expires_at` may be from the ttl asked, past the call's span.
pub const CLOCK_TOLERANCE: Duration = Duration::from_millis(100);
/// A request sent this much later than another one reached the line after
/// it; a 201 this much earlier than another's came before it.
pub const ORDER_SLACK: Duration = Duration::from_millis(1500);

/// How late a lease's own stream may say `lost` after its expiry (or after
/// a fault of its instance or of Redis that went on past it), or still say
/// `refreshed` or `expiring` after the expiry.
pub const STREAM_LATE: Duration = Duration::from_millis(1500);

/// A claim refused after all its names were free this long in all, away
/// from faults, while it waited, was left waiting with room.
pub const CLAIM_FREE: Duration = Duration::from_secs(1);

/// How long after a freeze was made (or before it is deleted) an instance
/// may still not apply it: each reloads the freezes within a second.
pub const FREEZE_SLACK: Duration = Duration::from_secs(1);
/// How long a holder of a claim may run on after one of its names was
/// force-released (the force-release answered): the contract's 1 s for the
/// holder's stream to say so, and as much again for the test's own client.
pub const RUN_ON_LIMIT: Duration = Duration::from_secs(2);
