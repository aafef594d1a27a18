//! `/freezes`: making, listing, reading and deleting freezes. Making and
//! deleting one takes `admin` on every name it matches; reading one, `read`
//! on some name it can match (the others are not shown: 404). Every
//! instance applies a change within a second. A freeze is checked when it
//! is made (a recurring one opens within 366 days, a one-off ends within
//! `BATON_FREEZE_MAX_DAYS`) and counted against its maker's name, so that
//! working freezes out stays cheap and no team can fill the list.

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::DateTime;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::problem::responses::{Forbidden, FreezeNotFound};
use super::{AppError, AppState, Caller, Json, JsonBody};
use crate::domain::{
    Freeze, FreezeId, Invalid, NamePattern, Reason, Recurring, Schedule, Scope, Window, DAY_MS,
};
use crate::engine::{wall_clock_ms, Put, Timeline, MAX_FREEZES_PER_NAME};
use crate::wire::{FreezeBody, FreezeList, FreezeRequest, ProblemType};

/// The `/freezes` routes, documented.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(show, delete))
}

/// Make a freeze
///
/// Nothing is granted on the names `match` matches while one of its windows
/// holds, except to an admin's `override`: a request without `wait_ms` gets
/// 423 `frozen`, one with `wait_ms` keeps its place in line and is served in
/// order when the window ends. Takes `admin` on every name it matches.
/// A recurring freeze must open within 366 days, a one-off `until` lie at
/// most `BATON_FREEZE_MAX_DAYS` (400) days ahead; one token name keeps at
/// most 100 freezes in force (400 naming `match`), and the 1,000 in all
/// never refuse an `admin:*` token.
#[utoipa::path(post, path = "/freezes", request_body = FreezeRequest,
    responses(
        (status = 201, description = "Made; every instance applies it within a second",
            body = FreezeBody, headers(("Location" = String, description = "/freezes/{id}"))),
        (status = 403, response = Forbidden),
    ))]
async fn create(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<FreezeRequest>,
) -> Result<Response, AppError> {
    let now = wall_clock_ms();
    let pattern = body
        .pattern
        .as_deref()
        .ok_or_else(|| required("match", "a name, or a prefix ending in `*`"))?;
    let pattern = NamePattern::parse(pattern).map_err(|e| AppError::field("match", e))?;
    caller.require_covering(Scope::Admin, &pattern)?;
    let reason = Reason::parse(body.reason.clone()).map_err(|e| AppError::field("reason", e))?;
    let max_days = i64::from(state.settings.freeze_max_days);
    let freeze = Freeze {
        id: FreezeId::new(),
        pattern,
        kind: body.kind,
        reason,
        schedule: schedule(&body, now, max_days)?,
        created_ms: now,
        by: caller.name().cloned(),
    };
    // An admin of every name goes past the list's maximum: no one else's
    // freezes may keep out an incident freeze.
    let beyond_max = caller.covers(Scope::Admin, &NamePattern::everything());
    match state.engine.freezes().put(&freeze, beyond_max).await? {
        Put::Made => {}
        Put::Over => {
            return Err(AppError::field(
                "until",
                Invalid("must be later than now".into()),
            ))
        }
        Put::Full => {
            return Err(AppError::invalid(
                "the service holds its maximum of 1000 freezes: delete some first".into(),
            ))
        }
        Put::FullForName => {
            let name = freeze.by.as_ref().map_or("", |n| n.as_str());
            return Err(AppError::field(
                "match",
                Invalid(format!(
                    "the token {name:?} keeps {MAX_FREEZES_PER_NAME} freezes in force already, \
                     as many as one token name may: delete some of them first"
                )),
            ));
        }
    }
    tracing::info!(
        target: "baton::audit",
        event = "frozen",
        freeze_id = %freeze.id,
        r#match = %freeze.pattern,
        reason = freeze.reason.as_ref().map(Reason::as_str),
        by = freeze.by.as_ref().map(crate::domain::TokenName::as_str),
        "audit"
    );
    let location = format!("/freezes/{}", freeze.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(freeze_body(
            &freeze,
            &state.engine.freezes().timeline(&freeze),
        )),
    )
        .into_response())
}

/// 400 for a missing field.
fn required(field: &str, what: &str) -> AppError {
    AppError::field(field, Invalid(format!("required: {what}")))
}

/// The window of the request: recurring when it has cron fields, else
/// one-off; each field checked, the first at fault named. A recurring one
/// must open within 366 days, a one-off end within `max_days`.
fn schedule(body: &FreezeRequest, now: i64, max_days: i64) -> Result<Schedule, AppError> {
    let recurring =
        body.freeze_start.is_some() || body.freeze_end.is_some() || body.cron_timezone.is_some();
    if recurring {
        for (field, given) in [("from", &body.from), ("until", &body.until)] {
            if given.is_some() {
                return Err(AppError::field(
                    field,
                    Invalid("a freeze is one-off (from, until) or recurring (freeze_start, freeze_end), not both".into()),
                ));
            }
        }
        let cron = "a five-field cron expression, such as \"0 23 * * 5\"";
        let start = body
            .freeze_start
            .as_deref()
            .ok_or_else(|| required("freeze_start", cron))?;
        let end = body
            .freeze_end
            .as_deref()
            .ok_or_else(|| required("freeze_end", cron))?;
        let recurring = Recurring::parse(start, end, body.cron_timezone.as_deref())
            .and_then(|recurring| recurring.check_opens(now).map(|()| recurring))
            .map_err(|(field, why)| AppError::field(field, why))?;
        return Ok(Schedule::Recurring(Box::new(recurring)));
    }
    let until = body.until.as_deref().ok_or_else(|| {
        required(
            "until",
            "when the freeze ends (RFC 3339), or freeze_start and freeze_end for a recurring one",
        )
    })?;
    let until = rfc3339("until", until)?;
    let from = body
        .from
        .as_deref()
        .map(|from| rfc3339("from", from))
        .transpose()?
        .unwrap_or(now);
    if until <= now {
        return Err(AppError::field(
            "until",
            Invalid("must be later than now".into()),
        ));
    }
    if until <= from {
        return Err(AppError::field(
            "until",
            Invalid("must be later than from".into()),
        ));
    }
    if until > now.saturating_add(max_days.saturating_mul(DAY_MS)) {
        return Err(AppError::field(
            "until",
            Invalid(format!(
                "may lie at most {max_days} days ahead (BATON_FREEZE_MAX_DAYS)"
            )),
        ));
    }
    Ok(Schedule::OneOff(Window {
        start_ms: from,
        end_ms: until,
    }))
}

