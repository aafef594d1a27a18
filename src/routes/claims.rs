//! `/claims`: several names held together, all or nothing. `POST /claims`
//! takes every name (201 with the claim) or none (409 `claim-refused`);
//! `GET`, `PATCH` and `DELETE /claims/{id}` show, refresh and release it
//! from any instance. Each lease of a claim is an ordinary lease of its name.
//! With `Accept: text/event-stream` and a `wait_ms`, the acquisition sends
//! `queued` events saying which names it holds and which it waits for, then
//! `acquired` (the claim) or `problem`.

use std::convert::Infallible;
use std::future::Future;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use tokio::sync::mpsc;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{parse_json, read_body};
use super::lease::{acquire_request, ttl};
use super::progress::json_event;
use super::{progress, AppError, AppState, Caller, Json, JsonBody};
use crate::access::{Principal, Quota, QuotaSlot};
use crate::domain::{
    AcquireRequest, ClaimId, ClaimPart, ClaimParts, Demand, Kind, Limit, Name, Permits, Scope,
};
use crate::engine::{Claim, ClaimProgress, ClaimRefused, ClaimWaiting, Engine, Refreshed, Refusal};
use crate::http::Parked;
use crate::telemetry::RequestContext;
use crate::wire::{
    AcquireFields, ClaimBody, ClaimFrozen, ClaimName, ClaimQueued, ClaimRequest, LeaseBody,
    Problem, ProblemType, ProgressEventName, Refresh,
};

/// `/claims` and `/claims/{id}`, documented.
pub fn router() -> OpenApiRouter<AppState> {
    let mut router = OpenApiRouter::new()
        .routes(routes!(claim))
        .routes(routes!(show, refresh, release));
    document(router.get_openapi_mut());
    router
}

/// The `{id}` path parameter of `/claims/{id}`.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ClaimPath {
    /// The claim id from `POST /claims`.
    #[param(value_type = String, format = Uuid)]
    pub id: ClaimId,
}

impl<S: Send + Sync> FromRequestParts<S> for ClaimPath {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        let axum::extract::Path(raw) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|e| AppError::invalid(format!("id: {}", e.body_text())))?;
        let id = ClaimId::parse(&raw).map_err(|e| AppError::field("id", e))?;
        Ok(Self { id })
    }
}

/// What `POST /claims` takes from its request: the caller, whether it
/// accepts progress events, what its log lines show should it wait, and the
/// body (read whole; the scopes are checked once it names the names).
pub struct ClaimCall {
    caller: Caller,
    accepts_events: bool,
    context: RequestContext,
    body: Bytes,
}

impl FromRequest<AppState> for ClaimCall {
    type Rejection = AppError;

    fn from_request(
        request: Request,
        state: &AppState,
    ) -> impl Future<Output = Result<Self, AppError>> + Send {
        let state = state.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let caller = Caller::of(&parts)?;
            let accepts_events = progress::accepts_events(&parts.headers);
            let context = RequestContext::of(&parts);
            let body = read_body(Request::from_parts(parts, body), &state).await?;
            Ok(Self {
                caller,
                accepts_events,
                context,
                body,
            })
        })
    }
}

/// A claim's names and fields, parsed into domain types.
///
/// # Errors
/// `invalid-request` naming the first field at fault.
fn asked(body: ClaimRequest, max_wait_ms: u64) -> Result<(ClaimParts, AcquireRequest), AppError> {
    let mut parts = Vec::new();
    for (i, lock) in body.locks.into_iter().enumerate() {
        let name =
            Name::parse(&lock.name).map_err(|e| AppError::field(&format!("locks[{i}].name"), e))?;
        let demand = Demand::lock(lock.shared.unwrap_or(false));
        parts.push(ClaimPart {
            kind: Kind::Lock,
            name,
            demand,
        });
    }
    for (i, semaphore) in body.semaphores.into_iter().enumerate() {
        let field = |f: &str| format!("semaphores[{i}].{f}");
        let name = Name::parse(&semaphore.name).map_err(|e| AppError::field(&field("name"), e))?;
        let limit = semaphore
            .limit
            .ok_or_else(|| AppError::invalid(format!("{}: is required", field("limit"))))
            .and_then(|n| Limit::new(n).map_err(|e| AppError::field(&field("limit"), e)))?;
        let permits = semaphore
            .permits
            .map_or(Ok(Permits::ONE), Permits::new)
            .map_err(|e| AppError::field(&field("permits"), e))?;
        let demand =
            Demand::semaphore(permits, limit).map_err(|e| AppError::field(&field("permits"), e))?;
        parts.push(ClaimPart {
            kind: Kind::Semaphore,
            name,
            demand,
        });
    }
    let parts = ClaimParts::new(parts).map_err(|e| AppError::field("names", e))?;
    let fields = AcquireFields {
        ttl_ms: body.ttl_ms,
        wait_ms: body.wait_ms,
        owner: body.owner,
        newest_wins: None,
        priority: body.priority,
        ask_yield: None,
        override_reason: body.override_reason,
        keep_place_ms: None,
        notify: None,
    };
    let request = acquire_request(fields, max_wait_ms, &[])?;
    Ok((parts, request))
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
    let acquisition =
        caller.unless_revoked(
            still,
            async move { acquisition.await.map_err(AppError::from) },
        );
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

/// 201 with the claim and its `Location`, or the problem of the refusal.
fn created_or_refused(outcome: Result<Claim, ClaimRefused>) -> Result<Response, AppError> {
    let claim = outcome.map_err(refused)?;
    let location = format!("/claims/{}", claim.id.expose());
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(claim_body(claim)),
    )
        .into_response())
}

