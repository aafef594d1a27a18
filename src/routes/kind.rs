//! The routes both kinds have, written once: status, listing, force-release,
//! refresh, release and check, each one generic handler over a [`Kind`]
//! (locks or semaphores) and documented per kind as that kind's operations.

use std::future::Future;

use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequest, FromRequestParts, Query, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch};
use axum::Extension;
use futures_util::future::BoxFuture;
use futures_util::future::{self, Either};
use futures_util::{FutureExt, TryFutureExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use utoipa::openapi::header::Header;
use utoipa::openapi::path::{HttpMethod, Operation, OperationBuilder, ParameterIn, Paths};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, SchemaType, Type};
use utoipa::openapi::{Content, Ref, RefOr, ResponseBuilder, Schema};
use utoipa::{IntoParams, PartialSchema, ToSchema};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};

use super::lease::{created, found, released, IdPath, NamePath, Refresh};
use super::listing::{parse_list_query, ListQuery};
use super::problem::ProblemType;
use super::{progress, Access, AppError, AppState, Json, JsonBody};
use crate::domain::{LeaseId, Name, NamePrefix, Owner, Ttl, WaitTime};
use crate::engine::{
    self, Acquiring, Cursor, LockLease, LockStatus, Locks, Page, PageLimit, Refusal,
    SemaphoreLease, SemaphoreStatus, Semaphores,
};
use crate::http::Parked;
use crate::telemetry::RequestContext;

/// A kind of lease, as the shared handlers see it: its engine, its name in
/// paths and docs, and its response bodies. [`impl_kind!`] implements it.
pub trait Kind: LeaseOps + 'static {
    /// The kind as the engine's events and progress name it.
    const LEASE_KIND: engine::Kind;
    /// The singular noun: "lock"; its routes live under `/{NOUN}s`.
    const NOUN: &'static str = Self::LEASE_KIND.as_str();
    /// What force-release answers when nothing is held.
    const NOT_HELD: AppError = AppError::not_held(Self::LEASE_KIND);
    /// The lease as its holder sees it.
    type Body: Serialize + ToSchema + From<Self::Lease>;
    /// The status as anyone may see it.
    type StatusBody: Serialize + ToSchema + From<Self::Status>;
    fn of(state: &AppState) -> &Self;
}

/// Implements [`Kind`], one line per kind: the engine's type, its
/// [`engine::Kind`], the holder's and everyone's bodies, and its field of
/// [`AppState`].
macro_rules! impl_kind {
    ($engine:ty, $kind:ident, $body:ty, $status:ty, $field:ident) => {
        impl $crate::routes::kind::Kind for $engine {
            const LEASE_KIND: $crate::engine::Kind = $crate::engine::Kind::$kind;
            type Body = $body;
            type StatusBody = $status;
            fn of(state: &$crate::routes::AppState) -> &Self {
                &state.$field
            }
        }
    };
}
pub(crate) use impl_kind;

/// What an acquire handler of either kind takes from its request, in the
/// order it is checked: the name, then the body; and whether the client
/// accepts progress events (all it keeps of the headers while it waits).
pub struct Acquisition<B> {
    pub name: Name,
    pub accepts_events: bool,
    /// What its log lines show, should it wait in line (see [`Parked`]).
    pub context: RequestContext,
    pub body: B,
}

impl<B> Acquisition<B> {
    /// Its body, and the rest (what [`acquired`] answers with).
    pub fn split(self) -> (B, Acquisition<()>) {
        let Self {
            name,
            accepts_events,
            context,
            body,
        } = self;
        let rest = Acquisition {
            name,
            accepts_events,
            context,
            body: (),
        };
        (body, rest)
    }
}

impl<B: DeserializeOwned + Default + Send + 'static> FromRequest<AppState> for Acquisition<B> {
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
            let JsonBody(body) =
                JsonBody::from_request(Request::from_parts(parts, body), &state).await?;
            Ok(Self {
                name,
                accepts_events,
                context,
                body,
            })
        })
    }
}

