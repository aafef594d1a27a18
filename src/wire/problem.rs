//! The problem types of the API and the problem body. Everything about one
//! type (slug, status, title, description, example, retry policy) is said
//! once, in [`ProblemType::facts`]; `GET /problems/{slug}`, the OpenAPI
//! response components, `Retry-After` and the client's exit statuses all
//! read it there.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder, Type};
use utoipa::ToSchema;

use super::lenient::ignoring_mistyped;
use super::status::Mode;
use crate::domain::Kind;

/// Every problem type of the API. `InternalError` stays last: [`Self::ALL`]
/// is checked against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemType {
    InvalidRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    LeaseNotFound,
    TicketNotFound,
    FreezeNotFound,
    LockNotHeld,
    SemaphoreNotHeld,
    MethodNotAllowed,
    LockHeld,
    SemaphoreFull,
    Superseded,
    Frozen,
    ClaimRefused,
    ClaimNotFound,
    PayloadTooLarge,
    RedisUnavailable,
    ShuttingDown,
    TooManyWaiters,
    TooManyStreams,
    RequestTimeout,
    IssuerUnavailable,
    InternalError,
}

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
    /// The `detail` of an example, and of every occurrence without details of its own.
    pub detail: &'static str,
    /// The extension members of an example.
    pub example: Value,
    pub retry: RetryAfter,
}

