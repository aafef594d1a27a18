//! The routes of a kind (`/locks`, `/semaphores`), written once over the
//! [`Kind`] value: acquire, refresh, release, check, status, listing and
//! force-release, each one handler that takes the kind, and the wire bodies
//! of its kind they answer with. Their OpenAPI operations are
//! [`super::kind_doc`]'s.

use std::future::Future;

use crate::config::Settings;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequest, FromRequestParts, Query, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use futures_util::future::{self, Either};
use futures_util::{FutureExt, TryFutureExt};
use utoipa_axum::router::OpenApiRouter;

use super::extract::{parse_json, read_body};
use super::lease::{found, released, ttl, IdPath, NamePath};
use super::listing::{parse_list_query, ListQuery};
use super::outcome::{answer, created_or_refused, lease_body};
use super::{
    kind_doc, locks, progress, semaphores, tickets, AppError, AppState, Caller, Json, JsonBody,
};
use crate::access::{Denied, Principal, Quota};
use crate::domain::{AcquireRequest, Demand, Kind, Name, Owner, Priority, Scope, TokenName};
use crate::engine::{Acquiring, Status};
use crate::http::Parked;
use crate::telemetry::RequestContext;
use crate::wire::{LeaseBody, Listing, ProblemType, Refresh, StatusBody};

/// The routes of `kind`, documented ([`kind_doc::document`]):
/// `/{kind}s/{name}` (acquire, status, force-release), `/{kind}s/{name}/{id}`
/// (refresh, release, check) and `/{kind}s` (listing).
pub fn router(kind: Kind) -> OpenApiRouter<AppState> {
    let plural = kind.plural();
    let mut router = OpenApiRouter::new()
        .route(
            &format!("/{plural}/{{name}}"),
            post(move |state: State<AppState>, call: AcquireCall| acquire(state, kind, call))
                .get(move |state: State<AppState>, caller, path: NamePath| {
                    status(state, kind, caller, path)
                })
                .delete(move |state: State<AppState>, caller, path| {
                    force_release(state, kind, caller, path)
                }),
        )
        .route(
            &format!("/{plural}/{{name}}/{{id}}"),
            patch(move |state, caller, name, id, body| {
                refresh(state, kind, caller, name, id, body)
            })
            .delete(move |state, caller, name, id| release(state, kind, caller, name, id))
            .get(move |state, caller, name, id| check(state, kind, caller, name, id)),
        )
        .route(
            &format!("/{plural}"),
            get(move |state, caller, query| list(state, kind, caller, query)),
        )
        .route(
            &format!("/{plural}/{{name}}/tickets/{{ticket}}"),
            post(move |state, request| tickets::wait(state, kind, request))
                .get(move |state, caller, name, ticket| {
                    tickets::show(state, kind, caller, name, ticket)
                })
                .delete(move |state, caller, name, ticket| {
                    tickets::leave(state, kind, caller, name, ticket)
                }),
        );
    kind_doc::document(kind, router.get_openapi_mut());
    tickets::document(kind, router.get_openapi_mut());
    router
}

/// What an acquire handler takes from its request, in the order it is
/// checked: the name, the caller's `write` on it (before the body is even
/// read), then the body (read, and parsed by the kind); and whether the
/// client accepts progress events (all it keeps of the headers while it
/// waits).
pub struct AcquireCall {
    pub name: Name,
    /// Who asks: watched while the request waits.
    pub caller: Caller,
    /// The name of the caller's token, for the lease's audit line and history.
    pub by: Option<TokenName>,
    /// Whether the caller may administer the name: an `override` needs it
    /// (else this refusal, 403).
    pub admin: Result<(), Denied>,
    pub accepts_events: bool,
    /// What its log lines show, should it wait in line (see [`Parked`]).
    pub context: RequestContext,
    pub body: Bytes,
}

impl FromRequest<AppState> for AcquireCall {
    type Rejection = AppError;

    /// Boxed, and gone once the body is read: axum's handler future is as
    /// large as its largest stage, and a waiting request keeps that future
    /// for its whole wait.
    fn from_request(
        request: Request,
        state: &AppState,
    ) -> impl Future<Output = Result<Self, AppError>> + Send {
        let state = state.clone();
        Box::pin(async move {
            let (mut parts, body) = request.into_parts();
            let NamePath { name } = NamePath::from_request_parts(&mut parts, &state).await?;
            let caller = Caller::of(&parts)?;
            caller.require(Scope::Write, &name)?;
            let by = caller.name().cloned();
            let admin = caller.require(Scope::Admin, &name);
            let accepts_events = progress::accepts_events(&parts.headers);
            let context = RequestContext::of(&parts);
            let body = read_body(Request::from_parts(parts, body), &state).await?;
            Ok(Self {
                name,
                caller,
                by,
                admin,
                accepts_events,
                context,
                body,
            })
        })
    }
}

