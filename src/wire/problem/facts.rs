//! What each problem type is ([`Facts`]): its slug, status, title,
//! description, and when a client may try again. The table is
//! [`ProblemType::facts`]; what one occurrence says is `details.rs`'s.

use super::kind::ProblemType;

/// When a client may try again, sent as `Retry-After` (seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfter {
    /// Retrying the same request will not help.
    Never,
    /// After this many seconds.
    Seconds(u64),
    /// When the lease in the way expires (at least one second); one second
    /// when that is not known.
    AtExpiry,
    /// When the freeze's window ends (at least one second).
    AtThaw,
}

/// What a problem type is.
pub struct Facts {
    pub slug: &'static str,
    pub status: u16,
    pub title: &'static str,
    /// What it means, for `GET /problems/{slug}` and the OpenAPI document.
    pub description: &'static str,
    /// The `detail` of every occurrence of a type that says the same each
    /// time; `None` where each occurrence says its own (`details.rs`).
    pub detail: Option<&'static str>,
    pub retry: RetryAfter,
}

impl ProblemType {
    /// The one place where a problem type is described.
    #[allow(clippy::too_many_lines)]
    pub fn facts(self) -> Facts {
        use RetryAfter::{AtExpiry, AtThaw, Never, Seconds};
        let (slug, status, title, description, detail, retry) = match self {
            Self::InvalidRequest => (
                "invalid-request", 400, "Invalid request",
                "The body is not valid JSON, has an unknown or out-of-range field, or the name or lease id in the path is malformed. `detail` names the field. A `wait_ms` over the server's maximum also carries `max_wait_ms`.",
                None, Never,
            ),
            Self::Unauthorized => (
                "unauthorized", 401, "Unauthorized",
                "The service has tokens and the request has no valid `Authorization: Bearer <token>` (an API or an admin token).",
                Some("this service needs an `Authorization: Bearer <token>` header with a valid API token"),
                Never,
            ),
            Self::Forbidden => (
                "forbidden", 403, "Forbidden",
                "The token may not do this to this name: it needs the scope named in `scope` \
                 (`read`: status, listings, events; `write`: acquire, refresh, release, check; \
                 `admin`: force-release) on it. Scopes come from `BATON_TOKENS_FILE`; \
                 `BATON_API_TOKENS` have `write` on every name, `BATON_ADMIN_TOKENS` `admin`.",
                None, Never,
            ),
            Self::NotFound => (
                "not-found", 404, "Not found", "No such path.",
                Some("no such path; see /docs for the API"), Never,
            ),
            Self::LeaseNotFound => (
                "lease-not-found", 404, "Lease not found",
                "No live lease with this id: it expired, was released, was force-released, or never belonged to this name. Nothing was changed.",
                Some("no live lease with this id: it expired, was released, or is not this name's"),
                Never,
            ),
            Self::TicketNotFound => (
                "ticket-not-found", 404, "Ticket not found",
                "No ticket with this id on this name: it was left, its place expired, it was collected, its grant was not collected by `pickup_by`, or it was lost with Redis's data. Nothing was changed.",
                Some("no ticket with this id: it was left, expired, collected, or is not this name's"),
                Never,
            ),
            Self::FreezeNotFound => (
                "freeze-not-found", 404, "Freeze not found",
                "No freeze with this id that this token may see: it was deleted, its one-off window ended, it never was, or its `match` can match no name the token may read.",
                Some("no freeze with this id that this token may see"), Never,
            ),
            Self::LockNotHeld => (
                "lock-not-held", 404, "Lock not held", "The lock is not held by anyone.",
                Some("the lock is not held"), Never,
            ),
            Self::SemaphoreNotHeld => (
                "semaphore-not-held", 404, "Semaphore not held",
                "No lease of the semaphore is held by anyone.",
                Some("no lease of the semaphore is held"), Never,
            ),
            Self::MethodNotAllowed => (
                "method-not-allowed", 405, "Method not allowed", "This path does not take this method.",
                Some("this path does not take this method; see /docs"), Never,
            ),
            Self::LockHeld => (
                "lock-held", 409, "Lock is held",
                "Someone else holds the lock (or a request ahead in line would) and it was not released within `wait_ms`. `mode` says how it is held (`exclusive` or `shared`) and `holders` by how many leases; `owner` describes an exclusive holder; `expires_in_ms` is when the last lease in the way expires; `Retry-After` says when to try again.",
                None, AtExpiry,
            ),
            Self::SemaphoreFull => (
                "semaphore-full", 409, "Semaphore is full",
                "The permits asked for do not fit (or are promised to earlier waiters) and none came free within `wait_ms`. `used` (permits held), `holders` (leases held) and `limit` say how full it is.",
                None, AtExpiry,
            ),
            Self::Superseded => (
                "superseded", 409, "Superseded",
                "A newer request that also asked `newest_wins` joined the line for this name, so this waiting request left it without acquiring. `owner` is the newer request's owner label, if it gave one.",
                None, Never,
            ),
            Self::Frozen => (
                "frozen", 423, "Frozen",
                "A freeze holds this name (`POST /freezes`): nothing is granted on it until its window ends. `reason` and `freeze_id` name the freeze, `until` (RFC 3339) is when the window ends, and `Retry-After` says the same in seconds. A request with `wait_ms` joins the line instead and keeps its place; an admin token's `override` is granted through the freeze.",
                None, AtThaw,
            ),
            Self::ClaimRefused => (
                "claim-refused", 409, "Claim refused",
                "Not every name of the claim could be had within `wait_ms`, so the claim holds none of them (what it took while it waited was released). `names` lists the names in its way; `Retry-After` says when to try again.",
                None, AtExpiry,
            ),
            Self::ClaimNotFound => (
                "claim-not-found", 404, "Claim not found",
                "No claim with this id holds a lease: it was released, its leases expired or were force-released, or the id is not a claim's. A refresh that finds some of a claim's leases gone releases the rest (a claim is held whole or not at all); `names` lists those that were gone.",
                Some("no claim with this id holds a lease: it was released or its leases expired"),
                Never,
            ),
            Self::PayloadTooLarge => (
                "payload-too-large", 413, "Payload too large",
                "The request body is over the service's limit.",
                None, Never,
            ),
            Self::RedisUnavailable => (
                "redis-unavailable", 503, "Redis unavailable",
                "The service cannot reach Redis right now. Nothing was half-done; retry after `Retry-After` seconds.",
                Some("Redis cannot be reached right now; nothing was changed that a retry would not see"),
                Seconds(1),
            ),
            Self::ShuttingDown => (
                "shutting-down", 503, "Shutting down",
                "The service is stopping; retry against another instance or after it restarts.",
                Some("the service is shutting down; retry elsewhere or once it is back"),
                Seconds(2),
            ),
            Self::TooManyWaiters => (
                "too-many-waiters", 503, "Too many waiters",
                "The service's cap on concurrently waiting requests is reached; retry later or with a shorter `wait_ms`.",
                Some("too many requests are waiting on this instance; retry later"),
                Seconds(1),
            ),
            Self::TooManyStreams => (
                "too-many-streams", 503, "Too many event streams",
                "This instance already serves as many `GET /events` streams as it may (`BATON_MAX_EVENT_STREAMS`); retry after `Retry-After` seconds or against another instance.",
                None, Seconds(1),
            ),
            Self::RequestTimeout => (
                "request-timeout", 503, "Request timeout",
                "The request took longer than the service allows.",
                Some("the request took longer than the service allows"), Seconds(1),
            ),
            Self::IssuerUnavailable => (
                "issuer-unavailable", 503, "Issuer keys unavailable",
                "The bearer token is a job's OpenID Connect token whose issuer's keys are not cached and cannot be fetched right now (the fetch failed or took too long); retry after `Retry-After` seconds. Requests with other tokens are not affected.",
                Some("the keys of the identity token's issuer cannot be fetched right now; retry later"),
                Seconds(30),
            ),
            Self::InternalError => (
                "internal-error", 500, "Internal error",
                "The service failed unexpectedly; the cause is in its log.",
                Some("the service failed unexpectedly"), Never,
            ),
        };
        Facts {
            slug,
            status,
            title,
            description,
            detail,
            retry,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ProblemType;

    #[test]
    fn statuses_are_errors() {
        for &kind in ProblemType::ALL {
            assert!((400..600).contains(&kind.facts().status), "{kind:?}");
        }
    }
}