impl ProblemType {
    /// Every problem type, in declaration order.
    pub const ALL: &'static [Self] = &[
        Self::InvalidRequest,
        Self::Unauthorized,
        Self::Forbidden,
        Self::NotFound,
        Self::LeaseNotFound,
        Self::TicketNotFound,
        Self::FreezeNotFound,
        Self::LockNotHeld,
        Self::SemaphoreNotHeld,
        Self::MethodNotAllowed,
        Self::LockHeld,
        Self::SemaphoreFull,
        Self::Superseded,
        Self::Frozen,
        Self::ClaimRefused,
        Self::ClaimNotFound,
        Self::PayloadTooLarge,
        Self::RedisUnavailable,
        Self::ShuttingDown,
        Self::TooManyWaiters,
        Self::TooManyStreams,
        Self::RequestTimeout,
        Self::IssuerUnavailable,
        Self::InternalError,
    ];

    /// The one place where a problem type is described.
    #[allow(clippy::too_many_lines)]
    pub fn facts(self) -> Facts {
        use RetryAfter::{AtExpiry, AtThaw, Never, Seconds};
        let (slug, status, title, description, detail, example, retry) = match self {
            Self::InvalidRequest => (
                "invalid-request", 400, "Invalid request",
                "The body is not valid JSON, has an unknown or out-of-range field, or the name or lease id in the path is malformed. `detail` names the field. A `wait_ms` over the server's maximum also carries `max_wait_ms`.",
                "ttl_ms: must be between 1 and 86400000", json!({}), Never,
            ),
            Self::Unauthorized => (
                "unauthorized", 401, "Unauthorized",
                "The service has tokens and the request has no valid `Authorization: Bearer <token>` (an API or an admin token).",
                "this service needs an `Authorization: Bearer <token>` header with a valid API token",
                json!({}), Never,
            ),
            Self::Forbidden => (
                "forbidden", 403, "Forbidden",
                "The token may not do this to this name: it needs the scope named in `scope` \
                 (`read`: status, listings, events; `write`: acquire, refresh, release, check; \
                 `admin`: force-release) on it. Scopes come from `BATON_TOKENS_FILE`; \
                 `BATON_API_TOKENS` have `write` on every name, `BATON_ADMIN_TOKENS` `admin`.",
                "this token may not write \"team-b-deploy\": it needs write on that name",
                json!({"scope": "write"}), Never,
            ),
            Self::NotFound => (
                "not-found", 404, "Not found", "No such path.",
                "no such path; see /docs for the API", json!({}), Never,
            ),
            Self::LeaseNotFound => (
                "lease-not-found", 404, "Lease not found",
                "No live lease with this id: it expired, was released, was force-released, or never belonged to this name. Nothing was changed.",
                "no live lease with this id: it expired, was released, or is not this name's",
                json!({}), Never,
            ),
            Self::TicketNotFound => (
                "ticket-not-found", 404, "Ticket not found",
                "No ticket with this id on this name: it was left, its place expired, it was collected, its grant was not collected by `pickup_by`, or it was lost with Redis's data. Nothing was changed.",
                "no ticket with this id: it was left, expired, collected, or is not this name's",
                json!({}), Never,
            ),
            Self::FreezeNotFound => (
                "freeze-not-found", 404, "Freeze not found",
                "No freeze with this id that this token may see: it was deleted, its one-off window ended, it never was, or its `match` can match no name the token may read.",
                "no freeze with this id that this token may see", json!({}), Never,
            ),
            Self::LockNotHeld => (
                "lock-not-held", 404, "Lock not held", "The lock is not held by anyone.",
                "the lock is not held", json!({}), Never,
            ),
            Self::SemaphoreNotHeld => (
                "semaphore-not-held", 404, "Semaphore not held",
                "No lease of the semaphore is held by anyone.",
                "no lease of the semaphore is held", json!({}), Never,
            ),
            Self::MethodNotAllowed => (
                "method-not-allowed", 405, "Method not allowed", "This path does not take this method.",
                "this path does not take this method; see /docs", json!({}), Never,
            ),
            Self::LockHeld => (
                "lock-held", 409, "Lock is held",
                "Someone else holds the lock (or a request ahead in line would) and it was not released within `wait_ms`. `mode` says how it is held (`exclusive` or `shared`) and `holders` by how many leases; `owner` describes an exclusive holder; `expires_in_ms` is when the last lease in the way expires; `Retry-After` says when to try again.",
                "lock 'deploy-prod' is held by someone else; it expires in 29500 ms unless refreshed",
                json!({"owner": "https://ci.example.com/jobs/42", "expires_in_ms": 29500, "mode": "exclusive", "holders": 1, "waiting": 2}), AtExpiry,
            ),
            Self::SemaphoreFull => (
                "semaphore-full", 409, "Semaphore is full",
                "The permits asked for do not fit (or are promised to earlier waiters) and none came free within `wait_ms`. `used` (permits held), `holders` (leases held) and `limit` say how full it is.",
                "semaphore 'migrations' is full: 4 of 4 permits held by 4 leases",
                json!({"holders": 4, "used": 4, "limit": 4, "waiting": 3}), AtExpiry,
            ),
            Self::Superseded => (
                "superseded",
                409,
                "Superseded",
                "A newer request that also asked `newest_wins` joined the line for this name, so this waiting request left it without acquiring. `owner` is the newer request's owner label, if it gave one.",
                "a newer request for 'deploy-prod' asked for newest_wins; this one left the line",
                json!({"owner": "https://ci.example.com/jobs/43"}),
                Never,
            ),
            Self::Frozen => (
                "frozen",
                423,
                "Frozen",
                "A freeze holds this name (`POST /freezes`): nothing is granted on it until its window ends. `reason` and `freeze_id` name the freeze, `until` (RFC 3339) is when the window ends, and `Retry-After` says the same in seconds. A request with `wait_ms` joins the line instead and keeps its place; an admin token's `override` is granted through the freeze.",
                "'deploy-prod' is frozen until 2026-11-30T07:00:00.000Z: release weekend",
                json!({"reason": "release weekend", "freeze_id": "3b2c0f6e-4f7c-4f43-9a51-7d0c2e1b9a10", "until": "2026-11-30T07:00:00.000Z"}),
                AtThaw,
            ),
            Self::ClaimRefused => (
                "claim-refused", 409, "Claim refused",
                "Not every name of the claim could be had within `wait_ms`, so the claim holds none of them (what it took while it waited was released). `names` lists the names in its way; `Retry-After` says when to try again.",
                "lock 'db-migrations' is held by someone else; the claim holds none of its names",
                json!({"names": ["db-migrations"]}), AtExpiry,
            ),
            Self::ClaimNotFound => (
                "claim-not-found", 404, "Claim not found",
                "No claim with this id holds a lease: it was released, its leases expired or were force-released, or the id is not a claim's. A refresh that finds some of a claim's leases gone releases the rest (a claim is held whole or not at all); `names` lists those that were gone.",
                "no claim with this id holds a lease: it was released or its leases expired",
                json!({}), Never,
            ),
            Self::PayloadTooLarge => (
                "payload-too-large", 413, "Payload too large",
                "The request body is over the service's limit.",
                "the request body is over the limit of 16384 bytes", json!({}), Never,
            ),
            Self::RedisUnavailable => (
                "redis-unavailable", 503, "Redis unavailable",
                "The service cannot reach Redis right now. Nothing was half-done; retry after `Retry-After` seconds.",
                "Redis cannot be reached right now; nothing was changed that a retry would not see",
                json!({}), Seconds(1),
            ),
            Self::ShuttingDown => (
                "shutting-down", 503, "Shutting down",
                "The service is stopping; retry against another instance or after it restarts.",
                "the service is shutting down; retry elsewhere or once it is back",
                json!({}), Seconds(2),
            ),
            Self::TooManyWaiters => (
                "too-many-waiters", 503, "Too many waiters",
                "The service's cap on concurrently waiting requests is reached; retry later or with a shorter `wait_ms`.",
                "too many requests are waiting on this instance; retry later",
                json!({}), Seconds(1),
            ),
            Self::TooManyStreams => (
                "too-many-streams", 503, "Too many event streams",
                "This instance already serves as many `GET /events` streams as it may (`BATON_MAX_EVENT_STREAMS`); retry after `Retry-After` seconds or against another instance.",
                "this instance already serves its maximum of 1000 event streams; retry later",
                json!({}), Seconds(1),
            ),
            Self::RequestTimeout => (
                "request-timeout", 503, "Request timeout",
                "The request took longer than the service allows.",
                "the request took longer than the service allows", json!({}), Seconds(1),
            ),
            Self::IssuerUnavailable => (
                "issuer-unavailable", 503, "Issuer keys unavailable",
                "The bearer token is a job's OpenID Connect token whose issuer's keys are not cached and cannot be fetched right now (the fetch failed or took too long); retry after `Retry-After` seconds. Requests with other tokens are not affected.",
                "the keys of the identity token's issuer cannot be fetched right now; retry later",
                json!({}), Seconds(30),
            ),
            Self::InternalError => (
                "internal-error", 500, "Internal error",
                "The service failed unexpectedly; the cause is in its log.",
                "the service failed unexpectedly", json!({}), Never,
            ),
        };
        Facts {
            slug,
            status,
            title,
            description,
            detail,
            example,
            retry,
        }
    }

    /// What a `kind` answers when it stayed busy for a whole wait (409).
    pub const fn busy(kind: Kind) -> Self {
        match kind {
            Kind::Lock => Self::LockHeld,
            Kind::Semaphore => Self::SemaphoreFull,
        }
    }

    /// What force-release of a `kind` answers when nothing is held (404).
    pub const fn not_held(kind: Kind) -> Self {
        match kind {
            Kind::Lock => Self::LockNotHeld,
            Kind::Semaphore => Self::SemaphoreNotHeld,
        }
    }

    /// The type whose slug is `slug`.
    pub fn from_slug(slug: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|p| p.facts().slug == slug)
    }

    /// The `type` URI: where `GET` describes it.
    pub fn uri(self) -> String {
        format!("/problems/{}", self.facts().slug)
    }

    /// The name of its OpenAPI response component.
    pub fn component_name(self) -> String {
        format!("{self:?}")
    }

    /// Its OpenAPI response: the [`Problem`] schema with an example, and
    /// `Retry-After` where it has a retry policy.
    pub fn openapi_response(self) -> RefOr<utoipa::openapi::Response> {
        let facts = self.facts();
        let mut example = json!({
            "type": self.uri(),
            "title": facts.title,
            "status": facts.status,
            "detail": facts.detail,
        });
        if let (Some(example), Some(extra)) = (example.as_object_mut(), facts.example.as_object()) {
            example.extend(extra.clone());
        }
        let content = ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("Problem")))
            .example(Some(example))
            .build();
        let mut response = ResponseBuilder::new()
            .description(facts.description)
            .content("application/problem+json", content);
        if facts.retry != RetryAfter::Never {
            let seconds = utoipa::openapi::schema::Object::with_type(Type::Integer);
            let header = HeaderBuilder::new()
                .schema(Some(seconds))
                .description(Some("Seconds to wait before trying again"))
                .build();
            response = response.header("Retry-After", header);
        }
        response.build().into()
    }
}

