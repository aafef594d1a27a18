//! Logs (tracing, filtered by `RUST_LOG`, default `info`, as text or JSON
//! lines), the audit trail, Redis outages noticed once, and Prometheus metrics.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, StatusCode};
use metrics::{Counter, Histogram};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the log subscriber once, writing to stderr; later calls do nothing.
pub fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        // Colours only for a person at a terminal, not in files or CI logs.
        LogFormat::Text => builder
            .with_target(false)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        // One object per line: the event's fields at the top level, the
        // request span's fields (request_id, route, trace_id) under "span".
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
}

/// One audit line at `info` (target `baton::audit`) for a change to a lease:
/// `event` is `acquired`, `released`, `refreshed`, `expired` or
/// `force-released`; `kind` is `lock` or `semaphore`. Inside a request it
/// carries the request span (`request_id`). Never given a lease id or a token.
pub fn audit(
    event: &'static str,
    kind: &'static str,
    name: &str,
    owner: Option<&str>,
    fencing_token: Option<u64>,
) {
    tracing::info!(
        target: "baton::audit",
        event,
        kind,
        name,
        owner,
        fencing_token,
        "audit"
    );
}

/// The span of one HTTP request: method, route template (recorded once
/// routed), the request id, and the W3C trace id when the client sent a
/// `traceparent`. Never the path: paths carry lease ids.
pub fn request_span(method: &Method, headers: &HeaderMap) -> tracing::Span {
    let request_id = headers
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    span(method, request_id, trace_id_in(headers))
}

fn span(method: &Method, request_id: &str, trace_id: Option<&str>) -> tracing::Span {
    tracing::info_span!(
        "request",
        %method,
        route = tracing::field::Empty,
        request_id,
        trace_id,
    )
}

fn trace_id_in(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(trace_id_of)
}

/// What a request's span and metrics show, kept so that the span can be
/// made again: a request parked in line keeps this, not its live span (whose
/// formatted fields cost a few hundred bytes), logs inside a copy of it, and
/// is counted with it once answered.
#[derive(Debug, Clone)]
pub struct RequestContext {
    method: Method,
    route: Option<axum::extract::MatchedPath>,
    request_id: Box<str>,
    trace_id: Option<Box<str>>,
    /// When its handler started.
    started: Instant,
}

impl RequestContext {
    /// The context of the request with this head (after the request id was set).
    pub fn of(parts: &axum::http::request::Parts) -> Self {
        let request_id = parts
            .headers
            .get(REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        Self {
            method: parts.method.clone(),
            route: parts.extensions.get().cloned(),
            request_id: request_id.into(),
            trace_id: trace_id_in(&parts.headers).map(Into::into),
            started: Instant::now(),
        }
    }

    /// The request's id, as its span shows it.
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// How long its handler has run.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Counts the request, answered `status` after `working` of its own time.
    pub fn record(&self, status: StatusCode, working: Duration) {
        let route = self
            .route
            .as_ref()
            .map_or("unmatched", axum::extract::MatchedPath::as_str);
        record_request(&self.method, route, status, working);
    }

    /// A span like the request's own, route included.
    pub fn span(&self) -> tracing::Span {
        let span = span(&self.method, &self.request_id, self.trace_id.as_deref());
        if let Some(route) = &self.route {
            span.record("route", route.as_str());
        }
        span
    }
}

/// Logs a request answered with a server error, once, inside its span.
pub fn request_failed(answer: impl std::fmt::Display, latency: std::time::Duration) {
    tracing::warn!(
        answer = %answer,
        latency_ms = latency.as_millis() as u64,
        "request failed"
    );
}

/// The request-id header, echoed in every response.
pub const REQUEST_ID: &str = "x-request-id";

/// Whether a client's `X-Request-Id` is used as it is: at most 128 visible
/// ASCII characters; anything else is replaced by a fresh id.
pub fn acceptable_request_id(value: &axum::http::HeaderValue) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty() && bytes.len() <= 128 && bytes.iter().all(|b| b.is_ascii_graphic())
}

/// The trace id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), if
/// well formed and not all zeros.
pub fn trace_id_of(traceparent: &str) -> Option<&str> {
    let mut parts = traceparent.trim().split('-');
    let (version, trace_id, parent_id, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let valid = hex(version, 2)
        && version != "ff"
        && hex(trace_id, 32)
        && hex(parent_id, 16)
        && hex(flags, 2)
        && trace_id.bytes().any(|b| b != b'0')
        && (version != "00" || parts.next().is_none());
    valid.then_some(trace_id)
}

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
    redis_error_counter(kind).increment(1);
    if kind != "script" {
        redis_unreachable(&err.to_string());
    }
}

/// A Redis call got no answer within its time limit.
pub fn redis_timed_out() {
    redis_error_counter("timeout").increment(1);
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

/// Kinds of Redis errors, as the `kind` label of `baton_redis_errors_total`.
const REDIS_ERROR_KINDS: [&str; 6] = ["timeout", "connection", "auth", "server", "script", "other"];

fn redis_error_counter(kind: &'static str) -> Counter {
    metrics::counter!("baton_redis_errors_total", "kind" => kind)
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
        "GET /events streams open on this instance"
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

/// What an acquisition was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquired {
    Lock,
    Semaphore,
}

static LOCK_ACQUISITIONS: LazyLock<AcquisitionHandles> =
    LazyLock::new(|| AcquisitionHandles::new("lock"));
static SEMAPHORE_ACQUISITIONS: LazyLock<AcquisitionHandles> =
    LazyLock::new(|| AcquisitionHandles::new("semaphore"));

/// What an acquisition of a lock or semaphore came to: its outcome, how many
/// of its `attempts` found it busy (contention), and the time until the outcome.
pub fn record_acquisition(kind: Acquired, acquired: bool, attempts: u32, elapsed: Duration) {
    let handles = match kind {
        Acquired::Lock => &LOCK_ACQUISITIONS,
        Acquired::Semaphore => &SEMAPHORE_ACQUISITIONS,
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
