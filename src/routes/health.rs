//! `/healthz`, `/readyz`, `/metrics`, `/with-lock`, `/baton` and
//! `/baton.sha256`: open to everyone, for orchestrators, Prometheus and CI jobs.

use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use tokio::sync::OnceCell;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::problem::responses::RedisUnavailable;
use super::{AppError, AppState, Json};
use crate::wire::{Health, Problem, ProblemType};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .routes(routes!(with_lock))
        .routes(routes!(binary))
        .routes(routes!(binary_sha256))
}

/// The `scripts/with-lock` launcher of this version, built into the binary.
pub const WITH_LOCK: &str = include_str!("../../scripts/with-lock");

/// Liveness
///
/// 200 while the process runs, whether or not Redis answers.
#[utoipa::path(get, path = "/healthz",
    responses((status = 200, description = "The process runs", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        warning: None,
    })
}

/// Readiness
///
/// 200 when Redis answers a PING, 503 otherwise.
#[utoipa::path(get, path = "/readyz",
    responses(
        (status = 200, description = "Redis answers", body = Health),
        (status = 503, response = RedisUnavailable),
    ))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, AppError> {
    state.engine.ping().await?;
    Ok(Json(Health {
        status: "ready".into(),
        warning: state.engine.eviction_warning(),
    }))
}

/// Metrics
///
/// Prometheus text format: requests by route and status, acquisitions by kind
/// and outcome, contention, wait times, and the number of waiting requests.
#[utoipa::path(get, path = "/metrics",
    responses((status = 200, description = "Prometheus text exposition", body = String, content_type = "text/plain")))]
pub async fn metrics() -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::telemetry::render_metrics(),
    )
}

/// The with-lock launcher
///
/// `scripts/with-lock` of this very version: a POSIX sh launcher that fetches
/// `GET /baton` (cached, checked against `GET /baton.sha256`) and runs
/// `baton run` with its arguments: a command run while holding a lock or a
/// semaphore slot. A CI job fetches it with
/// `curl -fsS $BATON_URL/with-lock -o with-lock` instead of vendoring it.
#[utoipa::path(get, path = "/with-lock", tag = "service",
    responses((status = 200, description = "The script", body = String, content_type = "text/x-shellscript")))]
pub async fn with_lock() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/x-shellscript; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"with-lock\"",
            ),
        ],
        WITH_LOCK,
    )
}

/// The running binary: what `GET /baton` serves.
fn own_binary() -> std::io::Result<std::path::PathBuf> {
    std::env::current_exe()
}

/// The SHA-256 of the running binary, hex, computed once (`Err`: why not).
async fn own_sha256() -> &'static Result<String, String> {
    static SUM: OnceCell<Result<String, String>> = OnceCell::const_new();
    SUM.get_or_init(|| async {
        tokio::task::spawn_blocking(|| {
            use sha2::{Digest, Sha256};
            use std::io::Read;
            let mut file = std::fs::File::open(own_binary()?)?;
            let mut hasher = Sha256::new();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = file.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
            }
            let digest = hasher.finalize();
            Ok::<_, std::io::Error>(digest.iter().map(|b| format!("{b:02x}")).collect())
        })
        .await
        .map_err(|err| err.to_string())
        .and_then(|sum| sum.map_err(|err| err.to_string()))
    })
    .await
}

/// 500, logged with its cause; the answer does not say where the binary is.
fn cannot_serve_binary(cause: &str) -> Response {
    tracing::error!("cannot serve the baton binary: {cause}");
    AppError::from(Problem::new(
        ProblemType::InternalError,
        "the service cannot read its own binary".into(),
    ))
    .into_response()
}

/// The bytes of an executable, as OpenAPI describes a file.
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct Executable(pub Vec<u8>);

/// The baton binary
///
/// The binary that serves this request (Linux x86-64): the service is also
/// its own client (`baton run`, `baton acquire`, ...), so a CI job needs only
/// curl: `curl -fsS $BATON_URL/baton -o baton`, checked against
/// `GET /baton.sha256`.
#[utoipa::path(get, path = "/baton", tag = "service",
    responses((status = 200, description = "The executable", body = Executable, content_type = "application/octet-stream")))]
pub async fn binary() -> Response {
    let file = match own_binary() {
        Ok(path) => tokio::fs::File::open(path).await,
        Err(err) => Err(err),
    };
    let file = match file {
        Ok(file) => file,
        Err(err) => return cannot_serve_binary(&err.to_string()),
    };
    let length = file.metadata().await.map(|m| m.len()).ok();
    let mut response = (
        [
            (header::CONTENT_TYPE, "application/octet-stream"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"baton\"",
            ),
        ],
        Body::from_stream(tokio_util::io::ReaderStream::new(file)),
    )
        .into_response();
    if let Some(length) = length {
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, length.into());
    }
    response
}

/// The binary's checksum
///
/// The SHA-256 of `GET /baton`, as hex followed by two spaces and `baton`
/// (the line `sha256sum -c` reads).
#[utoipa::path(get, path = "/baton.sha256", tag = "service",
    responses((status = 200, description = "`<hex>  baton`", body = String, content_type = "text/plain")))]
pub async fn binary_sha256() -> Response {
    match own_sha256().await {
        Ok(sum) => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{sum}  baton\n"),
        )
            .into_response(),
        Err(err) => cannot_serve_binary(err),
    }
}
