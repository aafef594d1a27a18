//! `/freezes`: making, listing, reading and deleting freezes. Making and
//! deleting one takes `admin` on every name it matches; reading them, any
//! valid token. Every instance applies a change within a second.

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::DateTime;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::lease::rfc3339_ms;
use super::problem::responses::{Forbidden, FreezeNotFound};
use super::{AppError, AppState, Caller, Json, JsonBody};
use crate::domain::{
    Freeze, FreezeId, Invalid, NamePattern, Reason, Recurring, Schedule, Scope, Window,
};
use crate::engine::{wall_clock_ms, Put};
use crate::wire::{FreezeBody, FreezeList, FreezeRequest};

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
    let freeze = Freeze {
        id: FreezeId::new(),
        pattern,
        kind: body.kind,
        reason,
        schedule: schedule(&body, now)?,
        created_ms: now,
        by: caller.name().cloned(),
    };
    match state.engine.freezes().put(&freeze).await? {
        Put::Made => {}
        Put::Over => {
            return Err(AppError::field(
                "until",
                Invalid("must be later than now".into()),
            ))
        }
        Put::Full => {
            return Err(AppError::Invalid(
                "the service holds its maximum of 1000 freezes: delete some first".into(),
            ))
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
        Json(freeze_body(&freeze, now)),
    )
        .into_response())
}

/// 400 for a missing field.
fn required(field: &str, what: &str) -> AppError {
    AppError::field(field, Invalid(format!("required: {what}")))
}

/// The window of the request: recurring when it has cron fields, else
/// one-off; each field checked, the first at fault named.
fn schedule(body: &FreezeRequest, now: i64) -> Result<Schedule, AppError> {
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
        return Recurring::parse(start, end, body.cron_timezone.as_deref())
            .map(|recurring| Schedule::Recurring(Box::new(recurring)))
            .map_err(|(field, why)| AppError::field(field, why));
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
/// Every freeze, with whether it holds now (`active`), when its window ends
/// (`ends_at`, while active) and when its next one starts (`next_start`).
#[utoipa::path(get, path = "/freezes",
    responses((status = 200, description = "Every freeze", body = FreezeList)))]
async fn list(
    State(state): State<AppState>,
    _caller: Caller,
) -> Result<Json<FreezeList>, AppError> {
    let now = wall_clock_ms();
    let freezes = state.engine.freezes().list().await?;
    Ok(Json(FreezeList {
        freezes: freezes.iter().map(|f| freeze_body(f, now)).collect(),
    }))
}

/// Read a freeze
#[utoipa::path(get, path = "/freezes/{id}",
    params(("id" = String, Path, description = "The freeze's id")),
    responses(
        (status = 200, description = "The freeze", body = FreezeBody),
        (status = 404, response = FreezeNotFound),
    ))]
async fn show(
    State(state): State<AppState>,
    _caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<FreezeBody>, AppError> {
    let freeze = found(&state, &id).await?;
    Ok(Json(freeze_body(&freeze, wall_clock_ms())))
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
    let freeze = found(&state, &id).await?;
    caller.require_covering(Scope::Admin, &freeze.pattern)?;
    if !state.engine.freezes().delete(freeze.id).await? {
        return Err(AppError::FreezeNotFound);
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

/// The freeze `id`, or 404 (an id that is not a UUID names none).
async fn found(state: &AppState, id: &str) -> Result<Freeze, AppError> {
    let id = FreezeId::parse(id).map_err(|_| AppError::FreezeNotFound)?;
    state
        .engine
        .freezes()
        .get(id)
        .await?
        .ok_or(AppError::FreezeNotFound)
}

/// `freeze` as the API shows it at `now_ms`.
fn freeze_body(freeze: &Freeze, now_ms: i64) -> FreezeBody {
    let time = |ms: i64| rfc3339_ms(u64::try_from(ms).unwrap_or(0));
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
    if let Some(window) = freeze.window_at(now_ms) {
        if window.contains(now_ms) {
            body.active = true;
            body.ends_at = Some(time(window.end_ms));
            body.next_start = freeze
                .window_at(window.end_ms)
                .map(|next| time(next.start_ms));
        } else {
            body.next_start = Some(time(window.start_ms));
        }
    }
    body
}
