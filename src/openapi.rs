//! The OpenAPI document, generated from the handlers (utoipa), and Swagger UI
//! at `/docs`, served from the copy embedded in the binary: the page loads
//! nothing from any other host.

use std::sync::{Arc, LazyLock};

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::OpenApi as Document;
use utoipa::{Modify, OpenApi};
use utoipa_swagger_ui::Config;

use crate::error::Problem;
use crate::routes::problems;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "baton",
        description = "Distributed locks and fair counting semaphores over HTTP, with all state in Redis.\n\n\
            Acquire with `POST`, keep the lease alive with `PATCH`, release with `DELETE`. \
            Every error is `application/problem+json` (RFC 9457). Durations are integers in milliseconds.",
        license(name = "MIT OR Apache-2.0")
    ),
    tags(
        (name = "locks", description = "At most one holder per name, with fencing tokens"),
        (name = "semaphores", description = "At most `limit` holders per name, first come, first served"),
        (name = "service", description = "Health, readiness and metrics"),
    ),
    components(
        schemas(Problem),
        responses(
            problems::InvalidRequest,
            problems::Unauthorized,
            problems::Forbidden,
            problems::LeaseNotFound,
            problems::LockNotHeld,
            problems::LockHeld,
            problems::SemaphoreFull,
            problems::PayloadTooLarge,
            problems::Unavailable,
        )
    ),
    modifiers(&BearerScheme)
)]
pub struct ApiDoc;

struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, openapi: &mut Document) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "One of BATON_API_TOKENS (or BATON_ADMIN_TOKENS). Not needed when the service has no tokens.",
                    ))
                    .build(),
            ),
        );
    }
}

/// The OpenAPI document of the whole API, as the service serves it.
pub fn document() -> Document {
    crate::startup::api_routes().1
}

/// The document as committed in `openapi/openapi.json`: as served with the
/// default `BATON_MAX_WAIT_MS`.
pub fn document_json() -> String {
    document_json_with_max_wait(crate::config::DEFAULT_MAX_WAIT_MS)
}

/// The document as a service serves it: `wait_ms` bounded by its configured
/// `BATON_MAX_WAIT_MS`.
///
/// # Panics
/// Never: the document always serializes.
pub fn document_json_with_max_wait(max_wait_ms: u64) -> String {
    let mut doc = serde_json::to_value(document()).expect("the OpenAPI document serializes");
    for schema in ["AcquireLock", "AcquireSemaphore"] {
        if let Some(wait) = doc
            .pointer_mut(&format!("/components/schemas/{schema}/properties/wait_ms"))
            .and_then(serde_json::Value::as_object_mut)
        {
            wait.insert("maximum".into(), max_wait_ms.into());
        }
    }
    let mut json = serde_json::to_string_pretty(&doc).expect("the OpenAPI document serializes");
    json.push('\n');
    json
}

static SWAGGER_CONFIG: LazyLock<Arc<Config<'static>>> = LazyLock::new(|| {
    Arc::new(
        Config::new(["/openapi.json"])
            .validator_url("none")
            .try_it_out_enabled(true)
            .persist_authorization(true)
            .display_request_duration(true),
    )
});

/// `GET /docs`: Swagger UI's page, with its assets under `/docs/`.
pub async fn swagger_index() -> Response {
    swagger_file("index.html")
}

/// `GET /docs/{*file}`: Swagger UI's assets.
pub async fn swagger_asset(Path(file): Path<String>) -> Response {
    swagger_file(&file)
}

fn swagger_file(path: &str) -> Response {
    match utoipa_swagger_ui::serve(path, SWAGGER_CONFIG.clone()) {
        Ok(Some(file)) => {
            let mut bytes = file.bytes.into_owned();
            if path == "index.html" && !file.gzpipped {
                // Served at /docs as well as /docs/: resolve the relative asset
                // links against /docs/ either way.
                let html = String::from_utf8_lossy(&bytes).replacen(
                    "<head>",
                    "<head>\n    <base href=\"/docs/\" />",
                    1,
                );
                bytes = html.into_bytes();
            }
            let mut response = ([(header::CONTENT_TYPE, file.content_type)], bytes).into_response();
            if file.gzpipped {
                response.headers_mut().insert(
                    header::CONTENT_ENCODING,
                    header::HeaderValue::from_static("gzip"),
                );
            }
            response
        }
        Ok(None) => crate::error::AppError::NotFound.into_response(),
        Err(err) => {
            tracing::error!(%err, "cannot serve Swagger UI");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
