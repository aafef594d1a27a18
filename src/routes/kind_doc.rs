//! The OpenAPI of a kind's routes ([`super::kind`]): their operations and
//! schemas, generated per kind with its nouns, bodies and problem types.

use utoipa::openapi::header::Header;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, Parameter, ParameterIn, Paths};
use utoipa::openapi::request_body::{RequestBody, RequestBodyBuilder};
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, SchemaType, Type};
use utoipa::openapi::{
    Content, Object, OpenApi, Ref, RefOr, Required, Response, ResponseBuilder, Schema,
};
use utoipa::{IntoParams, ToSchema};

use super::lease::{IdPath, NamePath};
use super::listing::ListQuery;
use crate::domain::Kind;
use crate::wire::{
    AcquireLock, AcquireSemaphore, LockLeaseBody, LockStatusBody, ProblemType, Refresh,
    SemaphoreLeaseBody, SemaphoreStatusBody, TicketBody,
};

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

    /// `application/json` content of this body.
    fn json(&self) -> Content {
        Content::new(Some(self.reference()))
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
                        .content("application/json", acquire.json())
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

/// The schema name of `kind`'s lease body.
pub fn lease_schema_name(kind: Kind) -> String {
    KindDoc::of(kind).lease.name
}

/// Adds the operations and schemas of `kind` to `doc`: `/{kind}s/{name}`
/// (acquire, status, force-release), `/{kind}s/{name}/{id}` (refresh,
/// release, check) and `/{kind}s` (the listing).
pub fn document(kind: Kind, doc: &mut OpenApi) {
    let own = KindDoc::of(kind);
    name_operations(kind, &own, &mut doc.paths);
    lease_operations(kind, &own.lease, &mut doc.paths);
    listing_operation(kind, &mut doc.paths);

    let listing_schema = ObjectBuilder::new()
        .description(Some(format!(
            "One page of the {} in use, sorted by name.",
            kind.plural()
        )))
        .property(
            kind.plural(),
            ArrayBuilder::new().items(own.status.reference()),
        )
        .required(kind.plural())
        .property(
            "next_cursor",
            ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
                .description(Some(
                    "Pass as `?cursor=` for the next page; absent on the last page.",
                )),
        );
    let schemas = &mut doc.components.get_or_insert_with(Default::default).schemas;
    schemas.extend(
        [own.acquire, own.lease, own.status, Body::of::<Refresh>()]
            .into_iter()
            .flat_map(|body| body.schemas),
    );
    schemas.insert(
        listing_schema_name(kind),
        Schema::from(listing_schema).into(),
    );
}

/// `/{kind}s/{name}`: acquire, status, force-release.
fn name_operations(kind: Kind, own: &KindDoc, paths: &mut Paths) {
    let (noun, plural) = (kind.as_str(), kind.plural());
    let path = format!("/{plural}/{{name}}");
    let location = Header::builder()
        .schema(Some(Object::with_type(Type::String)))
        .description(Some(format!("The lease: /{plural}/{{name}}/{{id}}")))
        .build();
    let acquired = ResponseBuilder::new()
        .description("Acquired")
        .header("Location", location)
        .content("application/json", own.lease.json())
        .build();
    let progress = ResponseBuilder::new()
        .description(
            "With `Accept: text/event-stream` and a `wait_ms`: server-sent progress events, \
             `queued` (`{\"position\", \"waiting\", \"holders\": [{\"owner\"?, \"expires_in_ms\"}]}`) \
             on joining the line and whenever the position or the holders change, `frozen` \
             (`{\"until\", \"reason\"?, \"freeze_id\"}`) while a freeze holds the name, then one \
             `acquired` (the lease body) or `problem` (the problem body)",
        )
        .content(
            "text/event-stream",
            Content::new(Some(Object::with_type(Type::String))),
        )
        .build();
    paths.add_path_operation(
        &path,
        vec![HttpMethod::Post],
        operation(
            format!("acquire_{noun}"),
            own.acquire_summary.to_owned(),
            own.acquire_description,
        )
        .parameters(Some(name_parameter()))
        .request_body(Some(own.acquire_body.clone()))
        .response("200", progress)
        .response("201", acquired)
        .response(
            "202",
            ticket_response(
                Header::builder()
                    .schema(Some(Object::with_type(Type::String)))
                    .description(Some(format!(
                        "The ticket: /{plural}/{{name}}/tickets/{{ticket}}"
                    )))
                    .build(),
            ),
        )
        .response("409", ProblemType::busy(kind).response_ref())
        .response("423", ProblemType::Frozen.response_ref()),
    );
    paths.add_path_operation(
        &path,
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
        .parameters(Some(name_parameter()))
        .response(
            "200",
            ResponseBuilder::new()
                .description("Status")
                .content("application/json", own.status.json())
                .build(),
        ),
    );
    paths.add_path_operation(
        &path,
        vec![HttpMethod::Delete],
        operation(
            format!("force_release_{noun}"),
            format!("Force-release a {noun}"),
            &format!(
                "Frees the {noun} whoever holds it (every lease of it: an administrator's \
                 action) and wakes its waiters, who keep their places in line. Needs `admin` on \
                 the name (an admin token) when the service has tokens."
            ),
        )
        .parameters(Some(name_parameter()))
        .response("204", released())
        .response("403", ProblemType::Forbidden.response_ref())
        .response("404", ProblemType::not_held(kind).response_ref()),
    );
}

/// `/{kind}s/{name}/{id}`: refresh, release, check.
fn lease_operations(kind: Kind, lease: &Body, paths: &mut Paths) {
    let noun = kind.as_str();
    let path = format!("/{}/{{name}}/{{id}}", kind.plural());
    let refresh_body = OneOfBuilder::new()
        .item(Ref::from_schema_name(Refresh::name()))
        .item(Object::with_type(Type::Null));
    let refresh_body = RequestBodyBuilder::new()
        .description(Some("May be empty: the lease's own ttl"))
        .content("application/json", Content::new(Some(refresh_body)))
        .build();
    let lease_response = |description: &str| {
        ResponseBuilder::new()
            .description(description)
            .content("application/json", lease.json())
            .build()
    };
    let lease_operation = |verb: &str, summary: &str, description: &str| {
        let mut parameters = name_parameter();
        parameters.extend(IdPath::into_params(|| Some(ParameterIn::Path)));
        operation(
            format!("{verb}_{noun}"),
            format!("{summary} a {noun} lease"),
            description,
        )
        .parameters(Some(parameters))
        .response("404", ProblemType::LeaseNotFound.response_ref())
    };
    paths.add_path_operation(
        &path,
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
        &path,
        vec![HttpMethod::Delete],
        lease_operation(
            "release",
            "Release",
            "Gives the lease back and wakes the next waiter in line.",
        )
        .response("204", released()),
    );
    paths.add_path_operation(
        &path,
        vec![HttpMethod::Get],
        lease_operation("check", "Check", "The lease, if it is still held.")
            .response("200", lease_response("Still held")),
    );
}

/// `/{kind}s`: one page of those in use.
fn listing_operation(kind: Kind, paths: &mut Paths) {
    let (noun, plural) = (kind.as_str(), kind.plural());
    let page = Content::new(Some(Ref::from_schema_name(listing_schema_name(kind))));
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
                .description(format!("{} in use", capitalized(plural)))
                .content("application/json", page)
                .build(),
        ),
    );
}

