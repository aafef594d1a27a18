//! The holder's own stream (`GET /{kind}s/{name}/{id}/events`: its lease's
//! refreshes, yield requests, expiry and end, from any instance) and the
//! yield request (`POST /{kind}s/{name}/yield`: ask the holders to finish
//! early), for both kinds.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::events::KEEP_ALIVE;
use super::json::rfc3339_ms;
use super::lease::{IdPath, NamePath};
use super::problem::responses::RedisUnavailable;
use super::{AppError, AppState, Caller, Json, JsonBody};
use crate::access::{Quota, QuotaSlot};
use crate::domain::{Kind, Name, Owner, Reason, Scope};
use crate::engine::events::StreamSlot;
use crate::engine::following::{HolderEvent, HolderStream};
use crate::telemetry::audit_yield;
use crate::wire::{HolderEventBody, Problem, YieldAnswer, YieldRequest};

/// The holder's stream and the yield request of both kinds, documented.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(follow_lock))
        .routes(routes!(follow_semaphore))
        .routes(routes!(yield_lock))
        .routes(routes!(yield_semaphore))
}

/// Follow a lock lease
///
/// The holder of lease `{id}` follows it (`text/event-stream`), through any
/// baton instance. Events, each with the lease's `fencing_token` and never
/// its id: `held` at once (`name`, `expires_at`, `owner`); `refreshed` (the
/// new `expires_at`, whoever refreshed it); `yield-requested` (`by`,
/// `reason`, `waiting`: someone asks this holder to finish early; nothing
/// is taken); `expiring` once when `min(10 s, ttl/3)` is left without a
/// refresh; then the last event, after which the stream ends: `released` (by
/// its holder) or `lost` with `reason` `expired` (once Redis confirms it),
/// `force-released` or `superseded`. Each arrives within about a second of
/// its cause on any instance. A comment line is sent every 15 s. Needs
/// `read` on the name.
#[utoipa::path(
    get,
    path = "/locks/{name}/{id}/events",
    operation_id = "follow_lock_lease",
    params(NamePath, IdPath),
    responses(
        (status = 200, description = "The lease's events; each event's data is a HolderEventBody",
            content_type = "text/event-stream", body = HolderEventBody),
        (status = 404, description = "`lease-not-found`: no live lease has this id",
            content_type = "application/problem+json", body = Problem),
        (status = 503, response = RedisUnavailable),
    )
)]
async fn follow_lock(
    state: State<AppState>,
    caller: Caller,
    name: NamePath,
    id: IdPath,
) -> Result<Response, AppError> {
    follow(state, Kind::Lock, caller, name, id).await
}

/// Follow a semaphore lease
///
/// As `GET /locks/{name}/{id}/events`, for a semaphore's lease.
#[utoipa::path(
    get,
    path = "/semaphores/{name}/{id}/events",
    operation_id = "follow_semaphore_lease",
    params(NamePath, IdPath),
    responses(
        (status = 200, description = "The lease's events; each event's data is a HolderEventBody",
            content_type = "text/event-stream", body = HolderEventBody),
        (status = 404, description = "`lease-not-found`: no live lease has this id",
            content_type = "application/problem+json", body = Problem),
        (status = 503, response = RedisUnavailable),
    )
)]
async fn follow_semaphore(
    state: State<AppState>,
    caller: Caller,
    name: NamePath,
    id: IdPath,
) -> Result<Response, AppError> {
    follow(state, Kind::Semaphore, caller, name, id).await
}

/// Ask a lock's holders to yield
///
/// Asks every current holder to finish early: each holder's stream gets a
/// `yield-requested` event (`by` the asking token's name, or this request's
/// `owner` on a service without tokens, and its `reason`), and so does
/// `/events`; an audit line records it. Nothing is taken from anyone.
/// Answers how many leases were asked (0 when none is held). One asker has
/// a holder told at most once every 10 s: asked again sooner while the same
/// leases hold the name, they are not told, and the answer says
/// `already_asked` (`holders` 0). Needs `write` on the name.
#[utoipa::path(
    post,
    path = "/locks/{name}/yield",
    operation_id = "ask_lock_holders_to_yield",
    params(NamePath),
    request_body(content = Option<YieldRequest>, description = "Optional; an empty body asks anonymously"),
    responses(
        (status = 202, description = "The holders were asked", body = YieldAnswer),
        (status = 503, response = RedisUnavailable),
    )
)]
async fn yield_lock(
    state: State<AppState>,
    caller: Caller,
    name: NamePath,
    body: JsonBody<YieldRequest>,
) -> Result<(StatusCode, Json<YieldAnswer>), AppError> {
    ask_yield(state, Kind::Lock, caller, name, body).await
}

/// Ask a semaphore's holders to yield
///
/// As `POST /locks/{name}/yield`, for every holder of a semaphore.
#[utoipa::path(
    post,
    path = "/semaphores/{name}/yield",
    operation_id = "ask_semaphore_holders_to_yield",
    params(NamePath),
    request_body(content = Option<YieldRequest>, description = "Optional; an empty body asks anonymously"),
    responses(
        (status = 202, description = "The holders were asked", body = YieldAnswer),
        (status = 503, response = RedisUnavailable),
    )
)]
async fn yield_semaphore(
    state: State<AppState>,
    caller: Caller,
    name: NamePath,
    body: JsonBody<YieldRequest>,
) -> Result<(StatusCode, Json<YieldAnswer>), AppError> {
    ask_yield(state, Kind::Semaphore, caller, name, body).await
}

