//! What the holder's own stream sends (`GET /locks/{name}/{id}/events`), and
//! a request that asks the holders to yield (`POST /locks/{name}/yield`)
//! with its answer.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::names::names;

names! {
    /// The events of a holder's stream, by their SSE event name.
    HolderEventName {
        Held => "held",
        Refreshed => "refreshed",
        YieldRequested => "yield-requested",
        Expiring => "expiring",
        Released => "released",
        Lost => "lost",
    }
}

names! {
    /// Why a `lost` lease ended without its holder: the event's `reason`.
    LostReason {
        Expired => "expired",
        ForceReleased => "force-released",
    }
}

/// The data of one event of a holder's stream; the SSE event's name says
/// what happened (`held`, `refreshed`, `yield-requested`, `expiring`,
/// `released`, `lost`). Every event carries the lease's `fencing_token`;
/// none carries its `id`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "name": "deploy-prod",
    "fencing_token": 1_763_780_000_000_001_u64,
    "expires_at": "2026-11-22T03:14:15.926Z",
    "owner": "https://ci.example.com/jobs/42"
}))]
pub struct HolderEventBody {
    /// `held`: the lock's or semaphore's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub fencing_token: u64,
    /// `held`, `refreshed`, `expiring`: when the lease expires unless
    /// refreshed (RFC 3339, Redis's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
    /// `held`: the lease's owner label, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// `yield-requested`: the owner label of the request that asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// `yield-requested`: why it asks; `lost`: why the lease ended
    /// (`expired` or `force-released`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `yield-requested`: how many requests wait in line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<u64>,
}

/// Body of `POST /locks/{name}/yield` and `POST /semaphores/{name}/yield`;
/// may be empty.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"owner": "release-bot", "reason": "release train leaves at 17:00"}))]
pub struct YieldRequest {
    /// Who asks (shown to the holders as `by`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 200)]
    pub owner: Option<String>,
    /// Why: at most 200 printable characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 200)]
    pub reason: Option<String>,
}

/// Answer of a yield request: how many leases were asked (0 when none is
/// held). Nothing is taken from anyone.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"holders": 1}))]
pub struct YieldAnswer {
    pub holders: u64,
    /// `true` when this asker had the holders told less than 10 s ago:
    /// they were not told again (`holders` is then 0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub already_asked: bool,
}
