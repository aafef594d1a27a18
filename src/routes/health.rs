//! `/healthz`, `/readyz`, `/metrics` and `/with-lock`: open to everyone, for
//! orchestrators, Prometheus and CI jobs.

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::problem::responses::RedisUnavailable;
use super::{AppError, AppState, Json};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .routes(routes!(with_lock))
}

/// The `scripts/with-lock` of this version, built into the binary.
pub const WITH_LOCK: &str = include_str!("../../scripts/with-lock");

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"status": "ok"}))]
pub struct Health {
    /// `ok` (the process runs) or `ready` (Redis answers).
    pub status: &'static str,
    /// `/readyz`: set when Redis's `maxmemory-policy` could evict baton's keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// Liveness
///
/// 200 while the process runs, whether or not Redis answers.
#[utoipa::path(get, path = "/healthz",
    responses((status = 200, description = "The process runs", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok",
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
        status: "ready",
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

/// The with-lock script
///
/// `scripts/with-lock` of this very version: a bash script that runs a command
/// while holding a lock or a semaphore slot. A CI job fetches it with
/// `curl -fsS $BATON/with-lock -o with-lock` instead of vendoring it.
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
