//! Acquisitions that report their progress. With `Accept: text/event-stream`
//! and a `wait_ms`, `POST /locks/{name}` and `POST /semaphores/{name}` answer
//! `200 text/event-stream` at once, send `queued` (position, waiting, holders)
//! on joining the line and whenever the position or the holders change,
//! `frozen` (until, reason, freeze_id) while a freeze holds the name, then
//! exactly one `acquired` (the lease body) or `problem` (the problem body the
//! plain request would have answered). Dropping the stream (the client went
//! away) drops the acquisition, which leaves the line as a plain one does.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;

use axum::http::{header, HeaderMap};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use serde::Serialize;
use tokio::sync::mpsc;

use super::AppError;
use crate::domain::{Demand, Kind, Name, Owner, Priority, WaitTime};
use crate::engine::events::{WatchNotice, Watcher};
use crate::engine::wall_clock_ms;
use crate::engine::{Acquiring, Engine, InLine, Lease, Place, Refusal};
use crate::wire::{EtaBasis, FrozenLine, ProgressEventName, Queued, QueuedBehind};

/// Whether the request asks for progress events: `Accept: text/event-stream`
/// and a wait (without one there is nothing to report).
pub fn wanted(accepts_events: bool, wait: WaitTime) -> bool {
    accepts_events && !wait.as_duration().is_zero()
}