/// What an acquisition of `kind` asks for: what it takes of the name (shared
/// or exclusive, its permits of its limit) and the fields every acquisition
/// takes.
fn asked(
    kind: Kind,
    body: &[u8],
    settings: &Settings,
) -> Result<(Demand, AcquireRequest), AppError> {
    let (max_wait_ms, hosts) = (settings.max_wait_ms, &settings.webhook_hosts);
    match kind {
        Kind::Lock => locks::asked(parse_json(body)?, max_wait_ms, hosts),
        Kind::Semaphore => semaphores::asked(parse_json(body)?, max_wait_ms, hosts),
    }
}

/// `POST /{kind}s/{name}`: 201 with the lease and its `Location`; or, with
/// `Accept: text/event-stream` and a wait, server-sent progress that ends in
/// that lease or in the problem the plain request gets.
///
/// A request that may wait is parked at once ([`Parked`]): it joins the line
/// and waits in its parked rest, which keeps none of the handler's and the
/// layers' state, so a flood of waits costs little more than the waits.
///
/// # Errors
/// The problem for a refusal (held, full, superseded) or an engine error.
async fn acquire(
    State(state): State<AppState>,
    kind: Kind,
    call: AcquireCall,
) -> Result<Response, AppError> {
    let AcquireCall {
        name,
        caller,
        by,
        admin,
        accepts_events,
        context,
        body,
    } = call;
    let (demand, mut request) = asked(kind, &body, &state.settings)?;
    if request.override_reason.is_some() {
        // Granted through a freeze: an administrator's decision.
        admin?;
    }
    caller.require_priority(request.priority)?;
    if request.ask_yield {
        // A holder is told at most once per asker every 10 s.
        let asker = by.as_ref().map_or_else(
            || request.owner.as_ref().map_or("", Owner::as_str),
            TokenName::as_str,
        );
        // (Which leases hold the name is not asked here: at most once per
        // asker and name.)
        request.ask_yield = state.yields.may_tell(asker, kind, &name, &[0]);
    }
    // A waiting request takes a slot of its token's share of waiters.
    let slot = if request.wait.as_duration().is_zero() {
        None
    } else {
        state.quotas.take(caller.whose(), Quota::Waiters)?
    };
    let still = still_allowed(&name, request.override_reason.is_some(), request.priority);
    // Revoked while it waits, a request that keeps its place gives it up.
    let forsaken = request
        .keep_place
        .as_ref()
        .map(|keep| keep.forsaken.clone());
    let revocable = caller.can_change();
    let revoked = caller.revoked(still).map(move |err| {
        if let Some(forsaken) = forsaken {
            forsaken.set();
        }
        err
    });
    request.by = by;
    if let Some(keep) = request.keep_place.as_mut() {
        keep.keep_ms = tickets::keep_place_ms(keep.keep_ms, state.settings.max_keep_place_ms)?;
        keep.pickup_ms = state.settings.pickup_ms;
    }
    drop(body);
    let (wait, priority) = (request.wait, request.priority);
    // (A request that keeps its place is answered plainly: 201 or 202.)
    let accepts_events = accepts_events && request.keep_place.is_none();
    // Boxed: each `async fn` it passes through by value would otherwise
    // hold a copy of its space.
    let acquisition = Box::pin(state.leases(kind).acquire(name.clone(), demand, request));
    if progress::wanted(accepts_events, wait) {
        let revoked = Box::pin(revoked);
        return Ok(progress::respond(
            &state.engine,
            kind,
            demand,
            priority,
            name.clone(),
            progress::Pending {
                acquisition,
                revoked,
            },
            move |outcome| {
                drop(slot);
                progress::lease_json(&answer(kind, &name, outcome)?.1)
            },
        ));
    }
    // Combinators, not async blocks: the parked future holds the waiting
    // future once, not twice, and the joining one only until it has joined.
    let outcome = acquisition.and_then(|acquiring| match acquiring {
        Acquiring::Now(outcome) => Either::Left(future::ready(Ok(outcome))),
        Acquiring::Queued(queued) => Either::Right(queued.outcome()),
    });
    if wait.as_duration().is_zero() {
        return created_or_refused(kind, &name, outcome.await?);
    }
    // A token removed, narrowed or expired while it waits: the request
    // leaves the line (giving back a lease granted meanwhile) and is
    // answered 401 or 403, never 201.
    let outcome = Caller::unless_revoked(revocable, revoked, outcome.map_err(AppError::from));
    let answer = outcome.map(move |outcome| {
        drop(slot);
        outcome
            .and_then(|outcome| created_or_refused(kind, &name, outcome))
            .unwrap_or_else(IntoResponse::into_response)
    });
    Ok(Parked::new(answer, context).into_response())
}