/// An RFC 9457 problem: `type`, `title`, `status`, `detail`, and the extension
/// members of some problem types.
// Every member may be absent (the service always sends the first four), as
// RFC 9457 has it; `from_json` also ignores one of the wrong type.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "type": "/problems/lock-held",
    "title": "Lock is held",
    "status": 409,
    "detail": "lock 'deploy-prod' is held by someone else; it expires in 29500 ms unless refreshed",
    "owner": "https://ci.example.com/jobs/42",
    "expires_in_ms": 29500
}))]
pub struct Problem {
    /// A URI reference that ends in the problem's slug; `GET` it for a description.
    #[serde(rename = "type", default)]
    #[schema(required = true)]
    pub kind: String,
    /// A short summary of the problem type.
    #[serde(default)]
    #[schema(required = true)]
    pub title: String,
    /// The HTTP status code.
    #[serde(default)]
    #[schema(required = true)]
    pub status: u16,
    /// What went wrong in this occurrence, and which field when a field is at fault.
    #[serde(default)]
    #[schema(required = true)]
    pub detail: String,
    /// `lock-held`: the current holder's owner label, if it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// `lock-held`: when the last lease in the request's way expires unless refreshed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_ms: Option<u64>,
    /// `lock-held`: how the lock is held, `exclusive` or `shared`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// `lock-held`, `semaphore-full`: how many leases are held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holders: Option<u64>,
    /// `semaphore-full`: how many permits they hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used: Option<u64>,
    /// `semaphore-full`: the limit the acquisition was judged against.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// `lock-held`, `semaphore-full`: how many requests are queued in the line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<u64>,
    /// `invalid-request` for a `wait_ms` over the server's maximum: that maximum.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wait_ms: Option<u64>,
    /// `forbidden`: the scope the request needed on the name, `read`,
    /// `write` or `admin`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^(read|write|admin)$")]
    pub scope: Option<String>,
    /// `frozen`: the freeze's reason, if it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `frozen`: the id of the freeze that holds the name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freeze_id: Option<String>,
    /// `frozen`: when the freeze's window ends (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub until: Option<String>,
    /// `claim-refused`: the names in the claim's way; `claim-not-found`
    /// after a refresh: the names whose leases were gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
}

