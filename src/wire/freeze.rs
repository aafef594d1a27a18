//! Freezes on the wire: what `POST /freezes` sends, and a freeze as
//! `GET /freezes` shows it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::Kind;

/// Body of `POST /freezes`: what it matches, why, and either a one-off
/// window (`from`, `until`) or a recurring one (`freeze_start`,
/// `freeze_end`, `cron_timezone`), as GitLab's deploy freezes write them.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "match": "deploy-*",
    "reason": "release weekend",
    "freeze_start": "0 23 * * 5",
    "freeze_end": "0 7 * * 1",
    "cron_timezone": "Europe/Berlin"
}))]
pub struct FreezeRequest {
    /// A name, or a prefix ending in `*` (`deploy-*`; `*` alone: every name).
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    #[schema(required = true)]
    pub pattern: Option<String>,
    /// `lock` or `semaphore`; both when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, pattern = "^(lock|semaphore)$")]
    pub kind: Option<Kind>,
    /// Why, shown in every 423 it causes (at most 200 printable characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// One-off: when it starts (RFC 3339); now when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub from: Option<String>,
    /// One-off: when it ends (RFC 3339), later than now and than `from`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub until: Option<String>,
    /// Recurring: a five-field cron expression for each start (`0 23 * * 5`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_start: Option<String>,
    /// Recurring: a five-field cron expression for each end (`0 7 * * 1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_end: Option<String>,
    /// Recurring: the IANA time zone the cron expressions are read in
    /// (default `UTC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron_timezone: Option<String>,
}

/// A freeze, and whether it holds now.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "id": "3b2c0f6e-4f7c-4f43-9a51-7d0c2e1b9a10",
    "match": "deploy-*",
    "reason": "release weekend",
    "freeze_start": "0 23 * * 5",
    "freeze_end": "0 7 * * 1",
    "cron_timezone": "Europe/Berlin",
    "active": true,
    "ends_at": "2026-11-30T06:00:00.000Z",
    "next_start": "2026-12-04T22:00:00.000Z",
    "created_at": "2026-11-20T10:00:00.000Z"
}))]
pub struct FreezeBody {
    #[schema(format = Uuid)]
    pub id: String,
    #[serde(rename = "match")]
    pub pattern: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, pattern = "^(lock|semaphore)$")]
    pub kind: Option<Kind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub until: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_end: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron_timezone: Option<String>,
    /// Whether one of its windows holds now.
    #[serde(default)]
    pub active: bool,
    /// While active: when this window ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub ends_at: Option<String>,
    /// When its next window starts, if one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub next_start: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// The name of the token that made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// `GET /freezes`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FreezeList {
    #[serde(default)]
    pub freezes: Vec<FreezeBody>,
}
