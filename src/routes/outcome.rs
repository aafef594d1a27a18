//! What an acquisition answers, asked by name ([`super::kind`]) or waited
//! on as a ticket ([`super::tickets`]): 201 with the lease, 202 with the
//! ticket that keeps its place, or the problem of its refusal; and the
//! freeze that holds a name, as tickets and statuses show it.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::lease::created;
use super::{AppError, Json};
use crate::domain::{Kind, LeaseId, Name, Owner};
use crate::engine::{Lease, Refusal, TicketPlace};
use crate::wire::rfc3339_ms;
use crate::wire::{LeaseBody, Problem, TicketBody, TicketFrozen};

/// 201 with the lease and its `Location`, 202 with a ticket when its place
/// was kept, or the problem of the refusal.
pub(super) fn created_or_refused(
    kind: Kind,
    name: &Name,
    outcome: Result<Lease, Refusal>,
) -> Result<Response, AppError> {
    if let Err(Refusal::Ticketed(place)) = outcome {
        return Ok(ticketed(kind, name, *place));
    }
    let (id, lease) = answer(kind, name, outcome)?;
    Ok(created(kind.plural(), name, id, lease))
}

/// The lease as its holder sees it, or the problem of the refusal.
pub(super) fn answer(
    kind: Kind,
    name: &Name,
    outcome: Result<Lease, Refusal>,
) -> Result<(LeaseId, LeaseBody), AppError> {
    match outcome {
        Ok(lease) => Ok((lease.id, lease_body(kind, lease))),
        Err(Refusal::Busy(busy)) => Err(AppError::busy(kind, name, busy)),
        Err(Refusal::Superseded { owner }) => Err(AppError::from(Problem::superseded(
            name.as_str(),
            owner.map(Owner::into_string),
        ))),
        Err(Refusal::Frozen(frozen)) => Err(AppError::frozen(name, frozen)),
        // Answered 202 by created_or_refused(); never in a progress stream.
        Err(Refusal::Ticketed(_)) => Err(AppError::internal("a ticket where a lease was due")),
    }
}

/// A lease of `kind` as its holder sees it.
pub(super) fn lease_body(kind: Kind, lease: Lease) -> LeaseBody {
    match kind {
        Kind::Lock => LeaseBody::Lock(lease.into()),
        Kind::Semaphore => LeaseBody::Semaphore(lease.into()),
    }
}

/// The 202 of a request whose place is kept as a ticket.
pub fn ticketed(kind: Kind, name: &Name, place: TicketPlace) -> Response {
    let location = format!(
        "/{}/{}/tickets/{}",
        kind.plural(),
        name.path_segment(),
        place.ticket.expose()
    );
    let body = TicketBody {
        ticket: place.ticket.expose(),
        place: place.place,
        waiting: place.waiting,
        place_expires_at: rfc3339_ms(place.place_expires_at_ms),
        frozen: place.frozen.map(frozen_body),
    };
    (
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        Json(body),
    )
        .into_response()
}

/// The freeze that holds a name, as tickets and status show it.
pub(super) fn frozen_body(frozen: crate::engine::FrozenBy) -> TicketFrozen {
    TicketFrozen {
        until: crate::wire::rfc3339_ms_signed(frozen.until_ms),
        reason: frozen.reason.map(|r| r.as_str().to_owned()),
        freeze_id: frozen.freeze_id.map(|id| id.to_string()),
    }
}
