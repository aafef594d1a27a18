//! `/{kind}/{name}/tickets/{ticket}`: a place in line that outlives the
//! request (`keep_place_ms`): look at it, wait on it again or collect its
//! lease (on any instance), give it up. Routed for each kind by
//! [`super::kind::router`]; documented here ([`document`]).

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use utoipa::openapi::header::Header;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterIn};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::OneOfBuilder;
use utoipa::openapi::{Content, Object, OpenApi, Ref, ResponseBuilder, Type};
use utoipa::{IntoParams, PartialSchema, ToSchema};

use super::extract::{parse_json, read_body};
use super::kind_doc::{lease_schema_name, ticket_response};
use super::lease::NamePath;
use super::outcome::{created_or_refused, frozen_body};
use super::{AppError, AppState, Caller, Json};
use crate::access::{Principal, Quota};
use crate::domain::{Forsaken, Kind, LeaseId, Scope, WaitTime};
use crate::engine::{Acquiring, TicketWait};
use crate::http::Parked;
use crate::telemetry::RequestContext;
use crate::wire::rfc3339_ms;
use crate::wire::{
    EtaBasis, ProblemType, TicketBody, TicketFrozen, TicketStateBody, TicketWaitBody,
};

/// The `{ticket}` path parameter.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct TicketPath {
    /// The ticket from the 202 of an acquisition with `keep_place_ms`.
    #[param(value_type = String, format = Uuid)]
    pub ticket: LeaseId,
}

impl<S: Send + Sync> FromRequestParts<S> for TicketPath {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let params = axum::extract::RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|e| AppError::invalid(format!("ticket: {}", e.body_text())))?;
        let raw = params
            .iter()
            .find(|(k, _)| *k == "ticket")
            .map(|(_, v)| v.to_owned())
            .ok_or_else(|| AppError::invalid("ticket: missing from the path".into()))?;
        let ticket = LeaseId::parse(&raw).map_err(|e| AppError::field("ticket", e))?;
        Ok(Self { ticket })
    }
}

/// `keep_place_ms` checked against the service's bound (1 to
/// `BATON_MAX_KEEP_PLACE_MS`), 400 naming it otherwise.
///
/// # Errors
/// `invalid-request` naming `keep_place_ms`.
pub fn keep_place_ms(keep_ms: u64, max_keep_place_ms: u64) -> Result<u64, AppError> {
    if (1..=max_keep_place_ms).contains(&keep_ms) {
        Ok(keep_ms)
    } else {
        Err(AppError::invalid(format!(
            "keep_place_ms: must be between 1 and {max_keep_place_ms} (the server's maximum)"
        )))
    }
}

/// `GET /{kind}s/{name}/tickets/{ticket}` (`write`: the ticket holder's question).
pub async fn show(
    State(state): State<AppState>,
    kind: Kind,
    caller: Caller,
    NamePath { name }: NamePath,
    TicketPath { ticket }: TicketPath,
) -> Result<Json<TicketStateBody>, AppError> {
    caller.require(Scope::Write, &name)?;
    let place = state
        .leases(kind)
        .ticket(&name, ticket)
        .await?
        .ok_or(AppError::from(ProblemType::TicketNotFound))?;
    Ok(Json(TicketStateBody {
        state: if place.pickup_by_ms.is_some() {
            "granted"
        } else {
            "waiting"
        }
        .to_owned(),
        place: place.place,
        waiting: place.waiting,
        place_expires_at: rfc3339_ms(place.place_expires_at_ms),
        frozen: place.frozen.map(frozen_body),
        eta_ms: place.eta.map(|eta| super::lease::eta_ms(eta.wait)),
        eta_basis: place.eta.map(|eta| EtaBasis { holds: eta.holds }),
        pickup_by: place.pickup_by_ms.map(rfc3339_ms),
        notified_at: place
            .notice
            .as_ref()
            .and_then(|n| n.notified_at_ms)
            .map(rfc3339_ms),
        notify_error: place.notice.and_then(|n| n.error),
    }))
}

/// `DELETE /{kind}s/{name}/tickets/{ticket}` (`write`): leaves the line, or
/// releases the lease granted and not collected.
pub async fn leave(
    State(state): State<AppState>,
    kind: Kind,
    caller: Caller,
    NamePath { name }: NamePath,
    TicketPath { ticket }: TicketPath,
) -> Result<StatusCode, AppError> {
    caller.require(Scope::Write, &name)?;
    if state.leases(kind).leave_ticket(&name, ticket).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(AppError::from(ProblemType::TicketNotFound))
    }
}

