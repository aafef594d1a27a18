//! The schemas of the body fields the two kinds take, stated once from the
//! domain's limits: `#[schema(schema_with = ...)]` in the acquisition bodies
//! (`AcquireLock`, `AcquireSemaphore`) and the refresh body (`Refresh`).

use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, SchemaType, Type};
use utoipa::openapi::Object;

use crate::config::DEFAULT_MAX_WAIT_MS;
use crate::domain::{printable_pattern, Limit, Priority, Ttl, MAX_OWNER_LEN};

fn millis(minimum: u64, maximum: u64, description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(minimum))
        .maximum(Some(maximum))
        .description(Some(description))
}

/// `ttl_ms` of an acquisition.
pub fn ttl_ms() -> Object {
    let (max, default) = (Ttl::MAX_MS, Ttl::DEFAULT_MS);
    let text = format!("Lease lifetime in ms unless refreshed: 1 to {max}, default {default}.");
    millis(1, max, &text).default(Some(default.into())).build()
}

/// `ttl_ms` of a refresh.
pub fn refresh_ttl_ms() -> Object {
    let max = Ttl::MAX_MS;
    let text = format!("New lifetime from now, in ms: 1 to {max}; default: the lease's own ttl.");
    millis(1, max, &text).build()
}

/// `wait_ms`; the served document states the configured maximum.
pub fn wait_ms() -> Object {
    let text = format!(
        "How long to wait in line, in ms: 0 (default) to the server's maximum \
         (`BATON_MAX_WAIT_MS`, {DEFAULT_MAX_WAIT_MS} unless configured otherwise)."
    );
    millis(0, DEFAULT_MAX_WAIT_MS, &text)
        .default(Some(0.into()))
        .build()
}

/// A semaphore's `limit`.
pub fn limit() -> Object {
    let max = Limit::MAX;
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(1))
        .maximum(Some(max))
        .description(Some(format!(
            "At most this many permits are held at once (a lease takes its \
             `permits`, 1 by default): 1 to {max}. Required."
        )))
        .build()
}

/// A semaphore acquisition's `permits`.
pub fn permits() -> Object {
    let max = Limit::MAX;
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(1))
        .maximum(Some(max))
        .default(Some(1.into()))
        .description(Some(
            "How many of the `limit` this lease counts as: 1 (default) to `limit`; \
             more than `limit` is answered 400 (`invalid-request`), since it could \
             never be held. Waiters are admitted in line order (by priority, then \
             first come, first served), so a large request at the head of the line \
             is never overtaken by smaller ones behind it.",
        ))
        .build()
}

/// `priority` of an acquisition.
pub fn priority() -> Object {
    let max = Priority::MAX;
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int32)))
        .minimum(Some(0))
        .maximum(Some(max))
        .default(Some(0.into()))
        .description(Some(format!(
            "0 (default) to {max}: a waiter of higher priority is placed ahead of every \
             waiter of lower priority, and behind those of its own priority that joined \
             before it. Nobody is ever taken off a lease by priority."
        )))
        .build()
}

/// `owner`.
pub fn owner() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .max_length(Some(MAX_OWNER_LEN))
        .pattern(Some(printable_pattern()))
        .description(Some(format!(
            "Who holds the lease, shown in status (e.g. a CI job URL); at most \
             {MAX_OWNER_LEN} characters, all printable (no control or format characters)."
        )))
        .build()
}

/// `override`: an administrator's reason to be granted through a freeze.
pub fn override_reason() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .max_length(Some(MAX_OWNER_LEN))
        .pattern(Some(printable_pattern()))
        .description(Some(format!(
            "With an admin token: the reason to be granted through a freeze (at most \
             {MAX_OWNER_LEN} printable characters); 403 with any other token."
        )))
        .build()
}