/// Answers an acquisition of either kind: 201 with the lease and its
/// `Location`; or, with `Accept: text/event-stream` and a wait, server-sent
/// progress that ends in that lease or in the problem the plain request gets.
///
/// A request that may wait is parked at once ([`Parked`]): it joins the line
/// and waits in its parked rest, which keeps none of the handler's and the
/// layers' state, so a flood of waits costs little more than the waits.
///
/// # Errors
/// The problem for a refusal (held, full, superseded) or an engine error.
///
/// The acquisition comes boxed: each `async fn` it passes through by value
/// would otherwise hold a copy of its space.
pub async fn acquired<K>(
    state: AppState,
    call: Acquisition<()>,
    wait: WaitTime,
    acquisition: BoxFuture<'static, Result<Acquiring, engine::Error>>,
) -> Result<Response, AppError>
where
    K: Kind + LeaseOps<Lease = engine::Lease>,
    K::Body: Send + 'static,
{
    let Acquisition {
        name,
        accepts_events,
        context,
        ..
    } = call;
    if progress::wanted(accepts_events, wait) {
        return Ok(progress::respond(
            &state.engine,
            K::LEASE_KIND,
            name.clone(),
            acquisition,
            move |outcome| progress::lease_json(&answer::<K>(&name, outcome)?.1),
        ));
    }
    // Combinators, not async blocks: the parked future holds the waiting
    // future once, not twice, and the joining one only until it has joined.
    let outcome = acquisition.and_then(|acquiring| match acquiring {
        Acquiring::Now(outcome) => Either::Left(future::ready(Ok(outcome))),
        Acquiring::Queued(queued) => Either::Right(queued.outcome()),
    });
    if wait.as_duration().is_zero() {
        return created_or_refused::<K>(&name, outcome.await?);
    }
    let answer = outcome.map(move |outcome| {
        outcome
            .map_err(AppError::from)
            .and_then(|outcome| created_or_refused::<K>(&name, outcome))
            .unwrap_or_else(IntoResponse::into_response)
    });
    Ok(Parked::new(answer, context).into_response())
}

/// 201 with the lease and its `Location`, or the problem of the refusal.
fn created_or_refused<K>(
    name: &Name,
    outcome: Result<engine::Lease, Refusal>,
) -> Result<Response, AppError>
where
    K: Kind + LeaseOps<Lease = engine::Lease>,
{
    let (id, lease) = answer::<K>(name, outcome)?;
    Ok(created(&format!("{}s", K::NOUN), name, id, lease))
}

/// The lease as its holder sees it, or the problem of the refusal.
fn answer<K>(
    name: &Name,
    outcome: Result<engine::Lease, Refusal>,
) -> Result<(LeaseId, K::Body), AppError>
where
    K: Kind + LeaseOps<Lease = engine::Lease>,
{
    match outcome {
        Ok(lease) => Ok((lease.id, K::Body::from(lease))),
        Err(Refusal::Busy(busy)) => Err(AppError::busy(K::LEASE_KIND, name, busy)),
        Err(Refusal::Superseded { owner }) => Err(AppError::Superseded {
            name: name.to_string(),
            owner: owner.map(Owner::into_string),
        }),
    }
}

/// What the shared handlers need from the engine.
pub trait LeaseOps: Send + Sync {
    type Lease: Send;
    type Status: Send;
    fn status(
        &self,
        name: &Name,
    ) -> impl Future<Output = Result<Self::Status, engine::Error>> + Send;
    fn list(
        &self,
        prefix: &NamePrefix,
        limit: PageLimit,
        cursor: Cursor,
    ) -> impl Future<Output = Result<Page<Self::Status>, engine::Error>> + Send;
    fn force_release(
        &self,
        name: &Name,
    ) -> impl Future<Output = Result<bool, engine::Error>> + Send;
    fn refresh(
        &self,
        name: &Name,
        id: LeaseId,
        ttl: Option<Ttl>,
    ) -> impl Future<Output = Result<Option<Self::Lease>, engine::Error>> + Send;
    fn release(
        &self,
        name: &Name,
        id: LeaseId,
    ) -> impl Future<Output = Result<bool, engine::Error>> + Send;
    fn check(
        &self,
        name: &Name,
        id: LeaseId,
    ) -> impl Future<Output = Result<Option<Self::Lease>, engine::Error>> + Send;
}

