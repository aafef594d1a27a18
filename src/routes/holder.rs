//! The holder's own stream (`GET /{kind}s/{name}/{id}/events`: its lease's
//! refreshes, yield requests, expiry and end, from any instance) and the
//! yield request (`POST /{kind}s/{name}/yield`: ask the holders to finish
//! early), for both kinds.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::Stream;
use std::borrow::Cow;
use utoipa::openapi::path::{HttpMethod, ParameterIn};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{OneOfBuilder, Type};
use utoipa::openapi::{Content, Object, OpenApi, Ref, ResponseBuilder};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;

use super::events::KEEP_ALIVE;
use super::kind_doc::{add_schemas, name_parameter, operation};
use super::lease::{IdPath, NamePath};
use super::{AppError, AppState, Caller, Json, JsonBody};
use crate::access::{Quota, QuotaSlot};
use crate::domain::{Kind, Name, Owner, Reason, Scope};
use crate::engine::events::StreamSlot;
use crate::engine::following::{HolderEvent, HolderStream, LostReason};
use crate::telemetry::audit_yield;
use crate::wire::{
    self, rfc3339_ms, HolderEventBody, HolderEventName, Problem, ProblemType, YieldAnswer,
    YieldRequest,
};

/// The holder's stream and the yield request of `kind`, with their OpenAPI
/// operations.
pub fn router(kind: Kind) -> OpenApiRouter<AppState> {
    let plural = kind.plural();
    let mut router = OpenApiRouter::new()
        .route(
            &format!("/{plural}/{{name}}/{{id}}/events"),
            get(move |state, caller, name, id| follow(state, kind, caller, name, id)),
        )
        .route(
            &format!("/{plural}/{{name}}/yield"),
            post(move |state, caller, name, body| ask_yield(state, kind, caller, name, body)),
        );
    document(kind, router.get_openapi_mut());
    router
}

/// Adds the operations of `kind`'s holder stream and yield request, and
/// their schemas, to `doc`.
fn document(kind: Kind, doc: &mut OpenApi) {
    let (noun, plural) = (kind.as_str(), kind.plural());
    let (follow_description, yield_description) = match kind {
        Kind::Lock => (
            "The holder of lease `{id}` follows it (`text/event-stream`), through any\n\
             baton instance. Events, each with the lease's `fencing_token` and never\n\
             its id: `held` at once (`name`, `expires_at`, `owner`); `refreshed` (the\n\
             new `expires_at`, whoever refreshed it); `yield-requested` (`by`,\n\
             `reason`, `waiting`: someone asks this holder to finish early; nothing\n\
             is taken); `expiring` once when `min(10 s, ttl/3)` is left without a\n\
             refresh; then the last event, after which the stream ends: `released` (by\n\
             its holder) or `lost` with `reason` `expired` (once Redis confirms it),\n\
             `force-released` or `superseded`. Each arrives within about a second of\n\
             its cause on any instance. A comment line is sent every 15 s. Needs\n\
             `read` on the name.",
            "Asks every current holder to finish early: each holder's stream gets a\n\
             `yield-requested` event (`by` the asking token's name, or this request's\n\
             `owner` on a service without tokens, and its `reason`), and so does\n\
             `/events`; an audit line records it. Nothing is taken from anyone.\n\
             Answers how many leases were asked (0 when none is held). One asker has\n\
             a holder told at most once every 10 s: asked again sooner while the same\n\
             leases hold the name, they are not told, and the answer says\n\
             `already_asked` (`holders` 0). Needs `write` on the name.",
        ),
        Kind::Semaphore => (
            "As `GET /locks/{name}/{id}/events`, for a semaphore's lease.",
            "As `POST /locks/{name}/yield`, for every holder of a semaphore.",
        ),
    };
    let mut lease_parameters = name_parameter();
    lease_parameters.extend(IdPath::into_params(|| Some(ParameterIn::Path)));
    let json = |name: Cow<'static, str>| Content::new(Some(Ref::from_schema_name(name)));
    doc.paths.add_path_operation(
        format!("/{plural}/{{name}}/{{id}}/events"),
        vec![HttpMethod::Get],
        operation(
            format!("follow_{noun}_lease"),
            format!("Follow a {noun} lease"),
            follow_description,
        )
        .parameters(Some(lease_parameters))
        .response(
            "200",
            ResponseBuilder::new()
                .description("The lease's events; each event's data is a HolderEventBody")
                .content("text/event-stream", json(HolderEventBody::name()))
                .build(),
        )
        .response(
            "404",
            ResponseBuilder::new()
                .description("`lease-not-found`: no live lease has this id")
                .content("application/problem+json", json(Problem::name()))
                .build(),
        )
        .response("503", ProblemType::RedisUnavailable.response_ref()),
    );
    let may_be_empty = OneOfBuilder::new()
        .item(Ref::from_schema_name(YieldRequest::name()))
        .item(Object::with_type(Type::Null));
    doc.paths.add_path_operation(
        format!("/{plural}/{{name}}/yield"),
        vec![HttpMethod::Post],
        operation(
            format!("ask_{noun}_holders_to_yield"),
            format!("Ask a {noun}'s holders to yield"),
            yield_description,
        )
        .parameters(Some(name_parameter()))
        .request_body(Some(
            RequestBodyBuilder::new()
                .description(Some("Optional; an empty body asks anonymously"))
                .content("application/json", Content::new(Some(may_be_empty)))
                .build(),
        ))
        .response(
            "202",
            ResponseBuilder::new()
                .description("The holders were asked")
                .content("application/json", json(YieldAnswer::name()))
                .build(),
        )
        .response("503", ProblemType::RedisUnavailable.response_ref()),
    );
    add_schemas::<HolderEventBody>(doc);
    add_schemas::<YieldRequest>(doc);
    add_schemas::<YieldAnswer>(doc);
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
        .map_err(|e| AppError::from(Problem::too_many_streams(e.max)))?;
    let stream = state
        .leases(kind)
        .follow(&name, id)
        .await?
        .ok_or(AppError::from(ProblemType::LeaseNotFound))?;
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
                .map_err(|_| AppError::internal("a token name that is no owner label"))?
                .ok_or(AppError::internal("an empty token name"))?,
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
        let (name, data) = body(&event, following.name.as_str());
        let sse = Event::default()
            .event(name.as_str())
            .json_data(data)
            .unwrap_or_else(|_| Event::default().comment("unreadable event"));
        let next = (!event.is_last()).then_some(following);
        Some((Ok(sse), next))
    })
}