/// An RFC 3339 time in milliseconds since the Unix epoch.
fn rfc3339(field: &str, text: &str) -> Result<i64, AppError> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|e| {
            AppError::field(
                field,
                Invalid(format!(
                    "{text:?} is not an RFC 3339 time (such as \"2026-12-24T18:00:00Z\"): {e}"
                )),
            )
        })
}

/// List the freezes
///
/// Every freeze the token may see (those whose `match` can match a name it
/// may read), with whether it holds now (`active`), when its window ends
/// (`ends_at`, while active) and when its next one starts (`next_start`).
#[utoipa::path(get, path = "/freezes",
    responses((status = 200, description = "Every freeze the token may see", body = FreezeList)))]
async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<FreezeList>, AppError> {
    let freezes = state
        .engine
        .freezes()
        .list(|freeze| caller.may_read_some(&freeze.pattern))
        .await?;
    Ok(Json(FreezeList {
        freezes: freezes
            .iter()
            .map(|(freeze, timeline)| freeze_body(freeze, timeline))
            .collect(),
    }))
}

/// Read a freeze
///
/// 404 for a freeze whose `match` can match no name the token may read.
#[utoipa::path(get, path = "/freezes/{id}",
    params(("id" = String, Path, description = "The freeze's id")),
    responses(
        (status = 200, description = "The freeze", body = FreezeBody),
        (status = 404, response = FreezeNotFound),
    ))]
async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<FreezeBody>, AppError> {
    let (freeze, timeline) = found(&state, &caller, &id).await?;
    Ok(Json(freeze_body(&freeze, &timeline)))
}

/// Delete a freeze
///
/// Takes `admin` on every name it matches. Every instance applies it within
/// a second: waiters it held back are served in line order.
#[utoipa::path(delete, path = "/freezes/{id}",
    params(("id" = String, Path, description = "The freeze's id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, response = Forbidden),
        (status = 404, response = FreezeNotFound),
    ))]
async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, AppError> {
    let (freeze, _) = found(&state, &caller, &id).await?;
    caller.require_covering(Scope::Admin, &freeze.pattern)?;
    if !state.engine.freezes().delete(freeze.id).await? {
        return Err(AppError::from(ProblemType::FreezeNotFound));
    }
    tracing::info!(
        target: "baton::audit",
        event = "unfrozen",
        freeze_id = %freeze.id,
        r#match = %freeze.pattern,
        by = caller.name().map(crate::domain::TokenName::as_str),
        "audit"
    );
    Ok(StatusCode::NO_CONTENT)
}

/// The freeze `id` with its windows now, or 404: for an id that is not a
/// UUID, and for a freeze the caller may not see (one whose `match` can
/// match no name it may read), as for one that does not exist.
async fn found(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<(Freeze, Timeline), AppError> {
    let id = FreezeId::parse(id).map_err(|_| AppError::from(ProblemType::FreezeNotFound))?;
    state
        .engine
        .freezes()
        .get(id)
        .await?
        .filter(|(freeze, _)| caller.may_read_some(&freeze.pattern))
        .ok_or(AppError::from(ProblemType::FreezeNotFound))
}

/// `freeze` as the API shows it, with its windows worked out (`timeline`).
fn freeze_body(freeze: &Freeze, timeline: &Timeline) -> FreezeBody {
    let time = crate::wire::rfc3339_ms_signed;
    let mut body = FreezeBody {
        id: freeze.id.to_string(),
        pattern: freeze.pattern.to_string(),
        kind: freeze.kind,
        reason: freeze.reason.as_ref().map(|r| r.as_str().to_owned()),
        from: None,
        until: None,
        freeze_start: None,
        freeze_end: None,
        cron_timezone: None,
        active: false,
        ends_at: None,
        next_start: None,
        created_at: time(freeze.created_ms),
        by: freeze.by.as_ref().map(|b| b.as_str().to_owned()),
    };
    match &freeze.schedule {
        Schedule::OneOff(window) => {
            body.from = Some(time(window.start_ms));
            body.until = Some(time(window.end_ms));
        }
        Schedule::Recurring(recurring) => {
            body.freeze_start = Some(recurring.start().to_owned());
            body.freeze_end = Some(recurring.end().to_owned());
            body.cron_timezone = Some(recurring.zone().to_owned());
        }
    }
    if let Some(window) = timeline.window {
        if window.contains(timeline.at_ms) {
            body.active = true;
            body.ends_at = Some(time(window.end_ms));
            body.next_start = timeline.after.map(|next| time(next.start_ms));
        } else {
            body.next_start = Some(time(window.start_ms));
        }
    }
    body
}
