//! What a `baton run` holds once it has it, one lease or a claim of several
//! names, as the supervision of COMMAND needs it (`run.rs`, `claim.rs`).

use std::time::Duration;

/// What a run holds, as the supervision of COMMAND needs it.
pub struct Acquired {
    /// The lease's (or the claim's) path: PATCH refreshes it, DELETE
    /// releases it (it holds the id: never shown).
    pub path: String,
    /// What it holds, for messages: `lock 'deploy'`.
    pub label: String,
    /// The variables COMMAND gets.
    pub env: Vec<(String, String)>,
    /// When the request that got it was sent, and when its answer came
    /// ([`clock`](super::clock) time): the grant happened in between.
    pub sent: Duration,
    pub received: Duration,
    /// Whether it has a holder's stream (`{path}/events`) to follow.
    pub follows: bool,
}
