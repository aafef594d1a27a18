//! The routes of a kind (`/locks`, `/semaphores`), written once over the
//! [`Kind`] value: acquire, refresh, release, check, status, listing and
//! force-release, each one handler that takes the kind, and their OpenAPI
//! operations, generated per kind with its nouns, bodies and problem types.

use std::future::Future;

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequest, FromRequestParts, Query, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::Extension;
use futures_util::future::{self, Either};
use futures_util::{FutureExt, TryFutureExt};
use serde::Serialize;
use utoipa::openapi::header::Header;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterIn};
use utoipa::openapi::request_body::{RequestBody, RequestBodyBuilder};
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, SchemaType, Type};
use utoipa::openapi::{Content, Object, OpenApi, Ref, RefOr, Required, ResponseBuilder, Schema};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;

use super::extract::{parse_json, read_body};
use super::lease::{created, found, released, IdPath, NamePath, Refresh};
use super::listing::{parse_list_query, ListQuery};
use super::locks::{AcquireLock, LockLeaseBody, LockStatusBody};
use super::problem::ProblemType;
use super::semaphores::{AcquireSemaphore, SemaphoreLeaseBody, SemaphoreStatusBody};
use super::{progress, Access, AppError, AppState, Json, JsonBody};
use crate::domain::{AcquireRequest, Demand, Kind, LeaseId, Name, Owner};
use crate::engine::{Acquiring, Lease, Refusal, Status};
use crate::http::Parked;
use crate::telemetry::RequestContext;

/// The routes of `kind`, documented: `/{kind}s/{name}` (acquire, status,
/// force-release), `/{kind}s/{name}/{id}` (refresh, release, check) and
/// `/{kind}s` (listing).
pub fn router(kind: Kind) -> OpenApiRouter<AppState> {
    let plural = kind.plural();
    let mut router = OpenApiRouter::new()
        .route(
            &format!("/{plural}/{{name}}"),
            post(move |state: State<AppState>, call: Acquisition| acquire(state, kind, call))
                .get(move |state: State<AppState>, path: NamePath| status(state, kind, path))
                .delete(
                    move |state: State<AppState>, access: Option<Extension<Access>>, path| {
                        force_release(state, kind, access, path)
                    },
                ),
        )
        .route(
            &format!("/{plural}/{{name}}/{{id}}"),
            patch(move |state, name, id, body| refresh(state, kind, name, id, body))
                .delete(move |state, name, id| release(state, kind, name, id))
                .get(move |state, name, id| check(state, kind, name, id)),
        )
        .route(
            &format!("/{plural}"),
            get(move |state, query| list(state, kind, query)),
        );
    document(kind, router.get_openapi_mut());
    router
}

/// What an acquire handler takes from its request, in the order it is
/// checked: the name, then the body (read, and parsed by the kind); and
/// whether the client accepts progress events (all it keeps of the headers
/// while it waits).
pub struct Acquisition {
    pub name: Name,
    pub accepts_events: bool,
    /// What its log lines show, should it wait in line (see [`Parked`]).
    pub context: RequestContext,
    pub body: Bytes,
}

