//! Redis outages, noticed once: the first failed call that means Redis
//! cannot be reached logs one line, the first answer after it another, and
//! the calls between log nothing. Every failed call is counted by kind.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use super::metrics::record_redis_error;

/// Whether Redis is known to be unreachable now, and since when.
static REDIS_DOWN: AtomicBool = AtomicBool::new(false);
static REDIS_DOWN_SINCE: Mutex<Option<Instant>> = Mutex::new(None);

/// Redis answered: ends an outage, with one line.
pub fn redis_answered() {
    if REDIS_DOWN.load(Ordering::Relaxed) && REDIS_DOWN.swap(false, Ordering::AcqRel) {
        let since = REDIS_DOWN_SINCE
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let down_for_ms = since.map_or(0, |t| t.elapsed().as_millis() as u64);
        tracing::info!(down_for_ms, "Redis answers again");
    }
}

/// A Redis call failed: counts it by kind, and starts an outage (one line)
/// when the failure means Redis cannot be reached.
pub fn redis_failed(err: &redis::RedisError) {
    let kind = redis_error_kind(err);
    record_redis_error(kind);
    if kind != "script" {
        redis_unreachable(&err.to_string());
    }
}

/// A Redis call got no answer within its time limit.
pub fn redis_timed_out() {
    record_redis_error("timeout");
    redis_unreachable("no answer in time");
}

/// Starts an outage, once: later failures during it log nothing.
pub fn redis_unreachable(reason: &str) {
    if !REDIS_DOWN.swap(true, Ordering::AcqRel) {
        *REDIS_DOWN_SINCE.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        tracing::warn!(
            reason,
            "Redis is unreachable; calls answer 503 until it is back"
        );
    }
}

/// The `kind` label of a Redis error.
fn redis_error_kind(err: &redis::RedisError) -> &'static str {
    use redis::ErrorKind;
    if err.is_timeout() {
        "timeout"
    } else if err.is_connection_refusal() || err.is_connection_dropped() || err.is_io_error() {
        "connection"
    } else {
        match err.kind() {
            ErrorKind::AuthenticationFailed => "auth",
            ErrorKind::Server(redis::ServerErrorKind::ResponseError)
            | ErrorKind::Server(redis::ServerErrorKind::NoScript)
            | ErrorKind::Parse
            | ErrorKind::UnexpectedReturnType => "script",
            ErrorKind::Server(_) => "server",
            _ => "other",
        }
    }
}