/// `POST /{kind}s/{name}/tickets/{ticket}` (`write`): waits again in the
/// same place, with the same terms: 201 the lease once granted (collected:
/// its ttl runs from now; a retried collect gets the same lease), else 202.
pub async fn wait(
    State(state): State<AppState>,
    kind: Kind,
    request: Request,
) -> Result<Response, AppError> {
    let (mut parts, body) = request.into_parts();
    let NamePath { name } = NamePath::from_request_parts(&mut parts, &state).await?;
    let TicketPath { ticket } = TicketPath::from_request_parts(&mut parts, &state).await?;
    let caller = Caller::of(&parts)?;
    caller.require(Scope::Write, &name)?;
    let context = RequestContext::of(&parts);
    let body = read_body(Request::from_parts(parts, body), &state).await?;
    let asked: TicketWaitBody = parse_json(&body)?;
    let max_wait_ms = state.settings.max_wait_ms;
    let wait = WaitTime::from_ms(asked.wait_ms.unwrap_or(0).min(max_wait_ms), max_wait_ms)
        .map_err(|e| AppError::field("wait_ms", e))?;
    let keep_ms = asked
        .keep_place_ms
        .map(|k| keep_place_ms(k, state.settings.max_keep_place_ms))
        .transpose()?;
    let forsaken = Forsaken::default();
    let request = TicketWait {
        wait,
        keep_ms,
        pickup_ms: state.settings.pickup_ms,
        forsaken: forsaken.clone(),
    };
    let watched = name.clone();
    let waiting = Box::pin(
        state
            .leases(kind)
            .wait_on_ticket(name.clone(), ticket, request),
    );
    let outcome = waiting.then(move |acquiring| async move {
        let outcome = match acquiring? {
            None => return Err(AppError::from(ProblemType::TicketNotFound)),
            Some(Acquiring::Now(outcome)) => outcome,
            Some(Acquiring::Queued(queued)) => queued.outcome().await?,
        };
        created_or_refused(kind, &name, outcome)
    });
    if wait.as_duration().is_zero() {
        return outcome.await;
    }
    // A waiting request takes a slot of its token's share of waiters, and
    // gives its ticket up with 401 or 403 should its token be removed,
    // narrowed or expired meanwhile.
    let slot = state.quotas.take(caller.whose(), Quota::Waiters)?;
    let still = move |principal: &Principal| {
        principal
            .require(Scope::Write, &watched)
            .map_err(AppError::from)
    };
    let revocable = caller.can_change();
    let revoked = caller.revoked(still).map(move |err| {
        forsaken.set();
        err
    });
    let outcome = Caller::unless_revoked(revocable, revoked, outcome);
    let answer = outcome.map(move |answer| {
        drop(slot);
        answer.unwrap_or_else(IntoResponse::into_response)
    });
    Ok(Parked::new(answer, context).into_response())
}

/// Adds the ticket operations of `kind` and their schemas to `doc`.
pub fn document(kind: Kind, doc: &mut OpenApi) {
    let (noun, plural) = (kind.as_str(), kind.plural());
    let path = format!("/{plural}/{{name}}/tickets/{{ticket}}");
    let mut parameters = NamePath::into_params(|| Some(ParameterIn::Path));
    parameters.extend(TicketPath::into_params(|| Some(ParameterIn::Path)));
    let operation = |id: &str, summary: &str, description: &str| {
        OperationBuilder::new()
            .operation_id(Some(format!("{id}_{noun}_ticket")))
            .summary(Some(summary.to_owned()))
            .description(Some(description.to_owned()))
            .parameters(Some(parameters.clone()))
            .response("404", ProblemType::TicketNotFound.response_ref())
    };
    let json =
        |name: std::borrow::Cow<'static, str>| Content::new(Some(Ref::from_schema_name(name)));
    let location = Header::builder()
        .schema(Some(Object::with_type(Type::String)))
        .build();
    doc.paths.add_path_operation(
        &path,
        vec![HttpMethod::Get],
        operation(
            "show",
            &format!("A {noun} ticket"),
            "Where the ticket stands: `waiting` at `place`, or `granted` with its lease held \
             for it until `pickup_by`.",
        )
        .response(
            "200",
            ResponseBuilder::new()
                .description("The ticket")
                .content("application/json", json(TicketStateBody::name()))
                .build(),
        ),
    );
    doc.paths.add_path_operation(
        &path,
        vec![HttpMethod::Post],
        operation(
            "wait_on",
            &format!("Wait on a {noun} ticket, or collect its lease"),
            "Waits again in the ticket's place (on any instance) up to `wait_ms`, with the \
             terms it was taken with: 201 with the lease once granted (collected: its ttl runs \
             from now; a retried collect gets the same lease, never a second), else 202. Every \
             call renews `place_expires_at`.",
        )
        .request_body(Some(
            RequestBodyBuilder::new()
                .description(Some("May be empty: collect, or answer at once"))
                .content(
                    "application/json",
                    Content::new(Some(
                        OneOfBuilder::new()
                            .item(Ref::from_schema_name(TicketWaitBody::name()))
                            .item(Object::with_type(Type::Null)),
                    )),
                )
                .build(),
        ))
        .response(
            "201",
            ResponseBuilder::new()
                .description("Granted: the lease")
                .header("Location", location.clone())
                .content("application/json", json(lease_schema_name(kind).into()))
                .build(),
        )
        .response("202", ticket_response(location)),
    );
    doc.paths.add_path_operation(
        &path,
        vec![HttpMethod::Delete],
        operation(
            "leave",
            &format!("Give a {noun} ticket up"),
            "Leaves the line, or releases the lease granted to the ticket and not collected.",
        )
        .response("204", ResponseBuilder::new().description("Left").build()),
    );
    let schemas = &mut doc.components.get_or_insert_with(Default::default).schemas;
    for (name, schema) in [
        (TicketBody::name(), TicketBody::schema()),
        (TicketStateBody::name(), TicketStateBody::schema()),
        (TicketWaitBody::name(), TicketWaitBody::schema()),
        (TicketFrozen::name(), TicketFrozen::schema()),
    ] {
        schemas.insert(name.into_owned(), schema);
    }
}