/// The schema name of a page of `kind`'s listing: `LockList`.
fn listing_schema_name(kind: Kind) -> String {
    format!("{}List", capitalized(kind.as_str()))
}

/// An operation `id` with its `summary` and `description`.
pub(super) fn operation(id: String, summary: String, description: &str) -> OperationBuilder {
    OperationBuilder::new()
        .operation_id(Some(id))
        .summary(Some(summary))
        .description(Some(description))
}

/// The `{name}` path parameter.
pub(super) fn name_parameter() -> Vec<Parameter> {
    NamePath::into_params(|| Some(ParameterIn::Path))
}

/// The 202 answer of an acquisition or of a wait on a ticket: the place
/// kept as a ticket.
pub fn ticket_response(location: Header) -> Response {
    ResponseBuilder::new()
        .description("Not granted yet: the place is kept as a ticket")
        .header("Location", location)
        .content(
            "application/json",
            Content::new(Some(Ref::from_schema_name(TicketBody::name()))),
        )
        .build()
}

/// Adds the schema of `T`, and those it refers to, to `doc`'s components.
pub(super) fn add_schemas<T: ToSchema>(doc: &mut OpenApi) {
    let schemas = &mut doc.components.get_or_insert_with(Default::default).schemas;
    schemas.extend(Body::of::<T>().schemas);
}

fn released() -> Response {
    ResponseBuilder::new().description("Released").build()
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}