impl LeaseOps for Locks {
    type Lease = LockLease;
    type Status = LockStatus;
    async fn list(&self, p: &NamePrefix, n: PageLimit, c: Cursor) -> ListResult<LockStatus> {
        Self::list(self, p, n, c).await
    }
    async fn status(&self, n: &Name) -> Result<LockStatus, engine::Error> {
        Self::status(self, n).await
    }
    async fn force_release(&self, n: &Name) -> Result<bool, engine::Error> {
        Self::force_release(self, n).await
    }
    async fn refresh(&self, n: &Name, id: LeaseId, ttl: Option<Ttl>) -> EngineResult<LockLease> {
        Self::refresh(self, n, id, ttl).await
    }
    async fn release(&self, n: &Name, id: LeaseId) -> Result<bool, engine::Error> {
        Self::release(self, n, id).await
    }
    async fn check(&self, n: &Name, id: LeaseId) -> EngineResult<LockLease> {
        Self::check(self, n, id).await
    }
}

impl LeaseOps for Semaphores {
    type Lease = SemaphoreLease;
    type Status = SemaphoreStatus;
    async fn list(&self, p: &NamePrefix, n: PageLimit, c: Cursor) -> ListResult<SemaphoreStatus> {
        Self::list(self, p, n, c).await
    }
    async fn force_release(&self, n: &Name) -> Result<bool, engine::Error> {
        Self::force_release(self, n).await
    }
    async fn status(&self, n: &Name) -> Result<SemaphoreStatus, engine::Error> {
        Self::status(self, n).await
    }
    async fn refresh(&self, n: &Name, id: LeaseId, t: Option<Ttl>) -> EngineResult<SemaphoreLease> {
        Self::refresh(self, n, id, t).await
    }
    async fn release(&self, n: &Name, id: LeaseId) -> Result<bool, engine::Error> {
        Self::release(self, n, id).await
    }
    async fn check(&self, n: &Name, id: LeaseId) -> EngineResult<SemaphoreLease> {
        Self::check(self, n, id).await
    }
}

type EngineResult<L> = Result<Option<L>, engine::Error>;
type ListResult<S> = Result<Page<S>, engine::Error>;

/// `PATCH /{kind}s/{name}/{id}`.
async fn refresh<K: Kind>(
    State(state): State<AppState>,
    NamePath { name }: NamePath,
    IdPath { id }: IdPath,
    JsonBody(body): JsonBody<Refresh>,
) -> Result<Json<K::Body>, AppError> {
    found(K::of(&state).refresh(&name, id, body.ttl()?)).await
}

/// `DELETE /{kind}s/{name}/{id}`.
async fn release<K: Kind>(
    State(state): State<AppState>,
    NamePath { name }: NamePath,
    IdPath { id }: IdPath,
) -> Result<StatusCode, AppError> {
    released(K::of(&state).release(&name, id)).await
}

/// `GET /{kind}s/{name}/{id}`.
async fn check<K: Kind>(
    State(state): State<AppState>,
    NamePath { name }: NamePath,
    IdPath { id }: IdPath,
) -> Result<Json<K::Body>, AppError> {
    found(K::of(&state).check(&name, id)).await
}

/// `GET /{kind}s/{name}`.
async fn status<K: Kind>(
    State(state): State<AppState>,
    NamePath { name }: NamePath,
) -> Result<Json<K::StatusBody>, AppError> {
    Ok(Json(K::of(&state).status(&name).await?.into()))
}

/// `DELETE /{kind}s/{name}`: an administrator's action.
async fn force_release<K: Kind>(
    State(state): State<AppState>,
    access: Option<Extension<Access>>,
    NamePath { name }: NamePath,
) -> Result<StatusCode, AppError> {
    let access = access.map_or(Access::Anonymous, |Extension(a)| a);
    state.auth.allow_force_release(access)?;
    // The engine writes the audit line of each lease it ended.
    if K::of(&state).force_release(&name).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(K::NOT_HELD)
    }
}

/// A page of a listing: `{"locks": [...], "next_cursor"?}`, keyed by the
/// kind's plural.
pub struct Listing<K: Kind> {
    entries: Vec<K::StatusBody>,
    next_cursor: Option<String>,
}

impl<K: Kind> Serialize for Listing<K> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry(&format!("{}s", K::NOUN), &self.entries)?;
        if let Some(cursor) = &self.next_cursor {
            map.serialize_entry("next_cursor", cursor)?;
        }
        map.end()
    }
}

impl<K: Kind> Listing<K> {
    fn schema_name() -> String {
        format!("{}List", capitalized(K::NOUN))
    }

