//! What a claim's acquisition answers: the claim's body, or the problem of
//! its refusal.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::domain::Kind;
use crate::engine::{Claim, ClaimRefused, Refusal};
use crate::routes::{AppError, Json};
use crate::wire::{ClaimBody, LeaseBody};

/// 201 with the claim and its `Location`, or the problem of the refusal.
pub(super) fn created_or_refused(
    outcome: Result<Claim, ClaimRefused>,
) -> Result<Response, AppError> {
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
pub(super) fn refused(refused: ClaimRefused) -> AppError {
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
pub(super) fn claim_body(claim: Claim) -> ClaimBody {
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
