//! The audit trail: one line for each change to a lease.

/// One audit line at `info` (target `baton::audit`) for a change to a lease:
/// `event` is `acquired`, `released`, `refreshed`, `expired` or
/// `force-released`; `kind` is `lock` or `semaphore`; `by` is the name of
/// the token the change was made with (absent on a service without tokens,
/// and for an expiry, which nobody makes). Inside a request it carries the
/// request span (`request_id`). Never given a lease id or a token.
pub fn audit(
    event: &'static str,
    kind: &'static str,
    name: &str,
    owner: Option<&str>,
    fencing_token: Option<u64>,
    by: Option<&str>,
) {
    tracing::info!(
        target: "baton::audit",
        event,
        kind,
        name,
        owner,
        fencing_token,
        by,
        "audit"
    );
}