    fn schema() -> Schema {
        let noun = K::NOUN;
        let entries = ArrayBuilder::new().items(Ref::from_schema_name(K::StatusBody::name()));
        let cursor = ObjectBuilder::new()
            .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
            .description(Some(
                "Pass as `?cursor=` for the next page; absent on the last page.",
            ));
        ObjectBuilder::new()
            .description(Some(format!(
                "One page of the {noun}s in use, sorted by name."
            )))
            .property(format!("{noun}s"), entries)
            .required(format!("{noun}s"))
            .property("next_cursor", cursor)
            .into()
    }
}

/// `GET /{kind}s`: one page of those in use.
async fn list<K: Kind>(
    State(state): State<AppState>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Listing<K>>, AppError> {
    let (prefix, limit, cursor) = parse_list_query(query)?;
    let page = K::of(&state).list(&prefix, limit, cursor).await?;
    Ok(Json(Listing {
        entries: page.entries.into_iter().map(Into::into).collect(),
        next_cursor: page.next_cursor.map(|c| c.encode()),
    }))
}

/// `/{kind}s/{name}`: status and force-release of one kind, documented as
/// operations of that kind (acquire, the third method there, is the kind's own).
pub fn name_routes<K: Kind>() -> OpenApiRouter<AppState> {
    let noun = K::NOUN;
    let path = format!("/{noun}s/{{name}}");
    let operation = |id: String, summary: String, description: String| {
        OperationBuilder::new()
            .operation_id(Some(id))
            .summary(Some(summary))
            .description(Some(description))
    };
    let name = || Some(NamePath::into_params(|| Some(ParameterIn::Path)));
    let status_body = Content::new(Some(Ref::from_schema_name(K::StatusBody::name())));
    let not_held = Ref::from_response_name(K::NOT_HELD.problem_type().component_name());
    let forbidden = Ref::from_response_name(ProblemType::Forbidden.component_name());
    let mut paths = Paths::new();
    paths.add_path_operation(
        &path,
        vec![HttpMethod::Get],
        operation(
            format!("{noun}_status"),
            format!("{} status", capitalized(noun)),
            format!(
                "Who holds the {noun} (owner labels, fencing tokens, time left, in the \
                 order the leases were granted) and the line waiting for it (`waiting`, and \
                 the first `waiters` in the order they will be served). Never a lease id."
            ),
        )
        .parameters(name())
        .response(
            "200",
            ResponseBuilder::new()
                .description("Status")
                .content("application/json", status_body)
                .build(),
        ),
    );
    paths.add_path_operation(
        &path,
        vec![HttpMethod::Delete],
        operation(
            format!("force_release_{noun}"),
            format!("Force-release a {noun}"),
            format!(
                "Frees the {noun} whoever holds it (every lease of it: an administrator's \
                 action) and wakes its waiters, who keep their places in line. Needs an admin \
                 token when the service has tokens."
            ),
        )
        .parameters(name())
        .response(
            "204",
            ResponseBuilder::new().description("Released").build(),
        )
        .response("403", forbidden)
        .response("404", not_held),
    );
    let mut schemas = vec![(K::StatusBody::name().into_owned(), K::StatusBody::schema())];
    K::StatusBody::schemas(&mut schemas);
    let handlers = get(status::<K>).delete(force_release::<K>);

    let mut listing = Paths::new();
    let page = Content::new(Some(Ref::from_schema_name(Listing::<K>::schema_name())));
    listing.add_path_operation(
        format!("/{noun}s"),
        vec![HttpMethod::Get],
        operation(
            format!("list_{noun}s"),
            format!("List {noun}s in use"),
            format!(
                "One page of the {noun}s in use (at most `limit`, sorted by name), \
                 optionally only those whose names start with `prefix`. While more remain, \
                 the answer has a `next_cursor` to pass back as `?cursor=`; across the pages, \
                 every {noun} that stays in use is listed once."
            ),
        )
        .parameters(Some(ListQuery::into_params(|| Some(ParameterIn::Query))))
        .response(
            "200",
            ResponseBuilder::new()
                .description(format!("{}s in use", capitalized(noun)))
                .content("application/json", page)
                .build(),
        ),
    );
    let list_schemas = vec![(Listing::<K>::schema_name(), Listing::<K>::schema().into())];
    OpenApiRouter::new()
        .routes((schemas, paths, handlers))
        .routes((list_schemas, listing, get(list::<K>)))
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// Every route of a kind, documented: its own acquire handler (see
/// [`acquire_route`]) and the shared [`name_routes`] and [`lease_routes`].
pub fn routes<K: Kind>(acquire: UtoipaMethodRouter<AppState>) -> OpenApiRouter<AppState> {
    acquire_route::<K>(acquire)
        .merge(name_routes::<K>())
        .merge(lease_routes::<K>())
}

/// `POST /{kind}s/{name}`: the kind's own documented acquire handler, whose
/// documentation gets the answers every acquisition has: 201 with the lease
/// and its `Location`, or 200 with server-sent progress.
pub fn acquire_route<K: Kind>(
    (schemas, mut paths, handler): UtoipaMethodRouter<AppState>,
) -> OpenApiRouter<AppState> {
    let noun = K::NOUN;
    let location = Header::builder()
        .schema(Some(utoipa::openapi::Object::with_type(Type::String)))
        .description(Some(format!("The lease: /{noun}s/{{name}}/{{id}}")))
        .build();
    let acquired = ResponseBuilder::new()
        .description("Acquired")
        .header("Location", location)
        .content(
            "application/json",
            Content::new(Some(Ref::from_schema_name(K::Body::name()))),
        )
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
            Content::new(Some(utoipa::openapi::Object::with_type(Type::String))),
        )
        .build();
    for operation in paths
        .paths
        .values_mut()
        .filter_map(|item| item.post.as_mut())
    {
        let responses = &mut operation.responses.responses;
        responses.insert("201".into(), acquired.clone().into());
        responses.insert("200".into(), progress.clone().into());
    }
    OpenApiRouter::new().routes((schemas, paths, handler))
}

/// `/{kind}s/{name}/{id}`: refresh, release and check of one kind, documented
/// as three operations of that kind.
pub fn lease_routes<K: Kind>() -> OpenApiRouter<AppState> {
    let noun = K::NOUN;
    let path = format!("/{noun}s/{{name}}/{{id}}");
    let body = || -> RefOr<Schema> { Ref::from_schema_name(K::Body::name()).into() };
    let lease = |description: &str| {
        let content = Content::new(Some(body()));
        ResponseBuilder::new()
            .description(description)
            .content("application/json", content)
            .build()
    };
    let refresh_body = OneOfBuilder::new()
        .item(Ref::from_schema_name(Refresh::name()))
        .item(utoipa::openapi::schema::Object::with_type(Type::Null));
    let refresh_body = RequestBodyBuilder::new()
        .description(Some("May be empty: the lease's own ttl"))
        .content("application/json", Content::new(Some(refresh_body)))
        .build();
    let operation = |verb: &str, summary: String, description: &str| {
        let mut parameters = NamePath::into_params(|| Some(ParameterIn::Path));
        parameters.extend(IdPath::into_params(|| Some(ParameterIn::Path)));
        let not_found = Ref::from_response_name(ProblemType::LeaseNotFound.component_name());
        OperationBuilder::new()
            .operation_id(Some(format!("{verb}_{noun}")))
            .summary(Some(summary))
            .description(Some(description))
            .parameters(Some(parameters))
            .response("404", not_found)
    };
    let mut paths = Paths::new();
    let mut add = |method: HttpMethod, operation: OperationBuilder| {
        paths.add_path_operation(&path, vec![method], Operation::from(operation));
    };
    add(
        HttpMethod::Patch,
        operation(
            "refresh",
            format!("Refresh a {noun} lease"),
            "Extends a lease that is still held, by `ttl_ms` from now (default: its own ttl). \
             An expired lease is gone: 404, and it is not brought back.",
        )
        .request_body(Some(refresh_body))
        .response("200", lease("Refreshed")),
    );
    add(
        HttpMethod::Delete,
        operation(
            "release",
            format!("Release a {noun} lease"),
            "Gives the lease back and wakes the next waiter in line.",
        )
        .response(
            "204",
            ResponseBuilder::new().description("Released").build(),
        ),
    );
    add(
        HttpMethod::Get,
        operation(
            "check",
            format!("Check a {noun} lease"),
            "The lease, if it is still held.",
        )
        .response("200", lease("Still held")),
    );
    let mut schemas = vec![
        (K::Body::name().into_owned(), K::Body::schema()),
        (Refresh::name().into_owned(), Refresh::schema()),
    ];
    K::Body::schemas(&mut schemas);
    let handlers = patch(refresh::<K>).delete(release::<K>).get(check::<K>);
    OpenApiRouter::new().routes((schemas, paths, handlers))
}
