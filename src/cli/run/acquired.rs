//! What a `baton run` holds once it has it, one lease or a claim of several
//! names, as the supervision of COMMAND needs it (`held.rs`, `claim.rs`).

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
    /// ([`clock`](crate::cli::clock) time): the grant happened in between.
    pub sent: Duration,
    pub received: Duration,
    /// The leases whose holder's streams (`{lease path}/events`) it
    /// follows: the one lease, or every lease of a claim.
    pub follows: Vec<Follow>,
}

/// One lease whose holder's stream a run follows.
#[derive(Debug, Clone)]
pub struct Follow {
    /// The lease's path (it holds the lease id: never shown).
    pub path: String,
    /// The lease, for messages (`lock 'a'`), when the run holds several.
    pub label: Option<String>,
}