impl Problem {
    /// The problem that the JSON `body` is, read as RFC 9457 asks of a
    /// client: every member optional, one of the wrong type (or a `mode`
    /// this version does not know) ignored. `None` when `body` is not an
    /// object.
    pub fn from_json(body: &Value) -> Option<Self> {
        ignoring_mistyped(body.as_object()?).ok()
    }

    /// A problem of type `kind` with its title and status, and `detail`.
    pub fn new(kind: ProblemType, detail: String) -> Self {
        let facts = kind.facts();
        Self {
            kind: kind.uri(),
            title: facts.title.into(),
            status: facts.status,
            detail,
            owner: None,
            expires_in_ms: None,
            mode: None,
            holders: None,
            used: None,
            limit: None,
            waiting: None,
            max_wait_ms: None,
            scope: None,
            reason: None,
            freeze_id: None,
            until: None,
            names: None,
        }
    }

    /// The last segment of its `type` (`lock-held`), whether or not this
    /// version knows it: for messages.
    pub fn slug(&self) -> Option<&str> {
        self.kind.rsplit('/').next().filter(|slug| !slug.is_empty())
    }

    /// Its type, when this version knows it.
    pub fn problem_type(&self) -> Option<ProblemType> {
        self.slug().and_then(ProblemType::from_slug)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_type_once_in_order() {
        for (i, kind) in ProblemType::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i, "{kind:?}");
        }
        assert_eq!(
            ProblemType::ALL.len(),
            ProblemType::InternalError as usize + 1
        );
    }

    #[test]
    fn slugs_are_unique_and_lead_back() {
        for &kind in ProblemType::ALL {
            assert_eq!(ProblemType::from_slug(kind.facts().slug), Some(kind));
            assert!(kind.uri().ends_with(kind.facts().slug));
        }
    }

    #[test]
    fn a_problem_reads_as_rfc_9457_asks() {
        let full = Problem {
            owner: Some("ci".into()),
            mode: Some(Mode::Shared),
            holders: Some(2),
            ..Problem::new(ProblemType::LockHeld, "held".into())
        };
        let written = serde_json::to_value(&full).unwrap();
        let read = Problem::from_json(&written).unwrap();
        assert_eq!(serde_json::to_value(&read).unwrap(), written);
        assert_eq!(read.problem_type(), Some(ProblemType::LockHeld));
        // Every member may be absent, and one of the wrong type is ignored.
        let odd = Problem::from_json(&json!({
            "type": "https://example.com/problems/teapot", "status": "418",
            "mode": "intent", "holders": 2, "extra": true
        }))
        .unwrap();
        assert_eq!((odd.slug(), odd.problem_type()), (Some("teapot"), None));
        assert_eq!((odd.status, odd.detail.as_str()), (0, ""));
        assert_eq!((odd.mode, odd.holders), (None, Some(2)));
        let none = Problem::from_json(&json!({})).unwrap();
        assert_eq!(none.slug(), None);
        assert!(Problem::from_json(&json!(["type"])).is_none());
    }

    #[test]
    fn statuses_are_errors_and_examples_are_objects() {
        for &kind in ProblemType::ALL {
            let facts = kind.facts();
            assert!((400..600).contains(&facts.status), "{kind:?}");
            assert!(facts.example.is_object(), "{kind:?}");
        }
    }
}
