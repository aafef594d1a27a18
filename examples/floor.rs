//! The floors baton is measured against: the thinnest HTTP lock service on
//! baton's own stack, in two variants. scripts/bench.sh runs both beside baton.
//!
//! ```text
//! cargo run --release --example floor -- memory [--listen 127.0.0.1:8080]
//! cargo run --release --example floor -- redis [--listen 127.0.0.1:8080] [--redis redis://127.0.0.1:6379]
//! ```
//!
//! A **fixed baseline**: it does not change when baton changes, only when the
//! stack under both moves (it is built from this crate, so it always runs on
//! the crate versions of baton's Cargo.lock). Leave it as it is; a floor that
//! follows baton measures nothing.
//!
//! Both serve what the uncontended lock cycle of `examples/loadgen.rs` needs,
//! over HTTP/1.1 through `axum::serve` (hyper-util's auto builder, as baton's
//! accept loop uses), `TCP_NODELAY` on, on a tokio runtime of as many workers
//! as baton takes (`BATON_WORKER_THREADS`, else one on a machine of two CPUs
//! or fewer, else one per CPU):
//!
//! - `POST /locks/{name}`: the body read as JSON whatever its type
//!   (`{"ttl_ms"?}`; other fields ignored, an empty body means defaults), then
//!   201 with a lease body of baton's shape (`name`, `id`, `fencing_token`,
//!   `ttl_ms`, `expires_at`) and `Location: /locks/{name}/{id}`; 409 at once
//!   while the lock is held (there is no waiting line: `wait_ms` is ignored).
//! - `DELETE /locks/{name}/{id}`: 204, or 404 when the id does not hold it.
//! - `GET /readyz`: 200 (the Redis variant PINGs first).
//!
//! `memory` (the HTTP floor) keeps the locks in a map in this process.
//! `redis` (the thinnest Redis-backed lock service) runs the classic recipe
//! through redis-rs on one multiplexed connection: `SET key id NX PX ttl` to
//! acquire, the compare-and-delete script (EVALSHA) to release; keys are
//! `BATON_KEY_PREFIX` (default `floor:`) + the name.
//!
//! Nothing else is in them: no logs, no metrics, no middleware, no request
//! ids, no deadline. The body has baton's shape, not its guarantees: the
//! fencing token is a counter of this process and `expires_at` is this
//! machine's clock (the classic recipe has neither).
//!
//! Settings: `--listen` or `BATON_LISTEN` (default 127.0.0.1:8080), `--redis`
//! or `BATON_REDIS_URL` (default redis://127.0.0.1:6379). Stops on SIGTERM or
//! Ctrl-C.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

const USAGE: &str = "usage: floor memory|redis [--listen ADDR] [--redis URL]";
const DEFAULT_TTL_MS: u64 = 30_000;
const MAX_TTL_MS: u64 = 86_400_000;

/// The characters left as they are in a path segment: RFC 3986 unreserved.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The classic recipe's release: delete the key only while it holds our id.
static UNLOCK: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end",
    )
});

/// Where the locks are.
enum Store {
    /// Name -> (lease id, expiry).
    Memory(Mutex<HashMap<String, (Uuid, Instant)>>),
    Redis {
        conn: redis::aio::MultiplexedConnection,
        prefix: String,
    },
}

struct Floor {
    store: Store,
    /// The fencing token of the next lease (not a real fence: see the header).
    next_token: AtomicU64,
}

#[derive(Deserialize, Default)]
struct AcquireBody {
    ttl_ms: Option<u64>,
}

#[derive(Serialize)]
struct LeaseBody {
    name: String,
    id: String,
    fencing_token: u64,
    ttl_ms: u64,
    expires_at: String,
}

fn problem(status: StatusCode, slug: &str) -> Response {
    let body = format!(
        r#"{{"type":"https://baton.example/problems/{slug}","title":"{slug}","status":{}}}"#,
        status.as_u16()
    );
    (
        status,
        [(header::CONTENT_TYPE, "application/problem+json")],
        body,
    )
        .into_response()
}

