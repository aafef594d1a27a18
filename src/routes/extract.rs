//! The JSON body extractor: whatever its Content-Type, empty or `null`
//! meaning "all defaults", and an `invalid-request` problem naming the field
//! when it does not parse.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use super::error::AppError;
use crate::wire::Problem;

/// A JSON body read regardless of `Content-Type`; an empty body is `T::default()`.
pub struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Default,
{
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_body(req, state).await?;
        parse_json(&bytes).map(Self)
    }
}

/// The body of `req`, up to the configured limit.
///
/// # Errors
/// `payload-too-large` over the limit; `invalid-request` when it cannot be read.
pub async fn read_body<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, AppError> {
    let limit = req
        .extensions()
        .get::<BodyLimit>()
        .map_or(usize::MAX, |l| l.0);
    Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            AppError::from(Problem::payload_too_large(limit))
        } else {
            AppError::invalid(format!("body: {}", rejection.body_text()))
        }
    })
}

/// A JSON body as `T`; empty or `null` is `T::default()`.
///
/// # Errors
/// `invalid-request` naming the field at fault.
pub fn parse_json<T: DeserializeOwned + Default>(bytes: &[u8]) -> Result<T, AppError> {
    // Empty (no bytes at all), or JSON `null` (what the documented optional
    // body allows): all defaults. A body of whitespace alone is not JSON,
    // and not empty either: 400, as a JSON parser and the fuzz run say.
    if bytes.is_empty() {
        return Ok(T::default());
    }
    let json_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let start = bytes
        .iter()
        .position(|b| !json_space(b))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !json_space(b))
        .map_or(start, |i| i + 1);
    let trimmed = &bytes[start..end.max(start)];
    if trimmed == b"null" {
        return Ok(T::default());
    }
    // serde would read a struct from an array too (`[60000]` as ttl_ms).
    if trimmed.first() == Some(&b'[') {
        return Err(AppError::invalid(
            "body: invalid type: array, expected a JSON object".into(),
        ));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer)
        .map_err(|err| AppError::invalid(describe(&err)))?;
    deserializer
        .end()
        .map_err(|err| AppError::invalid(format!("body: {err}")))?;
    Ok(value)
}

/// The configured body limit, for the 413 detail.
#[derive(Clone, Copy)]
pub struct BodyLimit(pub usize);

fn describe(err: &serde_path_to_error::Error<serde_json::Error>) -> String {
    let path = err.path().to_string();
    let inner = err.inner();
    let message = inner.to_string();
    // serde_json appends " at line L column C"; the field name says more.
    let message = message
        .rsplit_once(" at line ")
        .map_or(message.as_str(), |(m, _)| m);
    if inner.is_syntax() || inner.is_eof() {
        format!("body: malformed JSON: {message}")
    } else if path == "." {
        format!("body: {message}")
    } else {
        format!("{path}: {message}")
    }
}
