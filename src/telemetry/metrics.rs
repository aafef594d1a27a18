//! Prometheus metrics: the recorder and every metric's help text, and the
//! counters of requests, acquisitions, waiters, expiries and Redis errors,
//! with the handles of the busiest ones looked up once and kept.

use std::collections::HashMap;
use std::sync::{LazyLock, OnceLock, RwLock};
use std::time::Duration;

use axum::http::{Method, StatusCode};
use metrics::{Counter, Histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::domain::Kind;

/// Kinds of Redis errors, as the `kind` label of `baton_redis_errors_total`.
const REDIS_ERROR_KINDS: [&str; 6] = ["timeout", "connection", "auth", "server", "script", "other"];

fn redis_error_counter(kind: &'static str) -> Counter {
    metrics::counter!("baton_redis_errors_total", "kind" => kind)
}

/// Counts a failed Redis call; `kind` is one of `REDIS_ERROR_KINDS`.
pub fn record_redis_error(kind: &'static str) {
    redis_error_counter(kind).increment(1);
}

/// Leases that ended by expiry, noticed by a script: `kind` is `lock` or `semaphore`.
pub fn record_expired(kind: &'static str, leases: u64) {
    metrics::counter!("baton_leases_expired_total", "kind" => kind).increment(leases);
}

/// A request joined (`+1`) or left (`-1`) the waiting line of `kind`
/// (`lock` or `semaphore`) on this instance.
pub fn record_waiting(kind: &'static str, change: f64) {
    metrics::gauge!("baton_waiters", "kind" => kind).increment(change);
}

/// An event stream (`GET /events`, or a holder's stream) opened (`+1`) or
/// closed (`-1`) on this instance.
pub fn record_event_stream(change: f64) {
    metrics::gauge!("baton_event_streams").increment(change);
}

/// The token file was read again: `ok` (the new set is in force) or not
/// (the old set stays).
pub fn record_tokens_reload(ok: bool) {
    let result = if ok { "ok" } else { "error" };
    metrics::counter!("baton_tokens_reloads_total", "result" => result).increment(1);
}

/// A set of `count` tokens was put in force now.
pub fn record_tokens_loaded(count: usize) {
    metrics::gauge!("baton_tokens").set(count as f64);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    metrics::gauge!("baton_tokens_loaded_timestamp_seconds").set(now.as_secs_f64());
}

/// An acquisition answered 503 because too few replicas had it in time.
pub fn record_replica_wait_failure() {
    metrics::counter!("baton_replica_wait_failures_total").increment(1);
}

static METRICS: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process-wide metrics recorder once (several services in one
/// test process share it), with the help text of every metric.
pub fn init_metrics() {
    METRICS.get_or_init(|| {
        let seconds = [
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            30.0, 60.0, 300.0,
        ];
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &seconds)
            .and_then(PrometheusBuilder::install_recorder)
            .map_err(|err| tracing::warn!(%err, "metrics are off"))
            .ok();
        describe_metrics();
        handle
    });
}

/// HELP text for every metric, and the series that exist from the start.
fn describe_metrics() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_gauge!(
        "baton_build_info",
        "Always 1; the labels say which baton this is"
    );
    metrics::gauge!(
        "baton_build_info",
        "version" => env!("CARGO_PKG_VERSION"),
        "revision" => env!("BATON_GIT_REVISION")
    )
    .set(1.0);
    describe_counter!(
        "baton_http_requests_total",
        "HTTP requests answered, by method, route template and status"
    );
    describe_histogram!(
        "baton_http_request_duration_seconds",
        Unit::Seconds,
        "Time to answer an HTTP request, not counting time spent waiting in line for a lock or semaphore"
    );
    describe_counter!(
        "baton_acquisitions_total",
        "Acquisitions by kind (lock, semaphore) and outcome (acquired, busy)"
    );
    describe_counter!(
        "baton_contention_total",
        "Acquisition attempts that found the lock or semaphore busy, by kind"
    );
    describe_histogram!(
        "baton_acquire_wait_seconds",
        Unit::Seconds,
        "Time from an acquisition request to its outcome, waiting included, by kind and outcome"
    );
    describe_gauge!(
        "baton_waiters",
        "Requests waiting in line on this instance, by kind (lock, semaphore)"
    );
    describe_gauge!(
        "baton_event_streams",
        "Event streams open on this instance: GET /events and holders' streams (GET /{kind}s/{name}/{id}/events)"
    );
    metrics::gauge!("baton_event_streams").increment(0.0);
    describe_counter!(
        "baton_leases_expired_total",
        "Leases that ended by expiry rather than release, by kind"
    );
    describe_counter!(
        "baton_redis_errors_total",
        "Failed Redis calls by kind (timeout, connection, auth, server, script, other)"
    );
    describe_counter!(
        "baton_replica_wait_failures_total",
        "Acquisitions answered 503 because fewer than BATON_REDIS_WAIT_REPLICAS replicas had them in time"
    );
    metrics::counter!("baton_replica_wait_failures_total").absolute(0);
    describe_counter!(
        "baton_tokens_reloads_total",
        "Reads of the token file after start (SIGHUP or a change), by result: ok (the new set is in force) or error (the old set stays)"
    );
    for result in ["ok", "error"] {
        metrics::counter!("baton_tokens_reloads_total", "result" => result).absolute(0);
    }
    describe_gauge!(
        "baton_tokens_loaded_timestamp_seconds",
        Unit::Seconds,
        "When the set of tokens in force was last read (at start or by a reload), in seconds since the Unix epoch"
    );
    describe_gauge!(
        "baton_tokens",
        "Tokens in force: BATON_API_TOKENS, BATON_ADMIN_TOKENS and the token file's entries"
    );
    for kind in REDIS_ERROR_KINDS {
        redis_error_counter(kind).absolute(0);
    }
    for kind in ["lock", "semaphore"] {
        metrics::counter!("baton_leases_expired_total", "kind" => kind).absolute(0);
        metrics::gauge!("baton_waiters", "kind" => kind).increment(0.0);
    }
}