/// The name and data of `event` on the wire.
fn body(event: &HolderEvent, name: &str) -> (HolderEventName, HolderEventBody) {
    let of = |fencing_token: &u64| HolderEventBody {
        fencing_token: *fencing_token,
        ..HolderEventBody::default()
    };
    let expiring = |fencing_token, expires_at_ms: &u64| HolderEventBody {
        expires_at: Some(rfc3339_ms(*expires_at_ms)),
        ..of(fencing_token)
    };
    match event {
        HolderEvent::Held {
            fencing_token,
            expires_at_ms,
            owner,
        } => (
            HolderEventName::Held,
            HolderEventBody {
                name: Some(name.to_owned()),
                owner: owner.as_ref().map(|o| o.as_str().to_owned()),
                ..expiring(fencing_token, expires_at_ms)
            },
        ),
        HolderEvent::Refreshed {
            fencing_token,
            expires_at_ms,
        } => (
            HolderEventName::Refreshed,
            expiring(fencing_token, expires_at_ms),
        ),
        HolderEvent::Expiring {
            fencing_token,
            expires_at_ms,
        } => (
            HolderEventName::Expiring,
            expiring(fencing_token, expires_at_ms),
        ),
        HolderEvent::YieldRequested {
            fencing_token,
            by,
            reason,
            waiting,
        } => (
            HolderEventName::YieldRequested,
            HolderEventBody {
                by: by.as_ref().map(|b| b.as_str().to_owned()),
                reason: reason.as_ref().map(|r| r.as_str().to_owned()),
                waiting: Some(*waiting),
                ..of(fencing_token)
            },
        ),
        HolderEvent::Released { fencing_token } => (HolderEventName::Released, of(fencing_token)),
        HolderEvent::Lost {
            fencing_token,
            reason,
        } => {
            let reason = match reason {
                LostReason::Expired => wire::LostReason::Expired,
                LostReason::ForceReleased => wire::LostReason::ForceReleased,
            };
            (
                HolderEventName::Lost,
                HolderEventBody {
                    reason: Some(reason.as_str().to_owned()),
                    ..of(fencing_token)
                },
            )
        }
    }
}
