//! `/healthz`, `/readyz` and `/metrics`: open to everyone, for orchestrators
//! and Prometheus.

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::problems::Unavailable;
use super::{AppState, Json};
use crate::error::AppError;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"status": "ok"}))]
pub struct Health {
    /// `ok` (the process runs) or `ready` (Redis answers).
    pub status: &'static str,
}

/// Liveness
///
/// 200 while the process runs, whether or not Redis answers.
#[utoipa::path(get, path = "/healthz", tag = "service",
    responses((status = 200, description = "The process runs", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// Readiness
///
/// 200 when Redis answers a PING, 503 otherwise.
#[utoipa::path(get, path = "/readyz", tag = "service",
    responses(
        (status = 200, description = "Redis answers", body = Health),
        (status = 503, response = Unavailable),
    ))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, AppError> {
    state.store.ping().await?;
    Ok(Json(Health { status: "ready" }))
}

/// Metrics
///
/// Prometheus text format: requests by route and status, acquisitions by kind
/// and outcome, contention, wait times, and the number of waiting requests.
#[utoipa::path(get, path = "/metrics", tag = "service",
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
