//! `GET /events`: a server-sent event stream of every change to the locks and
//! semaphores under a name prefix, made on any instance.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::header;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::problem::responses::TooManyStreams;
use super::{AppError, AppState, Caller};
use crate::access::{Quota, QuotaSlot};
use crate::domain::NamePrefix;
use crate::engine::events::{Change, ChangeEvent, WatchNotice, Watcher};
use crate::wire::{ChangeEventBody, ChangeEventName, Problem};

/// How often a comment line keeps proxies from closing an idle stream.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The `/events` route, documented.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(events))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Only changes to names that start with this; all changes when absent.
    #[param(max_length = 200, example = "deploy-")]
    pub prefix: Option<String>,
}

/// The name of the event that tells of `change`.
fn event_name(change: Change) -> ChangeEventName {
    match change {
        Change::Acquired => ChangeEventName::Acquired,
        Change::Released => ChangeEventName::Released,
        Change::Refreshed => ChangeEventName::Refreshed,
        Change::Expired => ChangeEventName::Expired,
        Change::ForceReleased => ChangeEventName::ForceReleased,
        Change::Queued => ChangeEventName::Queued,
        Change::Left => ChangeEventName::Left,
        Change::YieldRequested => ChangeEventName::YieldRequested,
    }
}

impl From<&ChangeEvent> for ChangeEventBody {
    fn from(change: &ChangeEvent) -> Self {
        Self {
            kind: change.kind.as_str(),
            name: change.name.clone(),
            owner: change.owner.clone(),
            fencing_token: change.fencing_token,
            holders: change.holders,
            waiting: change.waiting,
            by: change.by.clone(),
            reason: change.reason.clone(),
        }
    }
}

/// Watch changes
///
/// A server-sent event stream (`text/event-stream`) of every change to the
/// locks and semaphores whose names start with `prefix`, made through any
/// baton instance, as it happens. Each event is named `acquired`, `released`,
/// `refreshed`, `expired`, `force-released`, `queued`, `left` or
/// `yield-requested` (someone asks the holders to finish early), and its data
/// is one `ChangeEventBody`. An event named `resync` (data `{}`) says that
/// changes may have been missed (Redis was unreachable, or the client read too
/// slowly): read the current state again. A comment line is sent every 15 s;
/// the stream ends when the service shuts down. Each instance serves at most
/// `BATON_MAX_EVENT_STREAMS` streams at once (503 `too-many-streams` beyond).
///
/// With a scoped token, only the changes to names it may read are sent
/// (and none of any other name's). A token removed, narrowed or expired
/// (the token file read again) reaches an open stream at once: it sends
/// only what the token may still read, and ends when that is nothing.
/// One token may hold at most half of `BATON_MAX_EVENT_STREAMS` (holders'
/// streams included): 503 `too-many-streams` to that token only.
///
/// Browsers: `EventSource` cannot send an `Authorization` header; when the
/// service has API tokens, read the stream with `fetch()` (as the dashboard
/// at `/` does) rather than putting a token in the URL.
#[utoipa::path(
    get,
    path = "/events",
    operation_id = "watch_events",
    params(EventsQuery),
    responses(
        (status = 200, description = "The event stream; each event's data is a ChangeEventBody",
            content_type = "text/event-stream", body = ChangeEventBody),
        (status = 503, response = TooManyStreams),
    )
)]
pub async fn events(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<EventsQuery>,
) -> Result<Response, AppError> {
    let asked = NamePrefix::parse(query.prefix.as_deref().unwrap_or_default())
        .map_err(|e| AppError::field("prefix", e))?;
    // Watch only where the caller may read; when that is nowhere under the
    // prefix, the stream stays open with nothing but its keep-alives.
    let prefix = caller
        .readable_within(&asked)
        .unwrap_or_else(|| asked.clone());
    // The token's share first: a token at its share takes nothing from the others.
    let slot = state.quotas.take(caller.whose(), Quota::Streams)?;
    let watch = state
        .engine
        .events()
        .watch(prefix)
        .map_err(|e| AppError::from(Problem::too_many_streams(e.max)))?;
    state.engine.events().subscribed().await;
    let open = Open {
        watch,
        caller,
        asked,
        _slot: slot,
    };
    let sse = Sse::new(stream(open)).keep_alive(KeepAlive::new().interval(KEEP_ALIVE));
    Ok((
        [
            (header::CACHE_CONTROL, "no-cache"),
            // nginx and its kin buffer responses unless told not to.
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        sse,
    )
        .into_response())
}

/// An open stream: its watch, its caller, the prefix it asked for, and its
/// slot in the caller's share of streams.
struct Open {
    watch: Watcher,
    caller: Caller,
    asked: NamePrefix,
    _slot: Option<QuotaSlot>,
}

/// The watch as SSE events of the names the caller may read, until the
/// service stops. A change of the tokens in force reaches it at once: from
/// then on only what the token may read now is sent, and the stream ends
/// once the token is gone or may read nothing under the prefix.
fn stream(open: Open) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(open, |mut open| async move {
        let event = loop {
            tokio::select! {
                biased;
                now = open.caller.changed() => match now {
                    Some(principal) if principal.may_read_within(&open.asked) => {}
                    _ => return None,
                },
                notice = open.watch.next() => match notice? {
                    WatchNotice::Change(change) if !open.caller.may_read_text(&change.name) => {}
                    notice => break notice,
                },
            }
        };
        let resync = || {
            Event::default()
                .event(ChangeEventName::Resync.as_str())
                .data("{}")
        };
        let event = match event {
            WatchNotice::Change(change) => Event::default()
                .event(event_name(change.event).as_str())
                .json_data(ChangeEventBody::from(&*change))
                .unwrap_or_else(|_| resync()),
            WatchNotice::Resync => resync(),
        };
        Some((Ok(event), open))
    })
}
