//! The routes of `/claims` and `/claims/{id}`, their handlers and their
//! OpenAPI operations.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::answer::{claim_body, created_or_refused};
use super::events::with_progress;
use super::request::{asked, ClaimCall, ClaimPath};
use crate::access::{Principal, Quota};
use crate::domain::{ClaimId, Name, Scope};
use crate::engine::Refreshed;
use crate::http::Parked;
use crate::routes::extract::parse_json;
use crate::routes::lease::ttl;
use crate::routes::{progress, AppError, AppState, Caller, Json, JsonBody};
use crate::wire::{ClaimBody, ClaimRequest, Problem, ProblemType, Refresh};

/// `/claims` and `/claims/{id}`, documented.
pub fn router() -> OpenApiRouter<AppState> {
    let mut router = OpenApiRouter::new()
        .routes(routes!(claim))
        .routes(routes!(show, refresh, release));
    document(router.get_openapi_mut());
    router
}

/// Take several names at once, all or nothing
///
/// Takes every name of the claim (1 to 16 locks and semaphores, each at most
/// once) or none: 201 only when every lease is held. While a name is busy
/// and `wait_ms` is above 0 the claim waits in that name's line, keeping
/// the names it holds already; claims take their names in one global order
/// (locks before semaphores, then by name), so two claims never wait for
/// each other. After `wait_ms`: 409 `claim-refused`, with nothing held.
/// Each lease is an ordinary lease of its name. A freeze on one of its
/// names: without `wait_ms`, 423 `frozen` as for a single request; with
/// it, the claim holds none of its names while the freeze holds one (it
/// gives back what it took and is in no line), and takes them when the
/// window ends; 423 `frozen` if `wait_ms` ends first. `override` (an admin
/// token on every name) takes the names through freezes. With `Accept:
/// text/event-stream` and a `wait_ms`: 200 server-sent events, `queued`
/// (`{"held": [{"kind", "name"}], "waiting_for": {"kind", "name"},
/// "position"?, "waiting"?}`) each time it joins a name's line, `frozen`
/// (`{"held": [], "waiting_for", "until", "reason"?, "freeze_id"?}`) while a
/// freeze holds one of its names, then one `acquired` (the claim) or
/// `problem`.
#[utoipa::path(post, path = "/claims", tag = "claims", operation_id = "create_claim",
    request_body = ClaimRequest,
    responses(
        (status = 201, description = "Every name is held", body = ClaimBody,
            headers(("Location" = String, description = "The claim: /claims/{id}"))),
        (status = 200, description = "With `Accept: text/event-stream` and a `wait_ms`: progress events, then `acquired` or `problem`", content_type = "text/event-stream", body = String),
    ))]
async fn claim(State(state): State<AppState>, call: ClaimCall) -> Result<Response, AppError> {
    let ClaimCall {
        caller,
        accepts_events,
        context,
        body,
    } = call;
    let (parts, mut request) = asked(parse_json(&body)?, state.settings.max_wait_ms)?;
    drop(body);
    caller.require_all(Scope::Write, parts.iter().map(|p| &p.name))?;
    if request.override_reason.is_some() {
        // Granted through freezes: an administrator's decision, on every name.
        caller.require_all(Scope::Admin, parts.iter().map(|p| &p.name))?;
    }
    caller.require_priority(request.priority)?;
    request.by = caller.name().cloned();
    let wait = request.wait;
    // A waiting claim takes a slot of its token's share of waiters.
    let slot = if wait.as_duration().is_zero() {
        None
    } else {
        state.quotas.take(caller.whose(), Quota::Waiters)?
    };
    // What it needs of its token while it waits: `write` on every name.
    let names: Vec<Name> = parts.iter().map(|p| p.name.clone()).collect();
    let priority = request.priority;
    let overrides = request.override_reason.is_some();
    let still = move |principal: &Principal| -> Result<(), AppError> {
        principal.require_all(Scope::Write, &names)?;
        if overrides {
            principal.require_all(Scope::Admin, &names)?;
        }
        principal.require_priority(priority)?;
        Ok(())
    };
    let claims = state.engine.claims();
    if progress::wanted(accepts_events, wait) {
        let revoked = Box::pin(caller.revoked(still));
        return Ok(with_progress(&state.engine, parts, request, revoked, slot));
    }
    let acquisition = async move { claims.acquire(parts, request, None).await };
    if wait.as_duration().is_zero() {
        return created_or_refused(acquisition.await?);
    }
    // A token removed, narrowed or expired while it waits: the claim is
    // dropped (it leaves the line and gives back what it took) and is
    // answered 401 or 403.
    let revocable = caller.can_change();
    let acquisition = Caller::unless_revoked(revocable, caller.revoked(still), async move {
        acquisition.await.map_err(AppError::from)
    });
    let answer = async move {
        let answer = match acquisition.await {
            Ok(outcome) => created_or_refused(outcome).unwrap_or_else(IntoResponse::into_response),
            Err(err) => err.into_response(),
        };
        drop(slot);
        answer
    };
    Ok(Parked::new(answer, context).into_response())
}

