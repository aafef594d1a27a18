//! A name's history (`GET /{kind}s/{name}/history`): the leases it had,
//! who held each, from when to when and how it ended, newest first and
//! paged, the same from every instance; never a lease id.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::json::rfc3339_ms;
use super::lease::NamePath;
use super::problem::responses::RedisUnavailable;
use super::{AppError, AppState, Caller, Json};
use crate::domain::{Demand, Kind, Name, Scope};
use crate::engine::{History, HistoryCursor, HistoryEntry, HistoryLimit, LeaseEnd};
use crate::wire::{HistoryBody, HistoryEntryBody, LeaseEndBody};

/// The history of both kinds, documented.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(lock_history))
        .routes(routes!(semaphore_history))
}

/// The query of a history page.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// At most this many entries in the page: 1 to 100, default 20.
    #[param(minimum = 1, maximum = 100, default = 20)]
    pub limit: Option<u64>,
    /// The `next_cursor` of the previous page; absent for the first (newest).
    pub before: Option<String>,
}

/// A lock's history
///
/// The leases of the lock, newest first: those held now (`end: held`),
/// then the others in the order they ended, each with its owner, fencing
/// token, mode, priority, when it was acquired and ended, how long its
/// request waited and how long it was held, how it ended (`released`,
/// `expired`, `force-released`, `not-collected`) and an override reason;
/// never a lease id. A lease left to expire reads `expired` with `ended_at`
/// its `expires_at`, whether or not anyone touched the name since. Redis
/// keeps the last `BATON_HISTORY_MAX` leases of a name for
/// `BATON_HISTORY_DAYS` after it was last used, so every instance shows the
/// same. Needs `read` on the name.
#[utoipa::path(
    get,
    path = "/locks/{name}/history",
    operation_id = "lock_history",
    params(NamePath, HistoryQuery),
    responses(
        (status = 200, description = "A page of the lock's history", body = HistoryBody),
        (status = 503, response = RedisUnavailable),
    )
)]
async fn lock_history(
    state: State<AppState>,
    caller: Caller,
    name: NamePath,
    query: Result<Query<HistoryQuery>, QueryRejection>,
) -> Result<Json<HistoryBody>, AppError> {
    history(state, Kind::Lock, caller, name, query).await
}

/// A semaphore's history
///
/// As `GET /locks/{name}/history`, for a semaphore: each entry carries the
/// `permits` its lease took.
#[utoipa::path(
    get,
    path = "/semaphores/{name}/history",
    operation_id = "semaphore_history",
    params(NamePath, HistoryQuery),
    responses(
        (status = 200, description = "A page of the semaphore's history", body = HistoryBody),
        (status = 503, response = RedisUnavailable),
    )
)]
async fn semaphore_history(
    state: State<AppState>,
    caller: Caller,
    name: NamePath,
    query: Result<Query<HistoryQuery>, QueryRejection>,
) -> Result<Json<HistoryBody>, AppError> {
    history(state, Kind::Semaphore, caller, name, query).await
}

/// `GET /{kind}s/{name}/history` (`read`).
async fn history(
    State(state): State<AppState>,
    kind: Kind,
    caller: Caller,
    NamePath { name }: NamePath,
    query: Result<Query<HistoryQuery>, QueryRejection>,
) -> Result<Json<HistoryBody>, AppError> {
    caller.require(Scope::Read, &name)?;
    let Query(query) = query.map_err(|e| AppError::Invalid(format!("query: {}", e.body_text())))?;
    let limit = query
        .limit
        .map_or(Ok(HistoryLimit::default()), HistoryLimit::new)
        .map_err(|e| AppError::field("limit", e))?;
    let before = query
        .before
        .as_deref()
        // An empty `before=` is the first page, as an absent one is.
        .filter(|before| !before.is_empty())
        .map(HistoryCursor::parse)
        .transpose()
        .map_err(|e| AppError::field("before", e))?;
    let page = state
        .leases(kind)
        .history(&name, limit, before.as_ref())
        .await?;
    Ok(Json(history_body(kind, &name, page)))
}

/// A page of history as the wire shows it.
fn history_body(kind: Kind, name: &Name, page: History) -> HistoryBody {
    HistoryBody {
        name: name.to_string(),
        entries: page
            .entries
            .into_iter()
            .map(|entry| entry_body(kind, entry))
            .collect(),
        next_cursor: page.next_cursor.map(|c| c.as_str().to_owned()),
    }
}

fn entry_body(kind: Kind, entry: HistoryEntry) -> HistoryEntryBody {
    let (shared, permits) = match kind {
        Kind::Lock => (Some(!Demand::is_exclusive_weight(entry.weight)), None),
        Kind::Semaphore => (None, Some(entry.weight)),
    };
    let end = match entry.end {
        LeaseEnd::Held => LeaseEndBody::Held,
        LeaseEnd::Released => LeaseEndBody::Released,
        LeaseEnd::Expired => LeaseEndBody::Expired,
        LeaseEnd::ForceReleased => LeaseEndBody::ForceReleased,
        LeaseEnd::NotCollected => LeaseEndBody::NotCollected,
    };
    HistoryEntryBody {
        fencing_token: entry.fencing_token,
        owner: entry.owner.map(crate::domain::Owner::into_string),
        shared,
        permits,
        priority: (!entry.priority.is_default()).then(|| entry.priority.get()),
        acquired_at: rfc3339_ms(entry.acquired_at_ms),
        waited_ms: entry.waited_ms,
        end,
        ended_at: entry.ended_at_ms.map(rfc3339_ms),
        held_ms: entry
            .ended_at_ms
            .map(|ended| ended.saturating_sub(entry.acquired_at_ms)),
        expires_at: (entry.end == LeaseEnd::Held).then(|| rfc3339_ms(entry.expires_at_ms)),
        by: entry.by.map(|by| by.as_str().to_owned()),
        override_reason: entry.override_reason,
        ended_by: entry.ended_by.map(|by| by.as_str().to_owned()),
    }
}
