//! The audit trail: one line for each change to a lease.

use crate::domain::{Kind, Name, Owner, Reason, TokenName};

/// One audit line at `info` (target `baton::audit`) for a change to the
/// lease of `name` with `fencing_token`, held by `owner`: `event` is
/// `acquired`, `released`, `refreshed`, `expired` or `force-released`; `by`
/// is the name of the token the change was made with (absent on a service
/// without tokens, and for an expiry, which nobody makes). Inside a request
/// it carries the request span (`request_id`). Never given a lease id or a
/// token.
pub fn audit(
    event: &'static str,
    kind: Kind,
    name: &Name,
    owner: Option<&Owner>,
    fencing_token: u64,
    by: Option<&TokenName>,
) {
    line(event, kind, name, owner, Some(fencing_token), None, by);
}

/// The audit line of a lease granted through a freeze (`override`): as
/// [`audit`]'s `acquired`, with the reason the administrator gave.
pub fn audit_override(
    kind: Kind,
    name: &Name,
    owner: Option<&Owner>,
    fencing_token: u64,
    by: Option<&TokenName>,
    reason: &Reason,
) {
    tracing::info!(
        target: "baton::audit",
        event = "acquired",
        kind = kind.as_str(),
        name = name.as_str(),
        owner = owner.map(Owner::as_str),
        fencing_token,
        by = by.map(TokenName::as_str),
        r#override = reason.as_str(),
        "audit"
    );
}

/// The audit line of a yield request that told `holders` holders of
/// `name`: `by` the asking token (or, on a service without tokens, `owner`
/// the asker gave).
pub fn audit_yield(
    kind: Kind,
    name: &Name,
    owner: Option<&Owner>,
    by: Option<&TokenName>,
    holders: u64,
    reason: Option<&crate::domain::Reason>,
) {
    tracing::info!(
        target: "baton::audit",
        event = "yield-requested",
        kind = kind.as_str(),
        name = name.as_str(),
        owner = owner.map(Owner::as_str),
        by = by.map(TokenName::as_str),
        holders,
        reason = reason.map(crate::domain::Reason::as_str),
        "audit"
    );
}

/// One audit line for `more_leases` leases of `name` that `event` ended
/// `by` that token besides those audited one by one (a force-release of
/// more than 100).
pub fn audit_more(
    event: &'static str,
    kind: Kind,
    name: &Name,
    more_leases: u64,
    by: Option<&TokenName>,
) {
    line(event, kind, name, None, None, Some(more_leases), by);
}

/// The line itself: a field that is `None` is left out.
fn line(
    event: &'static str,
    kind: Kind,
    name: &Name,
    owner: Option<&Owner>,
    fencing_token: Option<u64>,
    more_leases: Option<u64>,
    by: Option<&TokenName>,
) {
    tracing::info!(
        target: "baton::audit",
        event,
        kind = kind.as_str(),
        name = name.as_str(),
        owner = owner.map(Owner::as_str),
        fencing_token,
        more_leases,
        by = by.map(TokenName::as_str),
        "audit"
    );
}
