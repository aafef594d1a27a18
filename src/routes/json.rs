//! JSON response bodies, newline-terminated so that `curl` output in a
//! terminal or a log stays one answer per line.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// A JSON response body that ends in a newline.
pub struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        json_response(&self.0, "application/json")
    }
}

/// `value` as a JSON body of `content_type`, newline-terminated.
pub(crate) fn json_response(value: &impl Serialize, content_type: &'static str) -> Response {
    match serde_json::to_vec(value) {
        Ok(mut body) => {
            body.push(b'\n');
            ([(header::CONTENT_TYPE, content_type)], body).into_response()
        }
        Err(err) => {
            tracing::error!(%err, "cannot serialize a response");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
