//! What a connection is doing (requests in flight, when a request head
//! started, since when it is idle), the timer that closes it on the header
//! or idle timeout, and at shutdown the wait until its requests are done.
//!
//! A connection that has not sent a whole request head within
//! [`Limits::header_timeout`] of opening (or, on a keep-alive connection, of
//! the first byte of its next request) is closed, and so is a connection with
//! no request in flight for [`Limits::idle_timeout`]. hyper's own HTTP/1
//! header timer cannot do both: it also runs while a keep-alive connection is
//! idle, so it would close idle connections after the header timeout. Each
//! connection has one timer of its own instead, which sleeps while requests
//! are in flight.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::Version;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::limits::Limits;

/// After shutdown, how long a connection whose requests have all finished may
/// take to write out its last response before it is closed.
const LINGER: Duration = Duration::from_millis(500);

/// What a connection is doing, shared by its socket, its requests and its timer.
pub(super) struct Activity {
    opened: Instant,
    /// Requests whose response has not been written out yet.
    in_flight: AtomicU32,
    /// Whether any request has arrived on this connection.
    served: AtomicBool,
    /// Whether it speaks HTTP/2 (then bytes between requests are pings and
    /// window updates, not a request head).
    h2: AtomicBool,
    /// Milliseconds after `opened` when the last request finished.
    idle_since: AtomicU64,
    /// Milliseconds after `opened` of the first byte read since then, or `NONE`.
    head_started: AtomicU64,
    /// Told when the last request in flight finishes.
    idle: Notify,
}

const NONE: u64 = u64::MAX;

impl Activity {
    pub(super) fn new() -> Self {
        Self {
            opened: Instant::now(),
            in_flight: AtomicU32::new(0),
            served: AtomicBool::new(false),
            h2: AtomicBool::new(false),
            idle_since: AtomicU64::new(0),
            head_started: AtomicU64::new(NONE),
            idle: Notify::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(NONE - 1)
    }

    fn busy(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
    }

    pub(super) fn on_read(&self) {
        if !self.busy() && self.head_started.load(Ordering::Relaxed) == NONE {
            self.head_started.store(self.now_ms(), Ordering::Relaxed);
        }
    }

    pub(super) fn begin(self: &Arc<Self>, version: Version) -> Guard {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        if !self.served.load(Ordering::Relaxed) {
            self.served.store(true, Ordering::Relaxed);
            if version == Version::HTTP_2 {
                self.h2.store(true, Ordering::Relaxed);
            }
        }
        Guard(self.clone())
    }

    fn end(&self) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle_since.store(self.now_ms(), Ordering::Relaxed);
            self.head_started.store(NONE, Ordering::Relaxed);
            self.idle.notify_one();
        }
    }

    /// When the connection is to be closed if nothing happens before, or
    /// `None` while a request is in flight.
    fn deadline(&self, limits: Limits) -> Option<Instant> {
        if self.busy() {
            return None;
        }
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(NONE / 2);
        let (since, limit) = if !self.served.load(Ordering::Relaxed) {
            (0, limits.header_timeout)
        } else {
            let head = self.head_started.load(Ordering::Relaxed);
            if head != NONE && !self.h2.load(Ordering::Relaxed) {
                (head, limits.header_timeout)
            } else {
                (self.idle_since.load(Ordering::Relaxed), limits.idle_timeout)
            }
        };
        Some(self.opened + Duration::from_millis(since.saturating_add(ms(limit))))
    }

    /// Resolves when the header or the idle timeout has passed.
    pub(super) async fn expired(&self, limits: Limits) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            match self.deadline(limits) {
                Some(at) if at <= Instant::now() => return,
                // A request head may start while this sleeps, unnoticed (a
                // read does not wake the timer, to cost nothing per
                // request): look again within a header timeout.
                Some(at) => {
                    tokio::time::sleep_until(at.min(Instant::now() + limits.header_timeout)).await;
                }
                None => idle.await,
            }
        }
    }

    /// Resolves at once when no request is in flight, else a moment after the
    /// last one has finished.
    pub(super) async fn drained(&self) {
        if !self.busy() {
            return;
        }
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if !self.busy() {
                break;
            }
            idle.await;
        }
        tokio::time::sleep(LINGER).await;
    }
}

/// One request in flight, until its response body is dropped.
pub(super) struct Guard(Arc<Activity>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            header_timeout: Duration::from_millis(100),
            idle_timeout: Duration::from_millis(1000),
            max_connections: 1,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_connection_has_the_header_timeout() {
        let activity = Arc::new(Activity::new());
        let opened = activity.opened;
        assert_eq!(
            activity.deadline(limits()),
            Some(opened + Duration::from_millis(100))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_timeout_runs_while_a_request_is_in_flight_then_the_idle_one() {
        let activity = Arc::new(Activity::new());
        let guard = activity.begin(Version::HTTP_11);
        assert_eq!(activity.deadline(limits()), None);
        tokio::time::advance(Duration::from_millis(500)).await;
        drop(guard);
        assert_eq!(
            activity.deadline(limits()),
            Some(activity.opened + Duration::from_millis(1500))
        );
        // The first byte of the next request head starts the header timeout.
        tokio::time::advance(Duration::from_millis(200)).await;
        activity.on_read();
        assert_eq!(
            activity.deadline(limits()),
            Some(activity.opened + Duration::from_millis(800))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_between_http2_requests_do_not_start_a_header_timeout() {
        let activity = Arc::new(Activity::new());
        drop(activity.begin(Version::HTTP_2));
        activity.on_read();
        assert_eq!(
            activity.deadline(limits()),
            Some(activity.opened + Duration::from_millis(1000))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn expired_resolves_after_the_idle_timeout_not_before() {
        let activity = Arc::new(Activity::new());
        drop(activity.begin(Version::HTTP_11));
        let expired = activity.expired(limits());
        tokio::pin!(expired);
        assert!(
            tokio::time::timeout(Duration::from_millis(990), expired.as_mut())
                .await
                .is_err()
        );
        tokio::time::timeout(Duration::from_millis(20), expired)
            .await
            .expect("closed after the idle timeout");
    }
}
