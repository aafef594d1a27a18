//! What a claim's requests name, parsed into domain types: the `{id}` of
//! `/claims/{id}` ([`ClaimPath`]), and the body of `POST /claims`
//! ([`ClaimCall`], [`asked`]).

use std::future::Future;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use utoipa::IntoParams;

use crate::domain::{
    AcquireRequest, ClaimId, ClaimPart, ClaimParts, Demand, Kind, Limit, Name, Permits,
};
use crate::routes::extract::read_body;
use crate::routes::lease::acquire_request;
use crate::routes::{progress, AppError, AppState, Caller};
use crate::telemetry::RequestContext;
use crate::wire::{AcquireFields, ClaimRequest};

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
    pub caller: Caller,
    pub accepts_events: bool,
    pub context: RequestContext,
    pub body: Bytes,
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
pub(super) fn asked(
    body: ClaimRequest,
    max_wait_ms: u64,
) -> Result<(ClaimParts, AcquireRequest), AppError> {
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