/// `GET /{kind}s/{name}/{id}/events` (`read`).
async fn follow(
    State(state): State<AppState>,
    kind: Kind,
    caller: Caller,
    NamePath { name }: NamePath,
    IdPath { id }: IdPath,
) -> Result<Response, AppError> {
    caller.require(Scope::Read, &name)?;
    // Holders' streams are event streams: the token's share, then the
    // instance's cap.
    let quota = state.quotas.take(caller.whose(), Quota::Streams)?;
    let counted = state
        .engine
        .events()
        .count_stream()
        .map_err(|e| AppError::TooManyStreams { max: e.max })?;
    let stream = state
        .leases(kind)
        .follow(&name, id)
        .await?
        .ok_or(AppError::LeaseNotFound)?;
    let following = Following {
        stream,
        caller,
        name,
        _slots: (quota, counted),
    };
    let sse = Sse::new(events(following)).keep_alive(KeepAlive::new().interval(KEEP_ALIVE));
    Ok((
        [
            (header::CACHE_CONTROL, "no-cache"),
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        sse,
    )
        .into_response())
}

/// `POST /{kind}s/{name}/yield` (`write`).
async fn ask_yield(
    State(state): State<AppState>,
    kind: Kind,
    caller: Caller,
    NamePath { name }: NamePath,
    JsonBody(body): JsonBody<YieldRequest>,
) -> Result<(StatusCode, Json<YieldAnswer>), AppError> {
    caller.require(Scope::Write, &name)?;
    let owner = Owner::parse(body.owner).map_err(|e| AppError::field("owner", e))?;
    let reason = Reason::parse(body.reason).map_err(|e| AppError::field("reason", e))?;
    // `by` is who asks as the service knows it: the token's name; the
    // `owner` the asker typed only on a service without tokens.
    let by = match caller.name() {
        Some(token) => Some(
            Owner::parse(Some(token.as_str().to_owned()))
                .map_err(|_| AppError::Internal("a token name that is no owner label"))?
                .ok_or(AppError::Internal("an empty token name"))?,
        ),
        None => owner.clone(),
    };
    let asker = by.as_ref().map_or("", Owner::as_str);
    // Who holds it now, by fencing token: each is told at most once per
    // asker every 10 s.
    let holding: Vec<u64> = state
        .leases(kind)
        .status(&name)
        .await?
        .leases
        .iter()
        .map(|holder| holder.fencing_token)
        .collect();
    if !state.yields.may_tell(asker, kind, &name, &holding) {
        return Ok((
            StatusCode::ACCEPTED,
            Json(YieldAnswer {
                holders: 0,
                already_asked: true,
            }),
        ));
    }
    let holders = state
        .leases(kind)
        .ask_yield(&name, by.as_ref(), reason.as_ref())
        .await?;
    audit_yield(
        kind,
        &name,
        owner.as_ref(),
        caller.name(),
        holders,
        reason.as_ref(),
    );
    Ok((
        StatusCode::ACCEPTED,
        Json(YieldAnswer {
            holders,
            already_asked: false,
        }),
    ))
}

/// A holder's stream open: its caller, and its slots in the token's share
/// and the instance's cap.
struct Following {
    stream: HolderStream,
    caller: Caller,
    name: Name,
    _slots: (Option<QuotaSlot>, StreamSlot),
}

/// The stream's events as SSE, until its last event (or the service stops),
/// or until the token may no longer read the name (removed, narrowed or
/// expired by a change of the tokens in force): then it ends at once.
fn events(following: Following) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(Some(following), |state| async move {
        let mut following = state?;
        let event = loop {
            tokio::select! {
                biased;
                now = following.caller.changed() => match now {
                    Some(principal) if principal.may_read(&following.name) => {}
                    _ => return None,
                },
                event = following.stream.next() => break event?,
            }
        };
        let sse = Event::default()
            .event(event.as_str())
            .json_data(body(&event, following.name.as_str()))
            .unwrap_or_else(|_| Event::default().comment("unreadable event"));
        let next = (!event.is_last()).then_some(following);
        Some((Ok(sse), next))
    })
}

/// The data of `event` on the wire.
fn body(event: &HolderEvent, name: &str) -> HolderEventBody {
    match event {
        HolderEvent::Held {
            fencing_token,
            expires_at_ms,
            owner,
        } => HolderEventBody {
            name: Some(name.to_owned()),
            fencing_token: *fencing_token,
            expires_at: Some(rfc3339_ms(*expires_at_ms)),
            owner: owner.as_ref().map(|o| o.as_str().to_owned()),
            ..HolderEventBody::default()
        },
        HolderEvent::Refreshed {
            fencing_token,
            expires_at_ms,
        }
        | HolderEvent::Expiring {
            fencing_token,
            expires_at_ms,
        } => HolderEventBody {
            fencing_token: *fencing_token,
            expires_at: Some(rfc3339_ms(*expires_at_ms)),
            ..HolderEventBody::default()
        },
        HolderEvent::YieldRequested {
            fencing_token,
            by,
            reason,
            waiting,
        } => HolderEventBody {
            fencing_token: *fencing_token,
            by: by.as_ref().map(|b| b.as_str().to_owned()),
            reason: reason.as_ref().map(|r| r.as_str().to_owned()),
            waiting: Some(*waiting),
            ..HolderEventBody::default()
        },
        HolderEvent::Released { fencing_token } => HolderEventBody {
            fencing_token: *fencing_token,
            ..HolderEventBody::default()
        },
        HolderEvent::Lost {
            fencing_token,
            reason,
        } => HolderEventBody {
            fencing_token: *fencing_token,
            reason: Some(reason.as_str().to_owned()),
            ..HolderEventBody::default()
        },
    }
}