/// What a waiting acquisition of `name` needs of its token to go on:
/// `write` on the name (`admin` to override a freeze) and a `max_priority`
/// at least its `priority`.
pub(super) fn still_allowed(
    name: &Name,
    overrides: bool,
    priority: Priority,
) -> impl Fn(&Principal) -> Result<(), AppError> + Send + 'static {
    let name = name.clone();
    move |principal| {
        principal.require(Scope::Write, &name)?;
        if overrides {
            principal.require(Scope::Admin, &name)?;
        }
        principal.require_priority(priority)?;
        Ok(())
    }
}

/// `PATCH /{kind}s/{name}/{id}` (`write`).
async fn refresh(
    State(state): State<AppState>,
    kind: Kind,
    caller: Caller,
    NamePath { name }: NamePath,
    IdPath { id }: IdPath,
    JsonBody(body): JsonBody<Refresh>,
) -> Result<Json<LeaseBody>, AppError> {
    caller.require(Scope::Write, &name)?;
    let leases = state.leases(kind);
    let lease = found(leases.refresh(&name, id, ttl(body.ttl_ms)?, caller.name())).await?;
    Ok(Json(lease_body(kind, lease)))
}

/// `DELETE /{kind}s/{name}/{id}` (`write`).
async fn release(
    State(state): State<AppState>,
    kind: Kind,
    caller: Caller,
    NamePath { name }: NamePath,
    IdPath { id }: IdPath,
) -> Result<StatusCode, AppError> {
    caller.require(Scope::Write, &name)?;
    released(state.leases(kind).release(&name, id, caller.name())).await
}

/// `GET /{kind}s/{name}/{id}` (`write`: it is the holder's question).
async fn check(
    State(state): State<AppState>,
    kind: Kind,
    caller: Caller,
    NamePath { name }: NamePath,
    IdPath { id }: IdPath,
) -> Result<Json<LeaseBody>, AppError> {
    caller.require(Scope::Write, &name)?;
    let lease = found(state.leases(kind).check(&name, id)).await?;
    Ok(Json(lease_body(kind, lease)))
}

/// `GET /{kind}s/{name}` (`read`).
async fn status(
    State(state): State<AppState>,
    kind: Kind,
    caller: Caller,
    NamePath { name }: NamePath,
) -> Result<Json<StatusBody>, AppError> {
    caller.require(Scope::Read, &name)?;
    let leases = state.leases(kind);
    let status = leases.with_etas(leases.status(&name).await?).await;
    Ok(Json(status_body(kind, status)))
}

/// `DELETE /{kind}s/{name}`: an administrator's action (`admin`).
async fn force_release(
    State(state): State<AppState>,
    kind: Kind,
    caller: Caller,
    NamePath { name }: NamePath,
) -> Result<StatusCode, AppError> {
    caller.require(Scope::Admin, &name)?;
    // The engine writes the audit line of each lease it ended.
    if state
        .leases(kind)
        .force_release(&name, caller.name())
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(AppError::from(ProblemType::not_held(kind)))
    }
}

/// `GET /{kind}s`: one page of those in use that the caller may read.
///
/// Only where the caller may read is searched (a token with `read:team-a-*`
/// alone scans `team-a-` names only, and asks Redis nothing for a prefix
/// it may read nothing under); every name found is filtered before its
/// status is read. A page counts only the names it shows, so it may come
/// back short, even empty, with a `next_cursor`, like a page of sparse
/// names; following the cursors lists every readable name once.
async fn list(
    State(state): State<AppState>,
    kind: Kind,
    caller: Caller,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Listing>, AppError> {
    let (prefix, limit, cursor) = parse_list_query(query)?;
    let Some(searched) = caller.readable_within(&prefix) else {
        return Ok(Json(Listing {
            kind,
            entries: Vec::new(),
            next_cursor: None,
        }));
    };
    let shown = |name: &Name| caller.may_read(name);
    let page = state
        .leases(kind)
        .list(&searched, limit, cursor, &shown)
        .await?;
    Ok(Json(Listing {
        kind,
        entries: page
            .entries
            .into_iter()
            .map(|status| status_body(kind, status))
            .collect(),
        next_cursor: page.next_cursor.map(|c| c.encode()),
    }))
}

/// A `kind` as anyone may see it.
fn status_body(kind: Kind, status: Status) -> StatusBody {
    match kind {
        Kind::Lock => StatusBody::Lock(status.into()),
        Kind::Semaphore => StatusBody::Semaphore(status.into()),
    }
}
