//! Extractors that turn a request into domain types or an `invalid-request`
//! problem that names the field: the JSON body (whatever its Content-Type,
//! empty or `null` meaning "all defaults") and the `{name}` and `{id}` path segments.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::domain::{LeaseId, Name};
use crate::error::AppError;

/// A JSON body read regardless of `Content-Type`; an empty body is `T::default()`.
pub struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Default,
{
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let limit = req
            .extensions()
            .get::<BodyLimit>()
            .map_or(usize::MAX, |l| l.0);
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                AppError::PayloadTooLarge { limit }
            } else {
                AppError::Invalid(format!("body: {}", rejection.body_text()))
            }
        })?;
        // Empty, or JSON `null` (what the documented optional body allows):
        // all defaults.
        let trimmed = bytes.trim_ascii();
        if trimmed.is_empty() || trimmed == b"null" {
            return Ok(Self(T::default()));
        }
        // serde would read a struct from an array too (`[60000]` as ttl_ms).
        if trimmed.first() == Some(&b'[') {
            return Err(AppError::Invalid(
                "body: invalid type: array, expected a JSON object".into(),
            ));
        }
        let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut deserializer)
            .map_err(|err| AppError::Invalid(describe(&err)))?;
        deserializer
            .end()
            .map_err(|err| AppError::Invalid(format!("body: {err}")))?;
        Ok(Self(value))
    }
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

/// The `{name}` path segment.
pub struct NamePath(pub Name);

impl<S: Send + Sync> FromRequestParts<S> for NamePath {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| AppError::Invalid(format!("name: {}", e.body_text())))?;
        Name::parse(&raw)
            .map(Self)
            .map_err(|e| AppError::field("name", e))
    }
}

/// The `{name}` and `{id}` path segments of a lease.
pub struct LeasePath {
    pub name: Name,
    pub id: LeaseId,
}

impl<S: Send + Sync> FromRequestParts<S> for LeasePath {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path((name, id)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|e| AppError::Invalid(format!("path: {}", e.body_text())))?;
        Ok(Self {
            name: Name::parse(&name).map_err(|e| AppError::field("name", e))?,
            id: LeaseId::parse(&id).map_err(|e| AppError::field("id", e))?,
        })
    }
}

/// `#[serde(default, deserialize_with = "extract::whole_number")]` for an
/// optional non-negative integer field: JSON Schema's `integer` (what the
/// document promises) admits `5000.0` as well as `5000`, so both are accepted;
/// a fraction, a negative or a too-large number is an error naming the field.
pub(crate) fn whole_number<'de, D>(deserializer: D) -> Result<Option<u64>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::de::{Error, Unexpected, Visitor};

    struct WholeNumber;

    impl<'de> Visitor<'de> for WholeNumber {
        type Value = Option<u64>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a non-negative integer")
        }

        fn visit_none<E: Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }

        fn visit_u64<E: Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }

        fn visit_i64<E: Error>(self, v: i64) -> Result<Self::Value, E> {
            u64::try_from(v)
                .map(Some)
                .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
        }

        fn visit_f64<E: Error>(self, v: f64) -> Result<Self::Value, E> {
            // 2^64 is exactly representable; every whole f64 below it fits a u64.
            if v.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&v) {
                Ok(Some(v as u64))
            } else {
                Err(E::invalid_value(Unexpected::Float(v), &self))
            }
        }
    }

    deserializer.deserialize_option(WholeNumber)
}