/// Show a claim
///
/// The leases of the claim still held (each refreshed, released or lost as
/// an ordinary lease of its name); 404 once none is.
#[utoipa::path(get, path = "/claims/{id}", tag = "claims", operation_id = "show_claim", params(ClaimPath),
    responses(
        (status = 200, description = "The claim's leases still held", body = ClaimBody),
    ))]
async fn show(
    State(state): State<AppState>,
    caller: Caller,
    ClaimPath { id }: ClaimPath,
) -> Result<Json<ClaimBody>, AppError> {
    may_write(&state, &caller, &id).await?;
    let claim = state.engine.claims().check(&id).await?;
    let claim = claim.ok_or(AppError::from(ProblemType::ClaimNotFound))?;
    Ok(Json(claim_body(claim)))
}

/// Refresh every lease of a claim
///
/// Refreshes every lease of the claim by `ttl_ms` (default: each lease's
/// own ttl): 200 with the claim and its new `expires_at`. A claim is held
/// whole or not at all: when some of its leases are gone (expired,
/// force-released), the rest are released and the answer is 404
/// `claim-not-found` naming those that were gone.
#[utoipa::path(patch, path = "/claims/{id}", tag = "claims", operation_id = "refresh_claim", params(ClaimPath),
    request_body = Refresh,
    responses(
        (status = 200, description = "Every lease refreshed", body = ClaimBody),
    ))]
async fn refresh(
    State(state): State<AppState>,
    caller: Caller,
    ClaimPath { id }: ClaimPath,
    JsonBody(body): JsonBody<Refresh>,
) -> Result<Json<ClaimBody>, AppError> {
    let ttl = ttl(body.ttl_ms)?;
    may_write(&state, &caller, &id).await?;
    match state
        .engine
        .claims()
        .refresh(&id, ttl, caller.name())
        .await?
    {
        Refreshed::Whole(claim) => Ok(Json(claim_body(claim))),
        Refreshed::Broken(lost) if !lost.is_empty() => {
            let lost: Vec<_> = lost
                .into_iter()
                .map(|(kind, name)| (kind, name.to_string()))
                .collect();
            Err(AppError::from(Problem::claim_broken(&lost)))
        }
        Refreshed::Broken(_) | Refreshed::NotFound => {
            Err(AppError::from(ProblemType::ClaimNotFound))
        }
    }
}

/// Release a claim
///
/// Releases every lease of the claim: 204; 404 when none was held.
#[utoipa::path(delete, path = "/claims/{id}", tag = "claims", operation_id = "release_claim", params(ClaimPath),
    responses(
        (status = 204, description = "Released"),
    ))]
async fn release(
    State(state): State<AppState>,
    caller: Caller,
    ClaimPath { id }: ClaimPath,
) -> Result<StatusCode, AppError> {
    may_write(&state, &caller, &id).await?;
    if state.engine.claims().release(&id, caller.name()).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(AppError::from(ProblemType::ClaimNotFound))
    }
}

/// `write` on every name of the claim `id` (the id is a capability, but
/// scopes still bound what a token may do); 404 when there is no such claim.
async fn may_write(state: &AppState, caller: &Caller, id: &ClaimId) -> Result<(), AppError> {
    let names = state.engine.claims().names(id).await?;
    let names = names.ok_or(AppError::from(ProblemType::ClaimNotFound))?;
    caller.require_all(Scope::Write, names.iter().map(|(_, name)| name))?;
    Ok(())
}

/// Adds each claim operation's own problem answers: `claim-refused` to
/// `POST /claims`, `claim-not-found` to the operations on `/claims/{id}`.
fn document(doc: &mut utoipa::openapi::OpenApi) {
    for (path, item) in &mut doc.paths.paths {
        let (status, kind) = if path.contains("{id}") {
            ("404", ProblemType::ClaimNotFound)
        } else {
            ("409", ProblemType::ClaimRefused)
        };
        let operations = [
            &mut item.get,
            &mut item.post,
            &mut item.patch,
            &mut item.delete,
        ];
        for op in operations.into_iter().flatten() {
            let reference = kind.response_ref();
            op.responses
                .responses
                .insert(status.to_owned(), reference.into());
            if kind == ProblemType::ClaimRefused {
                // A claim on a frozen name is answered as a single request.
                let frozen = ProblemType::Frozen.response_ref();
                op.responses
                    .responses
                    .insert("423".to_owned(), frozen.into());
            }
        }
    }
}
