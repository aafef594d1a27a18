//! What `GET /events` sends: each change to a lock or semaphore, by its
//! SSE event name ([`ChangeEventName`]) and its data ([`ChangeEventBody`]).

use serde::Serialize;
use utoipa::ToSchema;

use super::names::names;

names! {
    /// The events of `GET /events`, by their SSE event name.
    ChangeEventName {
        Acquired => "acquired",
        Released => "released",
        Refreshed => "refreshed",
        Expired => "expired",
        ForceReleased => "force-released",
        Queued => "queued",
        Left => "left",
        YieldRequested => "yield-requested",
        /// Changes may have been missed: read the current state again (data `{}`).
        Resync => "resync",
    }
}

/// The data of one change event; the SSE event's name says what happened
/// (`acquired`, `released`, `refreshed`, `expired`, `force-released`,
/// `queued`, `left`, `yield-requested`). A lease id is never part of it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "kind": "lock",
    "name": "deploy-prod",
    "owner": "https://ci.example.com/jobs/42",
    "fencing_token": 1_763_780_000_000_001_u64,
    "waiting": 2
}))]
pub struct ChangeEventBody {
    /// `lock` or `semaphore`.
    #[schema(pattern = "^(lock|semaphore)$")]
    pub kind: &'static str,
    pub name: String,
    /// The owner label of the lease that changed, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The fencing token of the lease that changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fencing_token: Option<u64>,
    /// Semaphores: how many leases are held after the change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holders: Option<u64>,
    /// How many requests are in the waiting line after the change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<u64>,
    /// `yield-requested`: the owner label of the request that asks the
    /// holders to finish early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// `yield-requested`: why it asks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