async fn acquire(
    State(floor): State<Arc<Floor>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let body: AcquireBody = if body.is_empty() {
        AcquireBody::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(body) => body,
            Err(_) => return problem(StatusCode::BAD_REQUEST, "invalid-request"),
        }
    };
    let ttl_ms = body.ttl_ms.unwrap_or(DEFAULT_TTL_MS);
    if !(1..=MAX_TTL_MS).contains(&ttl_ms) || name.is_empty() {
        return problem(StatusCode::BAD_REQUEST, "invalid-request");
    }
    let id = Uuid::new_v4();
    let granted = match &floor.store {
        Store::Memory(map) => {
            let now = Instant::now();
            let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
            match map.get(&name) {
                Some((_, expiry)) if *expiry > now => false,
                _ => {
                    map.insert(name.clone(), (id, now + Duration::from_millis(ttl_ms)));
                    true
                }
            }
        }
        Store::Redis { conn, prefix } => {
            let set = redis::cmd("SET")
                .arg(format!("{prefix}{name}"))
                .arg(id.to_string())
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms)
                .query_async::<Option<String>>(&mut conn.clone())
                .await;
            match set {
                Ok(reply) => reply.is_some(),
                Err(_) => return problem(StatusCode::SERVICE_UNAVAILABLE, "redis-unavailable"),
            }
        }
    };
    if !granted {
        return problem(StatusCode::CONFLICT, "lock-held");
    }
    let expires = SystemTime::now() + Duration::from_millis(ttl_ms);
    let location = format!("/locks/{}/{id}", utf8_percent_encode(&name, PATH_SEGMENT));
    let lease = LeaseBody {
        name,
        id: id.to_string(),
        fencing_token: floor.next_token.fetch_add(1, Ordering::Relaxed),
        ttl_ms,
        expires_at: humantime::format_rfc3339_millis(expires).to_string(),
    };
    (
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(lease),
    )
        .into_response()
}

async fn release(
    State(floor): State<Arc<Floor>>,
    Path((name, id)): Path<(String, String)>,
) -> Response {
    let Ok(id) = Uuid::parse_str(&id) else {
        return problem(StatusCode::BAD_REQUEST, "invalid-request");
    };
    let released = match &floor.store {
        Store::Memory(map) => {
            let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
            match map.get(&name) {
                Some((held, expiry)) if *held == id && *expiry > Instant::now() => {
                    map.remove(&name);
                    true
                }
                _ => false,
            }
        }
        Store::Redis { conn, prefix } => {
            let deleted = UNLOCK
                .key(format!("{prefix}{name}"))
                .arg(id.to_string())
                .invoke_async::<i64>(&mut conn.clone())
                .await;
            match deleted {
                Ok(n) => n == 1,
                Err(_) => return problem(StatusCode::SERVICE_UNAVAILABLE, "redis-unavailable"),
            }
        }
    };
    if released {
        StatusCode::NO_CONTENT.into_response()
    } else {
        problem(StatusCode::NOT_FOUND, "lease-not-found")
    }
}

async fn ready(State(floor): State<Arc<Floor>>) -> StatusCode {
    match &floor.store {
        Store::Memory(_) => StatusCode::OK,
        Store::Redis { conn, .. } => match redis::cmd("PING")
            .query_async::<String>(&mut conn.clone())
            .await
        {
            Ok(_) => StatusCode::OK,
            Err(_) => StatusCode::SERVICE_UNAVAILABLE,
        },
    }
}

/// `--name value`, else the environment variable, else the default.
fn setting(args: &[String], flag: &str, env: &str, default: &str) -> Result<String, String> {
    match args.iter().position(|a| a == flag) {
        Some(i) => args
            .get(i + 1)
            .cloned()
            .ok_or_else(|| format!("{flag} needs a value")),
        None => Ok(std::env::var(env).unwrap_or_else(|_| default.to_owned())),
    }
}

/// As baton: `BATON_WORKER_THREADS`, else one worker on two CPUs or fewer.
fn worker_threads() -> usize {
    if let Some(n) = std::env::var("BATON_WORKER_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return n;
    }
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    if cpus <= 2 {
        1
    } else {
        cpus
    }
}

async fn serve(memory: bool, listen: SocketAddr, redis_url: String) -> Result<(), String> {
    let store = if memory {
        Store::Memory(Mutex::default())
    } else {
        let client = redis::Client::open(redis_url.as_str()).map_err(|e| e.to_string())?;
        let config =
            redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(1)));
        let conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| format!("{redis_url}: {e}"))?;
        Store::Redis {
            conn,
            prefix: std::env::var("BATON_KEY_PREFIX").unwrap_or_else(|_| "floor:".into()),
        }
    };
    let floor = Arc::new(Floor {
        store,
        next_token: AtomicU64::new(1),
    });
    let app = Router::new()
        .route("/locks/{name}", post(acquire))
        .route("/locks/{name}/{id}", delete(release))
        .route("/readyz", get(ready))
        .with_state(floor);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("{listen}: {e}"))?
        .tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                Some(()) = async { term.as_mut()?.recv().await } => {}
            }
        })
        .await
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let memory = match args.first().map(String::as_str) {
        Some("memory") => true,
        Some("redis") => false,
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let settings = setting(&args, "--listen", "BATON_LISTEN", "127.0.0.1:8080").and_then(|l| {
        let listen = l
            .parse::<SocketAddr>()
            .map_err(|_| format!("listen address must be IP:PORT, not {l:?}"))?;
        let redis = setting(
            &args,
            "--redis",
            "BATON_REDIS_URL",
            "redis://127.0.0.1:6379",
        )?;
        Ok((listen, redis))
    });
    let outcome = settings.and_then(|(listen, redis)| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(worker_threads())
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(serve(memory, listen, redis))
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("floor: {err}");
            ExitCode::FAILURE
        }
    }
}