/// Whether the request's `Accept` names `text/event-stream`.
pub fn accepts_events(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| {
            v.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

/// A lock's lease says whether it is shared, a semaphore's its permits.
fn shown(kind: Kind, weight: u64) -> (Option<bool>, Option<u64>) {
    match kind {
        Kind::Lock => (Some(!Demand::is_exclusive_weight(weight)), None),
        Kind::Semaphore => (None, Some(weight)),
    }
}

/// The `queued` data of a waiter asking `demand` of a `kind` at `priority`,
/// at `place`.
fn queued(kind: Kind, demand: Demand, priority: Priority, place: &Place) -> Queued {
    let (shared, permits) = shown(kind, demand.weight());
    Queued {
        position: place.position,
        waiting: place.waiting,
        priority: (!priority.is_default()).then(|| priority.get()),
        shared,
        permits,
        eta_ms: place.eta.map(|eta| super::lease::eta_ms(eta.wait)),
        eta_basis: place.eta.map(|eta| EtaBasis { holds: eta.holds }),
        holders: place
            .holders
            .iter()
            .map(|h| {
                let (shared, permits) = shown(kind, h.weight);
                QueuedBehind {
                    owner: h.owner.clone().map(Owner::into_string),
                    expires_in_ms: h.expires_in.as_millis() as u64,
                    shared,
                    permits,
                }
            })
            .collect(),
    }
}

/// What makes a `queued` event worth sending again: the position, the line's
/// length and who holds (not the time they have left, which always moves).
fn fingerprint(place: &Place) -> (u64, u64, Vec<u64>) {
    (
        place.position,
        place.waiting,
        place.holders.iter().map(|h| h.fencing_token).collect(),
    )
}

type Outcome = Result<serde_json::Value, AppError>;

/// The lease body, as JSON, of a successful acquisition.
pub fn lease_json(body: &impl Serialize) -> Result<serde_json::Value, AppError> {
    serde_json::to_value(body)
        .map_err(|err| AppError::from(crate::engine::Error::Protocol(format!("lease body: {err}"))))
}

/// One acquisition with progress, as a stream of events.
struct Progress {
    acquisition: Pin<Box<dyn Future<Output = Outcome> + Send>>,
    joins: mpsc::UnboundedReceiver<InLine>,
    changes: Option<Watcher>,
    engine: Engine,
    kind: Kind,
    /// What it asks of the name.
    demand: Demand,
    /// Its place among the waiters.
    priority: Priority,
    name: Name,
    /// Its place in line, once it has joined.
    waiter: Option<InLine>,
    last: Option<(u64, u64, Vec<u64>)>,
    /// Every change of the freezes this instance holds.
    freezes: tokio::sync::watch::Receiver<u64>,
    /// The end of the freeze window last told (`frozen`), while it holds.
    frozen_until: Option<i64>,
    done: bool,
}

impl Progress {
    /// A `frozen` event when a freeze started holding the name (or its end
    /// moved) since the last one told; when it stopped, the next `queued`
    /// is sent again.
    fn frozen_change(&mut self) -> Option<Event> {
        let now = wall_clock_ms();
        let book = self.engine.freezes();
        let frozen = book
            .book()
            .for_name(self.kind, self.name.as_str(), now)
            .filter(|f| f.holds(now));
        let until = frozen.as_ref().map(|f| f.window.end_ms);
        if until == self.frozen_until {
            return None;
        }
        self.frozen_until = until;
        let Some(frozen) = frozen else {
            self.last = None;
            return None;
        };
        Some(json_event(
            ProgressEventName::Frozen,
            &FrozenLine {
                until: crate::wire::rfc3339_ms_signed(frozen.window.end_ms),
                reason: frozen.reason.map(|r| r.as_str().to_owned()),
                freeze_id: Some(frozen.freeze_id.to_string()),
            },
        ))
    }

    /// When a freeze of the name next starts or ends, as this instance knows it.
    fn freeze_boundary(&self) -> Option<tokio::time::Instant> {
        let now = wall_clock_ms();
        let freeze = self
            .engine
            .freezes()
            .book()
            .for_name(self.kind, self.name.as_str(), now)?;
        let at = if freeze.holds(now) {
            freeze.window.end_ms
        } else {
            freeze.window.start_ms
        };
        let wait = u64::try_from(at - now + 1).ok()?;
        Some(tokio::time::Instant::now() + std::time::Duration::from_millis(wait))
    }

    async fn next(&mut self) -> Option<Event> {
        while !self.done {
            if self.waiter.is_some() {
                if let Some(event) = self.frozen_change() {
                    return Some(event);
                }
            }
            let boundary = self.freeze_boundary();
            tokio::select! {
                biased;
                outcome = &mut self.acquisition => {
                    self.done = true;
                    return Some(final_event(outcome));
                }
                r = self.freezes.changed() => {
                    if r.is_err() {
                        self.freezes = self.engine.freezes().book().changes();
                    }
                    continue;
                }
                () = sleep_until(boundary) => continue,
                Some(waiter) = self.joins.recv() => {
                    self.waiter = Some(waiter);
                    // A rejoin is a new place: report it even if it looks the same.
                    self.last = None;
                }
                notice = next_change(&mut self.changes) => match notice {
                    None => {
                        self.changes = None;
                        continue;
                    }
                    Some(WatchNotice::Change(change))
                        if change.name != self.name.as_str() || change.kind != self.kind =>
                    {
                        continue;
                    }
                    Some(_) => {}
                },
            }
            let Some(waiter) = &self.waiter else { continue };
            // Redis unreachable: the next change (or the outcome) will tell.
            if let Ok(Some(mut place)) = self.engine.place(waiter).await {
                let now = fingerprint(&place);
                if self.last.as_ref() != Some(&now) {
                    let leases = self.engine.leases(self.kind);
                    if let Ok(Some(typical)) = leases.typical_hold(&self.name).await {
                        let limit = crate::domain::Limit::new(self.demand.limit()).ok();
                        place.eta =
                            Some(typical.eta(self.kind, limit, &place.holders, place.position));
                    }
                }
                if self.last.as_ref() != Some(&now) {
                    self.last = Some(now);
                    return Some(json_event(
                        ProgressEventName::Queued,
                        &queued(self.kind, self.demand, self.priority, &place),
                    ));
                }
            }
        }
        None
    }
}

/// Sleeps until `at`; forever without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn next_change(changes: &mut Option<Watcher>) -> Option<WatchNotice> {
    match changes {
        Some(watch) => watch.next().await,
        None => std::future::pending().await,
    }
}

/// The progress event `name` with `data` as JSON (`{}` should it not
/// serialize).
pub(super) fn json_event(name: ProgressEventName, data: &impl Serialize) -> Event {
    let name = name.as_str();
    Event::default()
        .event(name)
        .json_data(data)
        .unwrap_or_else(|_| Event::default().event(name).data("{}"))
}

fn final_event(outcome: Outcome) -> Event {
    match outcome {
        Ok(lease) => json_event(ProgressEventName::Acquired, &lease),
        Err(err) => {
            if let Some(super::error::Cause::Engine(cause)) = err.cause() {
                tracing::warn!(%cause, "acquisition with progress failed");
            }
            json_event(ProgressEventName::Problem, err.problem())
        }
    }
}

/// An acquisition about to join the line, and what ends it early: its
/// token removed, narrowed or expired ([`super::Caller::revoked`]).
pub struct Pending {
    pub acquisition: BoxFuture<'static, Result<Acquiring, crate::engine::Error>>,
    pub revoked: BoxFuture<'static, AppError>,
}

/// Answers an acquisition with progress events: `acquisition` joins the line
/// (or acquires at once), and `answer` turns its outcome into the lease body
/// or the error the plain request would have answered.
pub fn respond<A>(
    engine: &Engine,
    kind: Kind,
    demand: Demand,
    priority: Priority,
    name: Name,
    Pending {
        acquisition,
        revoked,
    }: Pending,
    answer: A,
) -> Response
where
    A: FnOnce(Result<Lease, Refusal>) -> Outcome + Send + 'static,
{
    // Watching starts before the acquisition, so no change falls between.
    let changes = Some(engine.events().follow(name.as_str()));
    let events = engine.events().clone();
    let (joined, joins) = mpsc::unbounded_channel();
    let acquisition = async move {
        events.subscribed().await;
        let outcome = match acquisition.await? {
            Acquiring::Now(outcome) => outcome,
            Acquiring::Queued(queued) => {
                let _ = joined.send(queued.in_line());
                queued.outcome().await?
            }
        };
        answer(outcome)
    };
    // A token removed, narrowed or expired meanwhile: the acquisition is
    // dropped (it leaves the line, giving back a lease granted meanwhile)
    // and the stream ends with its `problem`.
    let acquisition = async move {
        tokio::select! {
            biased;
            err = revoked => Err(err),
            outcome = acquisition => outcome,
        }
    };
    let progress = Progress {
        acquisition: Box::pin(acquisition),
        joins,
        changes,
        engine: engine.clone(),
        kind,
        demand,
        priority,
        name,
        waiter: None,
        last: None,
        freezes: engine.freezes().book().changes(),
        frozen_until: None,
        done: false,
    };
    let stream = futures_util::stream::unfold(progress, |mut progress| async move {
        let event = progress.next().await?;
        Some((Ok::<_, Infallible>(event), progress))
    });
    (
        [
            (header::CACHE_CONTROL, "no-cache"),
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        // A client that goes away is noticed at once (the connection reads EOF);
        // the comments are for proxies that close idle streams.
        Sse::new(stream).keep_alive(KeepAlive::new().interval(super::events::KEEP_ALIVE)),
    )
        .into_response()
}
