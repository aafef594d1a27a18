//! What `GET /locks` and `GET /semaphores` share: the query (`prefix`,
//! `limit`, `cursor`), parsed into domain and engine types or a 400 naming the
//! field.

use axum::extract::Query;
use serde::Deserialize;
use utoipa::IntoParams;

use super::AppError;
use crate::domain::NamePrefix;
use crate::engine::{PageCursor, PageLimit};

/// The query of `GET /locks` and `GET /semaphores`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only names that start with this (any text a name may hold; `*`, `?`
    /// and `[` match only themselves).
    #[param(
        max_length = 200,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F\u061C\u200E\u200F\u2028-\u202E\u2066-\u2069]*$",
        example = "review/"
    )]
    pub prefix: Option<String>,
    /// At most this many entries in the page: 1 to 1000, default 100.
    #[param(minimum = 1, maximum = 1000, default = 100)]
    pub limit: Option<u64>,
    /// The `next_cursor` of the previous page; absent for the first page.
    pub cursor: Option<String>,
}

/// The prefix, page size and cursor of a listing, or a 400 naming the field.
pub(crate) fn parse_list_query(
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<(NamePrefix, PageLimit, PageCursor), AppError> {
    let Query(query) = query.map_err(|e| AppError::invalid(format!("query: {}", e.body_text())))?;
    let prefix = NamePrefix::parse(query.prefix.as_deref().unwrap_or(""))
        .map_err(|e| AppError::field("prefix", e))?;
    let limit = query
        .limit
        .map_or(Ok(PageLimit::default()), PageLimit::new)
        .map_err(|e| AppError::field("limit", e))?;
    let cursor = query
        .cursor
        .as_deref()
        // An empty `cursor=` is the first page, as an absent one is.
        .filter(|cursor| !cursor.is_empty())
        .map_or(Ok(PageCursor::default()), PageCursor::parse)
        .map_err(|e| AppError::field("cursor", e))?;
    Ok((prefix, limit, cursor))
}
