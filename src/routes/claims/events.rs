//! A claim's acquisition with progress events (`Accept:
//! text/event-stream` and a `wait_ms`).

use std::convert::Infallible;

use axum::http::header;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

use super::answer::{claim_body, refused};
use crate::access::QuotaSlot;
use crate::domain::{AcquireRequest, ClaimParts, Kind, Name};
use crate::engine::{ClaimProgress, ClaimWaiting, Engine};
use crate::routes::progress::json_event;
use crate::routes::AppError;
use crate::wire::{ClaimFrozen, ClaimName, ClaimQueued, ProgressEventName};

/// A claim's acquisition with progress events: `queued` each time it joins
/// a name's line (the names it holds, the one it waits for, its place
/// there), then one `acquired` or `problem`. Dropping the stream (the
/// client hung up) drops the acquisition, which gives back what it took.
pub(super) fn with_progress(
    engine: &Engine,
    parts: ClaimParts,
    request: AcquireRequest,
    revoked: BoxFuture<'static, AppError>,
    slot: Option<QuotaSlot>,
) -> Response {
    let (heard, hearing) = mpsc::unbounded_channel();
    let claims = engine.claims();
    let acquisition = Box::pin(async move {
        let acquisition = async move {
            match claims.acquire(parts, request, Some(heard)).await {
                Ok(Ok(claim)) => Ok(claim_body(claim)),
                Ok(Err(refusal)) => Err(refused(refusal)),
                Err(err) => Err(AppError::from(err)),
            }
        };
        let outcome = tokio::select! {
            biased;
            err = revoked => Err(err),
            outcome = acquisition => outcome,
        };
        drop(slot);
        outcome
    });
    let state = (Some(acquisition), hearing, engine.clone());
    let stream =
        futures_util::stream::unfold(state, |(acquisition, mut hearing, engine)| async move {
            let mut acquisition = acquisition?;
            let event = tokio::select! {
                biased;
                outcome = &mut acquisition => {
                    let event = match outcome {
                        Ok(claim) => json_event(ProgressEventName::Acquired, &claim),
                        Err(err) => json_event(ProgressEventName::Problem, err.problem()),
                    };
                    return Some((Ok::<_, Infallible>(event), (None, hearing, engine)));
                }
                Some(progress) = hearing.recv() => queued(&engine, progress).await,
            };
            Some((Ok(event), (Some(acquisition), hearing, engine)))
        });
    (
        [
            (header::CACHE_CONTROL, "no-cache"),
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        Sse::new(stream).keep_alive(KeepAlive::new().interval(crate::routes::events::KEEP_ALIVE)),
    )
        .into_response()
}

/// The event of a claim waiting where `progress` says: `queued` in a
/// name's line (with its place there), or `frozen` while a freeze holds one
/// of its names (it holds none of them then).
async fn queued(engine: &Engine, progress: ClaimProgress) -> Event {
    let named = |(kind, name): (Kind, Name)| ClaimName {
        kind,
        name: name.to_string(),
    };
    let held = progress.held.into_iter().map(named).collect();
    let waiting_for = named(progress.waiting_for);
    let in_line = match progress.waiting {
        ClaimWaiting::InLine(in_line) => in_line,
        ClaimWaiting::Frozen(frozen) => {
            let data = ClaimFrozen {
                held,
                waiting_for,
                until: crate::wire::rfc3339_ms_signed(frozen.until_ms),
                reason: frozen.reason.map(|r| r.as_str().to_owned()),
                freeze_id: frozen.freeze_id.map(|id| id.to_string()),
            };
            return json_event(ProgressEventName::Frozen, &data);
        }
    };
    // Redis unreachable: the event goes without the place.
    let place = engine.place(&in_line).await.ok().flatten();
    let data = ClaimQueued {
        held,
        waiting_for,
        position: place.as_ref().map(|p| p.position),
        waiting: place.as_ref().map(|p| p.waiting),
    };
    json_event(ProgressEventName::Queued, &data)
}