impl FromRequest<AppState> for Acquisition {
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
            let accepts_events = progress::accepts_events(&parts.headers);
            let context = RequestContext::of(&parts);
            let body = read_body(Request::from_parts(parts, body), &state).await?;
            Ok(Self {
                name,
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
fn asked(kind: Kind, body: &[u8], max_wait_ms: u64) -> Result<(Demand, AcquireRequest), AppError> {
    match kind {
        Kind::Lock => parse_json::<AcquireLock>(body)?.parse(max_wait_ms),
        Kind::Semaphore => parse_json::<AcquireSemaphore>(body)?.parse(max_wait_ms),
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
    call: Acquisition,
) -> Result<Response, AppError> {
    let Acquisition {
        name,
        accepts_events,
        context,
        body,
    } = call;
    let (demand, request) = asked(kind, &body, state.settings.max_wait_ms)?;
    drop(body);
    let wait = request.wait;
    // Boxed: each `async fn` it passes through by value would otherwise
    // hold a copy of its space.
    let acquisition = Box::pin(state.leases(kind).acquire(name.clone(), demand, request));
    if progress::wanted(accepts_events, wait) {
        return Ok(progress::respond(
            &state.engine,
            kind,
            demand,
            name.clone(),
            acquisition,
            move |outcome| progress::lease_json(&answer(kind, &name, outcome)?.1),
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
    let answer = outcome.map(move |outcome| {
        outcome
            .map_err(AppError::from)
            .and_then(|outcome| created_or_refused(kind, &name, outcome))
            .unwrap_or_else(IntoResponse::into_response)
    });
    Ok(Parked::new(answer, context).into_response())
}

/// 201 with the lease and its `Location`, or the problem of the refusal.
fn created_or_refused(
    kind: Kind,
    name: &Name,
    outcome: Result<Lease, Refusal>,
) -> Result<Response, AppError> {
    let (id, lease) = answer(kind, name, outcome)?;
    Ok(created(kind.plural(), name, id, lease))
}

/// The lease as its holder sees it, or the problem of the refusal.
fn answer(
    kind: Kind,
    name: &Name,
    outcome: Result<Lease, Refusal>,
) -> Result<(LeaseId, LeaseBody), AppError> {
    match outcome {
        Ok(lease) => Ok((lease.id, LeaseBody::new(kind, lease))),
        Err(Refusal::Busy(busy)) => Err(AppError::busy(kind, name, busy)),
        Err(Refusal::Superseded { owner }) => Err(AppError::Superseded {
            name: name.to_string(),
            owner: owner.map(Owner::into_string),
        }),
    }
}

/// `PATCH /{kind}s/{name}/{id}`.
async fn refresh(
    State(state): State<AppState>,
    kind: Kind,
    NamePath { name }: NamePath,
    IdPath { id }: IdPath,
    JsonBody(body): JsonBody<Refresh>,
) -> Result<Json<LeaseBody>, AppError> {
    let lease = found(state.leases(kind).refresh(&name, id, body.ttl()?)).await?;
    Ok(Json(LeaseBody::new(kind, lease)))
}

/// `DELETE /{kind}s/{name}/{id}`.
async fn release(
    State(state): State<AppState>,
    kind: Kind,
    NamePath { name }: NamePath,
    IdPath { id }: IdPath,
) -> Result<StatusCode, AppError> {
    released(state.leases(kind).release(&name, id)).await
}

/// `GET /{kind}s/{name}/{id}`.
async fn check(
    State(state): State<AppState>,
    kind: Kind,
    NamePath { name }: NamePath,
    IdPath { id }: IdPath,
) -> Result<Json<LeaseBody>, AppError> {
    let lease = found(state.leases(kind).check(&name, id)).await?;
    Ok(Json(LeaseBody::new(kind, lease)))
}

/// `GET /{kind}s/{name}`.
async fn status(
    State(state): State<AppState>,
    kind: Kind,
    NamePath { name }: NamePath,
) -> Result<Json<StatusBody>, AppError> {
    let status = state.leases(kind).status(&name).await?;
    Ok(Json(StatusBody::new(kind, status)))
}

/// `DELETE /{kind}s/{name}`: an administrator's action.
async fn force_release(
    State(state): State<AppState>,
    kind: Kind,
    access: Option<Extension<Access>>,
    NamePath { name }: NamePath,
) -> Result<StatusCode, AppError> {
    let access = access.map_or(Access::Anonymous, |Extension(a)| a);
    state.auth.allow_force_release(access)?;
    // The engine writes the audit line of each lease it ended.
    if state.leases(kind).force_release(&name).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(AppError::NotHeld(kind))
    }
}

/// `GET /{kind}s`: one page of those in use.
async fn list(
    State(state): State<AppState>,
    kind: Kind,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Listing>, AppError> {
    let (prefix, limit, cursor) = parse_list_query(query)?;
    let page = state.leases(kind).list(&prefix, limit, cursor).await?;
    Ok(Json(Listing {
        kind,
        entries: page
            .entries
            .into_iter()
            .map(|status| StatusBody::new(kind, status))
            .collect(),
        next_cursor: page.next_cursor.map(|c| c.encode()),
    }))
}

/// A lease as its holder sees it: a lock's or a semaphore's.
#[derive(Serialize)]
#[serde(untagged)]
pub enum LeaseBody {
    Lock(LockLeaseBody),
    Semaphore(SemaphoreLeaseBody),
}

impl LeaseBody {
    pub fn new(kind: Kind, lease: Lease) -> Self {
        match kind {
            Kind::Lock => Self::Lock(lease.into()),
            Kind::Semaphore => Self::Semaphore(lease.into()),
        }
    }
}

/// A lock or semaphore as anyone may see it.
#[derive(Serialize)]
#[serde(untagged)]
pub enum StatusBody {
    Lock(LockStatusBody),
    Semaphore(SemaphoreStatusBody),
}

impl StatusBody {
    pub fn new(kind: Kind, status: Status) -> Self {
        match kind {
            Kind::Lock => Self::Lock(status.into()),
            Kind::Semaphore => Self::Semaphore(status.into()),
        }
    }
}

/// A page of a listing: `{"locks": [...], "next_cursor"?}`, keyed by the
/// kind's plural.
pub struct Listing {
    kind: Kind,
    entries: Vec<StatusBody>,
    next_cursor: Option<String>,
}

impl Serialize for Listing {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry(self.kind.plural(), &self.entries)?;
        if let Some(cursor) = &self.next_cursor {
            map.serialize_entry("next_cursor", cursor)?;
        }
        map.end()
    }
}

/// The schemas of one body: its own name, then it and those it refers to.
struct Body {
    name: String,
    schemas: Vec<(String, RefOr<Schema>)>,
}

impl Body {
    fn of<T: ToSchema>() -> Self {
        let mut schemas = vec![(T::name().into_owned(), T::schema())];
        T::schemas(&mut schemas);
        Self {
            name: T::name().into_owned(),
            schemas,
        }
    }

    fn reference(&self) -> Ref {
        Ref::from_schema_name(&self.name)
    }
}

/// What the document says of a kind that is its own (its nouns are the
/// [`Kind`]'s): its acquire operation's words and request body, its lease
/// and status bodies, the answer when it stays busy.
struct KindDoc {
    acquire_summary: &'static str,
    acquire_description: &'static str,
    acquire_body: RequestBody,
    acquire: Body,
    lease: Body,
    status: Body,
}

impl KindDoc {
    fn of(kind: Kind) -> Self {
        match kind {
            Kind::Lock => {
                let acquire = Body::of::<AcquireLock>();
                let may_be_empty = OneOfBuilder::new()
                    .item(acquire.reference())
                    .item(Object::with_type(Type::Null));
                Self {
                    acquire_summary: "Acquire a lock",
                    acquire_description: "Takes the lock if it is free. If it is held and \
                        `wait_ms` is above 0, waits\nuntil it is released or expires (woken by \
                        the release itself, within\nmilliseconds) for at most `wait_ms`.",
                    acquire_body: RequestBodyBuilder::new()
                        .description(Some("May be empty: all defaults"))
                        .content("application/json", Content::new(Some(may_be_empty)))
                        .build(),
                    acquire,
                    lease: Body::of::<LockLeaseBody>(),
                    status: Body::of::<LockStatusBody>(),
                }
            }
            Kind::Semaphore => {
                let acquire = Body::of::<AcquireSemaphore>();
                Self {
                    acquire_summary: "Acquire a semaphore slot",
                    acquire_description: "Takes one of `limit` slots. Slots go first come, \
                        first served: if the\nsemaphore is full (or earlier waiters are in line) \
                        and `wait_ms` is above\n0, the request queues and waits for its turn, \
                        for at most `wait_ms`.",
                    acquire_body: RequestBodyBuilder::new()
                        .content("application/json", Content::new(Some(acquire.reference())))
                        .required(Some(Required::True))
                        .build(),
                    acquire,
                    lease: Body::of::<SemaphoreLeaseBody>(),
                    status: Body::of::<SemaphoreStatusBody>(),
                }
            }
        }
    }
}

/// The schema name of `kind`'s acquire body (the served document bounds its
/// `wait_ms` by the configured maximum).
pub fn acquire_schema_name(kind: Kind) -> String {
    KindDoc::of(kind).acquire.name
}

/// Adds the operations and schemas of `kind` to `doc`.
#[allow(clippy::too_many_lines)]
fn document(kind: Kind, doc: &mut OpenApi) {
    let KindDoc {
        acquire_summary,
        acquire_description,
        acquire_body,
        acquire,
        lease,
        status,
    } = KindDoc::of(kind);
    let (noun, plural) = (kind.as_str(), kind.plural());
    let nouns = capitalized(plural);
    let name_path = format!("/{plural}/{{name}}");
    let lease_path = format!("/{plural}/{{name}}/{{id}}");
    let operation = |id: String, summary: String, description: &str| {
        OperationBuilder::new()
            .operation_id(Some(id))
            .summary(Some(summary))
            .description(Some(description))
    };
    let name = || NamePath::into_params(|| Some(ParameterIn::Path));
    let name_and_id = || {
        let mut parameters = name();
        parameters.extend(IdPath::into_params(|| Some(ParameterIn::Path)));
        parameters
    };
    let problem = |problem: ProblemType| Ref::from_response_name(problem.component_name());
    let json = |body: &Body| Content::new(Some(body.reference()));
    let lease_response = |description: &str| {
        ResponseBuilder::new()
            .description(description)
            .content("application/json", json(&lease))
            .build()
    };
    let released = || ResponseBuilder::new().description("Released").build();
    let paths = &mut doc.paths;

    // /{kind}s/{name}: acquire, status, force-release.
    let location = Header::builder()
        .schema(Some(Object::with_type(Type::String)))
        .description(Some(format!("The lease: /{plural}/{{name}}/{{id}}")))
        .build();
    let acquired = ResponseBuilder::new()
        .description("Acquired")
        .header("Location", location)
        .content("application/json", json(&lease))
        .build();
    let progress = ResponseBuilder::new()
        .description(
            "With `Accept: text/event-stream` and a `wait_ms`: server-sent progress events, \
             `queued` (`{\"position\", \"waiting\", \"holders\": [{\"owner\"?, \"expires_in_ms\"}]}`) \
             on joining the line and whenever the position or the holders change, then one \
             `acquired` (the lease body) or `problem` (the problem body)",
        )
        .content(
            "text/event-stream",
            Content::new(Some(Object::with_type(Type::String))),
        )
        .build();
    paths.add_path_operation(
        &name_path,
        vec![HttpMethod::Post],
        operation(
            format!("acquire_{noun}"),
            acquire_summary.to_owned(),
            acquire_description,
        )
        .parameters(Some(name()))
        .request_body(Some(acquire_body))
        .response("200", progress)
        .response("201", acquired)
        .response("409", problem(ProblemType::busy(kind))),
    );
    paths.add_path_operation(
        &name_path,
        vec![HttpMethod::Get],
        operation(
            format!("{noun}_status"),
            format!("{} status", capitalized(noun)),
            &format!(
                "Who holds the {noun} (owner labels, fencing tokens, time left, in the \
                 order the leases were granted) and the line waiting for it (`waiting`, and \
                 the first `waiters` in the order they will be served). Never a lease id."
            ),
        )
        .parameters(Some(name()))
        .response(
            "200",
            ResponseBuilder::new()
                .description("Status")
                .content("application/json", json(&status))
                .build(),
        ),
    );
    paths.add_path_operation(
        &name_path,
        vec![HttpMethod::Delete],
        operation(
            format!("force_release_{noun}"),
            format!("Force-release a {noun}"),
            &format!(
                "Frees the {noun} whoever holds it (every lease of it: an administrator's \
                 action) and wakes its waiters, who keep their places in line. Needs an admin \
                 token when the service has tokens."
            ),
        )
        .parameters(Some(name()))
        .response("204", released())
        .response("403", problem(ProblemType::Forbidden))
        .response("404", problem(ProblemType::not_held(kind))),
    );

    // /{kind}s/{name}/{id}: refresh, release, check.
    let refresh_body = OneOfBuilder::new()
        .item(Ref::from_schema_name(Refresh::name()))
        .item(Object::with_type(Type::Null));
    let refresh_body = RequestBodyBuilder::new()
        .description(Some("May be empty: the lease's own ttl"))
        .content("application/json", Content::new(Some(refresh_body)))
        .build();
    let lease_operation = |verb: &str, summary: &str, description: &str| {
        operation(
            format!("{verb}_{noun}"),
            format!("{summary} a {noun} lease"),
            description,
        )
        .parameters(Some(name_and_id()))
        .response("404", problem(ProblemType::LeaseNotFound))
    };
    paths.add_path_operation(
        &lease_path,
        vec![HttpMethod::Patch],
        lease_operation(
            "refresh",
            "Refresh",
            "Extends a lease that is still held, by `ttl_ms` from now (default: its own ttl). \
             An expired lease is gone: 404, and it is not brought back.",
        )
        .request_body(Some(refresh_body))
        .response("200", lease_response("Refreshed")),
    );
    paths.add_path_operation(
        &lease_path,
        vec![HttpMethod::Delete],
        lease_operation(
            "release",
            "Release",
            "Gives the lease back and wakes the next waiter in line.",
        )
        .response("204", released()),
    );
    paths.add_path_operation(
        &lease_path,
        vec![HttpMethod::Get],
        lease_operation("check", "Check", "The lease, if it is still held.")
            .response("200", lease_response("Still held")),
    );

    // /{kind}s: the listing.
    let listing = format!("{}List", capitalized(noun));
    let page = Content::new(Some(Ref::from_schema_name(&listing)));
    paths.add_path_operation(
        format!("/{plural}"),
        vec![HttpMethod::Get],
        operation(
            format!("list_{plural}"),
            format!("List {plural} in use"),
            &format!(
                "One page of the {plural} in use (at most `limit`, sorted by name), \
                 optionally only those whose names start with `prefix`. While more remain, \
                 the answer has a `next_cursor` to pass back as `?cursor=`; across the pages, \
                 every {noun} that stays in use is listed once."
            ),
        )
        .parameters(Some(ListQuery::into_params(|| Some(ParameterIn::Query))))
        .response(
            "200",
            ResponseBuilder::new()
                .description(format!("{nouns} in use"))
                .content("application/json", page)
                .build(),
        ),
    );
    let cursor = ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .description(Some(
            "Pass as `?cursor=` for the next page; absent on the last page.",
        ));
    let listing_schema = ObjectBuilder::new()
        .description(Some(format!(
            "One page of the {plural} in use, sorted by name."
        )))
        .property(plural, ArrayBuilder::new().items(status.reference()))
        .required(plural)
        .property("next_cursor", cursor);

    let schemas = &mut doc.components.get_or_insert_with(Default::default).schemas;
    schemas.extend(
        [acquire, lease, status, Body::of::<Refresh>()]
            .into_iter()
            .flat_map(|body| body.schemas),
    );
    schemas.insert(listing, Schema::from(listing_schema).into());
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}