/// `claim-refused`, naming the name in the way and how busy it is; or
/// `frozen` (423, as for a single request) when a freeze holds that name.
fn refused(refused: ClaimRefused) -> AppError {
    let ClaimRefused {
        kind,
        name,
        refusal,
    } = refused;
    let (detail, next_expiry_in) = match refusal {
        Some(Refusal::Busy(busy)) => {
            let next = busy.next_expiry_in;
            (
                AppError::busy(kind, &name, busy).problem().detail.clone(),
                next,
            )
        }
        Some(Refusal::Superseded { .. }) => (format!("{kind} '{name}' was superseded"), None),
        // (A claim keeps no place: it never asks keep_place_ms.)
        Some(Refusal::Ticketed(_)) => (format!("{kind} '{name}' kept its place"), None),
        Some(Refusal::Frozen(frozen)) => return AppError::frozen(&name, frozen),
        None => (
            format!("the lease of {kind} '{name}' was lost while the claim waited"),
            None,
        ),
    };
    AppError::claim_refused(&detail, vec![name.to_string()], next_expiry_in)
}

/// A claim as its holder sees it.
fn claim_body(claim: Claim) -> ClaimBody {
    let expires_at = crate::wire::rfc3339_ms(claim.expires_at_ms());
    ClaimBody {
        id: claim.id.expose(),
        leases: claim
            .leases
            .into_iter()
            .map(|(kind, lease)| match kind {
                Kind::Lock => LeaseBody::Lock(lease.into()),
                Kind::Semaphore => LeaseBody::Semaphore(lease.into()),
            })
            .collect(),
        expires_at,
    }
}

/// A claim's acquisition with progress events: `queued` each time it joins
/// a name's line (the names it holds, the one it waits for, its place
/// there), then one `acquired` or `problem`. Dropping the stream (the
/// client hung up) drops the acquisition, which gives back what it took.
fn with_progress(
    engine: &Engine,
    parts: ClaimParts,
    request: AcquireRequest,
    revoked: BoxFuture<'static, AppError>,
    slot: Option<QuotaSlot>,
) -> Response {
    let (heard, hearing) = mpsc::unbounded_channel();
    let claims = engine.claims();
    let acquisition = Box::pin(async move {
        let acquisition = async move {
            match claims.acquire(parts, request, Some(heard)).await {
                Ok(Ok(claim)) => Ok(claim_body(claim)),
                Ok(Err(refusal)) => Err(refused(refusal)),
                Err(err) => Err(AppError::from(err)),
            }
        };
        let outcome = tokio::select! {
            biased;
            err = revoked => Err(err),
            outcome = acquisition => outcome,
        };
        drop(slot);
        outcome
    });
    let state = (Some(acquisition), hearing, engine.clone());
    let stream =
        futures_util::stream::unfold(state, |(acquisition, mut hearing, engine)| async move {
            let mut acquisition = acquisition?;
            let event = tokio::select! {
                biased;
                outcome = &mut acquisition => {
                    let event = match outcome {
                        Ok(claim) => json_event(ProgressEventName::Acquired, &claim),
                        Err(err) => json_event(ProgressEventName::Problem, err.problem()),
                    };
                    return Some((Ok::<_, Infallible>(event), (None, hearing, engine)));
                }
                Some(progress) = hearing.recv() => queued(&engine, progress).await,
            };
            Some((Ok(event), (Some(acquisition), hearing, engine)))
        });
    (
        [
            (header::CACHE_CONTROL, "no-cache"),
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        Sse::new(stream).keep_alive(KeepAlive::new().interval(super::events::KEEP_ALIVE)),
    )
        .into_response()
}

/// The event of a claim waiting where `progress` says: `queued` in a
/// name's line (with its place there), or `frozen` while a freeze holds one
/// of its names (it holds none of them then).
async fn queued(engine: &Engine, progress: ClaimProgress) -> Event {
    let named = |(kind, name): (Kind, Name)| ClaimName {
        kind,
        name: name.to_string(),
    };
    let held = progress.held.into_iter().map(named).collect();
    let waiting_for = named(progress.waiting_for);
    let in_line = match progress.waiting {
        ClaimWaiting::InLine(in_line) => in_line,
        ClaimWaiting::Frozen(frozen) => {
            let data = ClaimFrozen {
                held,
                waiting_for,
                until: crate::wire::rfc3339_ms_signed(frozen.until_ms),
                reason: frozen.reason.map(|r| r.as_str().to_owned()),
                freeze_id: frozen.freeze_id.map(|id| id.to_string()),
            };
            return json_event(ProgressEventName::Frozen, &data);
        }
    };
    // Redis unreachable: the event goes without the place.
    let place = engine.place(&in_line).await.ok().flatten();
    let data = ClaimQueued {
        held,
        waiting_for,
        position: place.as_ref().map(|p| p.position),
        waiting: place.as_ref().map(|p| p.waiting),
    };
    json_event(ProgressEventName::Queued, &data)
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
            let reference = utoipa::openapi::Ref::from_response_name(kind.component_name());
            op.responses
                .responses
                .insert(status.to_owned(), reference.into());
            if kind == ProblemType::ClaimRefused {
                // A claim on a frozen name is answered as a single request.
                let frozen =
                    utoipa::openapi::Ref::from_response_name(ProblemType::Frozen.component_name());
                op.responses
                    .responses
                    .insert("423".to_owned(), frozen.into());
            }
        }
    }
}