/// The metrics in Prometheus text format.
pub fn render_metrics() -> String {
    METRICS
        .get()
        .and_then(Option::as_ref)
        .map(PrometheusHandle::render)
        .unwrap_or_default()
}

/// Metric handles of one (route, method, status), looked up once and reused:
/// the registry lookup and the label strings would otherwise cost every request.
type RequestHandles = (Counter, Histogram);

/// Route template -> (method, status) -> handles.
type RequestHandleMap = HashMap<String, HashMap<(&'static str, u16), RequestHandles>>;

static REQUEST_HANDLES: LazyLock<RwLock<RequestHandleMap>> = LazyLock::new(Default::default);

/// Methods as a bounded set of label values: a client cannot grow the series.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::PUT => "PUT",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Counts a request by route template, method and status, with its duration.
pub fn record_request(method: &Method, route: &str, status: StatusCode, elapsed: Duration) {
    let key = (method_label(method), status.as_u16());
    let seconds = elapsed.as_secs_f64();
    let cached = REQUEST_HANDLES
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(route)
        .and_then(|by_key| by_key.get(&key))
        .map(|(counter, histogram)| {
            counter.increment(1);
            histogram.record(seconds);
        });
    if cached.is_some() {
        return;
    }
    let counter = metrics::counter!("baton_http_requests_total",
        "method" => key.0, "route" => route.to_owned(), "status" => key.1.to_string());
    let histogram = metrics::histogram!("baton_http_request_duration_seconds",
        "method" => key.0, "route" => route.to_owned());
    counter.increment(1);
    histogram.record(seconds);
    REQUEST_HANDLES
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .entry(route.to_owned())
        .or_default()
        .insert(key, (counter, histogram));
}

/// Metric handles of the acquisitions of one kind (lock or semaphore).
struct AcquisitionHandles {
    acquired: Counter,
    busy: Counter,
    contention: Counter,
    wait_acquired: Histogram,
    wait_busy: Histogram,
}

impl AcquisitionHandles {
    fn new(kind: &'static str) -> Self {
        Self {
            acquired: metrics::counter!("baton_acquisitions_total", "kind" => kind, "outcome" => "acquired"),
            busy: metrics::counter!("baton_acquisitions_total", "kind" => kind, "outcome" => "busy"),
            contention: metrics::counter!("baton_contention_total", "kind" => kind),
            wait_acquired: metrics::histogram!("baton_acquire_wait_seconds", "kind" => kind, "outcome" => "acquired"),
            wait_busy: metrics::histogram!("baton_acquire_wait_seconds", "kind" => kind, "outcome" => "busy"),
        }
    }
}

static LOCK_ACQUISITIONS: LazyLock<AcquisitionHandles> =
    LazyLock::new(|| AcquisitionHandles::new(Kind::Lock.as_str()));
static SEMAPHORE_ACQUISITIONS: LazyLock<AcquisitionHandles> =
    LazyLock::new(|| AcquisitionHandles::new(Kind::Semaphore.as_str()));

/// What an acquisition of a lock or semaphore came to: its outcome, how many
/// of its `attempts` found it busy (contention), and the time until the outcome.
pub fn record_acquisition(kind: Kind, acquired: bool, attempts: u32, elapsed: Duration) {
    let handles = match kind {
        Kind::Lock => &LOCK_ACQUISITIONS,
        Kind::Semaphore => &SEMAPHORE_ACQUISITIONS,
    };
    let busy_attempts = attempts.saturating_sub(u32::from(acquired));
    if busy_attempts > 0 {
        handles.contention.increment(u64::from(busy_attempts));
    }
    let seconds = elapsed.as_secs_f64();
    if acquired {
        handles.acquired.increment(1);
        handles.wait_acquired.record(seconds);
    } else {
        handles.busy.increment(1);
        handles.wait_busy.record(seconds);
    }
}
