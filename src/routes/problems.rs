//! The problem responses as OpenAPI components, with an example each, and
//! `GET /problems/{slug}`, where each problem `type` URI leads.

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder, Type};

use crate::error::{problem_type, AppError, PROBLEM_TYPES};

fn retry_after() -> Header {
    HeaderBuilder::new()
        .schema(Some(utoipa::openapi::schema::Object::with_type(
            Type::Integer,
        )))
        .description(Some("Seconds to wait before trying again"))
        .build()
}

fn problem_response(
    slug: &str,
    description: &str,
    detail: &str,
    extra: serde_json::Value,
    with_retry_after: bool,
) -> RefOr<utoipa::openapi::Response> {
    let (_, status, title, _) = PROBLEM_TYPES
        .iter()
        .find(|(s, ..)| *s == slug)
        .expect("every documented problem is in PROBLEM_TYPES");
    let mut example = json!({
        "type": problem_type(slug),
        "title": title,
        "status": status,
        "detail": detail,
    });
    if let (Some(example), Some(extra)) = (example.as_object_mut(), extra.as_object()) {
        example.extend(extra.clone());
    }
    let content = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("Problem")))
        .example(Some(example))
        .build();
    let mut response = ResponseBuilder::new()
        .description(description)
        .content("application/problem+json", content);
    if with_retry_after {
        response = response.header("Retry-After", retry_after());
    }
    response.build().into()
}

macro_rules! problem {
    ($ty:ident, $slug:literal, $description:literal, $detail:literal) => {
        problem!($ty, $slug, $description, $detail, json!({}), false);
    };
    ($ty:ident, $slug:literal, $description:literal, $detail:literal, $extra:expr, $retry:expr) => {
        #[doc = $description]
        pub struct $ty;

        impl<'r> utoipa::ToResponse<'r> for $ty {
            fn response() -> (&'r str, RefOr<utoipa::openapi::Response>) {
                (
                    stringify!($ty),
                    problem_response($slug, $description, $detail, $extra, $retry),
                )
            }
        }
    };
}

problem!(
    InvalidRequest,
    "invalid-request",
    "Malformed JSON, an unknown or out-of-range field, or a bad name or id",
    "ttl_ms: must be between 1 and 86400000"
);
problem!(
    Unauthorized,
    "unauthorized",
    "The service has API tokens and the request has no valid bearer token",
    "this service needs an `Authorization: Bearer <token>` header with a valid API token"
);
problem!(
    Forbidden,
    "forbidden",
    "Force-release with a token that is not an admin token",
    "force-releasing a lock needs an admin token"
);
problem!(
    LeaseNotFound,
    "lease-not-found",
    "No live lease with this id; nothing was changed",
    "no live lease with this id: it expired, was released, or is not this name's"
);
problem!(
    LockNotHeld,
    "lock-not-held",
    "The lock is not held",
    "the lock is not held"
);
problem!(
    LockHeld,
    "lock-held",
    "The lock is still held after waiting `wait_ms`",
    "lock 'deploy-prod' is held by someone else; it expires in 29500 ms unless refreshed",
    json!({"owner": "https://ci.example.com/jobs/42", "expires_in_ms": 29500}),
    true
);
problem!(
    SemaphoreFull,
    "semaphore-full",
    "No slot came free within `wait_ms`",
    "semaphore 'migrations' is full: 4 of 4 slots held",
    json!({"holders": 4, "limit": 4}),
    true
);
problem!(
    PayloadTooLarge,
    "payload-too-large",
    "The body is over the service's limit",
    "the request body is over the limit of 16384 bytes"
);
problem!(
    Unavailable,
    "redis-unavailable",
    "Redis cannot be reached (or the service is shutting down, or has too many waiters: see `type`)",
    "Redis cannot be reached right now; nothing was changed that a retry would not see",
    json!({}),
    true
);

/// `GET /problems/{slug}`: what a problem type means, as plain text.
pub async fn describe(Path(slug): Path<String>) -> Response {
    match PROBLEM_TYPES.iter().find(|(s, ..)| *s == slug) {
        Some((slug, status, title, description)) => (
            [("content-type", "text/plain; charset=utf-8")],
            format!("{title} ({status}, {slug})\n\n{description}\n"),
        )
            .into_response(),
        None => AppError::NotFound.into_response(),
    }
}
