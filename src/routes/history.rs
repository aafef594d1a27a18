//! A name's history (`GET /{kind}s/{name}/history`): the leases it had,
//! who held each, from when to when and how it ended, newest first and
//! paged, the same from every instance; never a lease id.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::routing::get;
use serde::Deserialize;
use utoipa::openapi::path::{HttpMethod, ParameterIn};
use utoipa::openapi::{Content, OpenApi, Ref, ResponseBuilder};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;

use super::kind_doc::{add_schemas, name_parameter, operation};
use super::lease::NamePath;
use super::{AppError, AppState, Caller, Json};
use crate::domain::{Demand, Kind, Name, Scope};
use crate::engine::{History, HistoryCursor, HistoryEntry, HistoryLimit, LeaseEnd};
use crate::wire::rfc3339_ms;
use crate::wire::{HistoryBody, HistoryEntryBody, LeaseEndBody, ProblemType};

/// The history of `kind`, with its OpenAPI operation.
pub fn router(kind: Kind) -> OpenApiRouter<AppState> {
    let mut router = OpenApiRouter::new().route(
        &format!("/{}/{{name}}/history", kind.plural()),
        get(move |state, caller, name, query| history(state, kind, caller, name, query)),
    );
    document(kind, router.get_openapi_mut());
    router
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

/// Adds the history operation of `kind`, and its schemas, to `doc`.
fn document(kind: Kind, doc: &mut OpenApi) {
    let noun = kind.as_str();
    let description = match kind {
        Kind::Lock => {
            "The leases of the lock, newest first: those held now (`end: held`),\n\
             then the others in the order they ended, each with its owner, fencing\n\
             token, mode, priority, when it was acquired and ended, how long its\n\
             request waited and how long it was held, how it ended (`released`,\n\
             `expired`, `force-released`, `not-collected`) and an override reason;\n\
             never a lease id. A lease left to expire reads `expired` with `ended_at`\n\
             its `expires_at`, whether or not anyone touched the name since. Redis\n\
             keeps the last `BATON_HISTORY_MAX` leases of a name for\n\
             `BATON_HISTORY_DAYS` after it was last used, so every instance shows the\n\
             same. Needs `read` on the name."
        }
        Kind::Semaphore => {
            "As `GET /locks/{name}/history`, for a semaphore: each entry carries the\n\
             `permits` its lease took."
        }
    };
    let mut parameters = name_parameter();
    parameters.extend(HistoryQuery::into_params(|| Some(ParameterIn::Query)));
    doc.paths.add_path_operation(
        format!("/{}/{{name}}/history", kind.plural()),
        vec![HttpMethod::Get],
        operation(
            format!("{noun}_history"),
            format!("A {noun}'s history"),
            description,
        )
        .parameters(Some(parameters))
        .response(
            "200",
            ResponseBuilder::new()
                .description(format!("A page of the {noun}'s history"))
                .content(
                    "application/json",
                    Content::new(Some(Ref::from_schema_name(HistoryBody::name()))),
                )
                .build(),
        )
        .response("503", ProblemType::RedisUnavailable.response_ref()),
    );
    add_schemas::<HistoryBody>(doc);
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
    let Query(query) = query.map_err(|e| AppError::invalid(format!("query: {}", e.body_text())))?;
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
