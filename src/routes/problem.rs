//! The problem types' own routes and OpenAPI markers; the types themselves,
//! and the problem body, are the wire's ([`crate::wire::ProblemType`]).

use axum::extract::Path;
use axum::response::{IntoResponse, Response};

use crate::wire::{Facts, ProblemType};

/// OpenAPI response markers, for `responses(...)` in `#[utoipa::path]`: each
/// refers to the component of the problem type of the same name.
pub mod responses {
    macro_rules! markers {
        ($($ty:ident),* $(,)?) => {$(
            #[doc = concat!("The `", stringify!($ty), "` problem response.")]
            pub struct $ty;

            impl<'r> utoipa::ToResponse<'r> for $ty {
                fn response() -> (&'r str, utoipa::openapi::RefOr<utoipa::openapi::Response>) {
                    (stringify!($ty), crate::wire::ProblemType::$ty.openapi_response())
                }
            }
        )*};
    }

    markers!(RedisUnavailable, TooManyStreams, FreezeNotFound, Forbidden,);
}

/// `GET /problems/{slug}`: what a problem type means, as plain text.
pub async fn describe(Path(slug): Path<String>) -> Response {
    match ProblemType::from_slug(&slug) {
        Some(kind) => {
            let Facts {
                slug,
                status,
                title,
                description,
                ..
            } = kind.facts();
            (
                [("content-type", "text/plain; charset=utf-8")],
                format!("{title} ({status}, {slug})\n\n{description}\n"),
            )
                .into_response()
        }
        None => super::AppError::from(ProblemType::NotFound).into_response(),
    }
}
