//! What an acquisition asks for, whichever the kind.

use super::{NotifyUrl, Owner, Priority, Reason, TokenName, Ttl, WaitTime};

/// The parts of an acquisition that locks and semaphores share.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcquireRequest {
    /// How long the lease lives unless refreshed.
    pub ttl: Ttl,
    /// How long to wait in line while the lock or every slot is taken.
    pub wait: WaitTime,
    /// Who holds the lease, shown in status.
    pub owner: Option<Owner>,
    /// Joining the line makes the queued request that also asked this leave
    /// it (409 `superseded`): only the newest matters.
    pub newest_wins: bool,
    /// Asks the holders to finish early once, when it joins the line.
    pub ask_yield: bool,
    /// Its place among the waiters: ahead of every lower priority.
    pub priority: Priority,
    /// The name of the token it was made with (`by` in audit lines and,
    /// with the lease, in history); `None` on a service without tokens.
    pub by: Option<TokenName>,
    /// `override`: the reason an administrator gave to be granted through a
    /// freeze (the route checks the token may); `None` for everyone else.
    /// Boxed: rare, and a waiting request keeps its request for its whole wait.
    pub override_reason: Option<Box<Reason>>,
    /// `keep_place_ms`: a wait that ends before its grant keeps its place
    /// in line as a ticket (and the terms of that ticket); `None`: it leaves.
    pub keep_place: Option<KeepPlace>,
}

/// How long a ticket keeps its place, and a grant is held for its pickup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeepPlace {
    /// From each call on the ticket (ms): `keep_place_ms`.
    pub keep_ms: u64,
    /// From the grant (ms): the service's `BATON_PICKUP_MS`.
    pub pickup_ms: u64,
    /// `notify`: where its turn notice goes when it is granted while nobody
    /// waits on it.
    pub notify: Option<NotifyUrl>,
    /// Set when the request must not keep its place after all (its token was
    /// removed, narrowed or expired while it waited): ended early, it gives
    /// its ticket up instead of parking it.
    pub forsaken: Forsaken,
}

/// A flag shared by a waiting request and whoever may take its right to a
/// place away; every copy of a request shares it. Never part of what two
/// requests compare equal on.
#[derive(Debug, Clone, Default)]
pub struct Forsaken(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Forsaken {
    /// From now on, the place is not kept.
    pub fn set(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the place is no longer to be kept.
    pub fn is_set(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl PartialEq for Forsaken {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Forsaken {}
