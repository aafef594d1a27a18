//! baton: distributed locks and fair counting semaphores over HTTP, with all
//! state in Redis.
//!
//! # Layout
//!
//! - [`config`]: settings from the `BATON_*` environment variables.
//! - [`startup`]: the router, its layers, and the run loop with graceful shutdown.
//! - [`routes`]: one module per resource; handlers parse requests into
//!   [`domain`] types, call the [`engine`], and answer JSON or problem+json ([`error`]).
//! - [`engine`]: the Redis core, one Lua script per operation, and the waiters
//!   woken by pub/sub instead of polling.
//! - [`openapi`]: the OpenAPI document generated from the handlers, and Swagger UI.
//! - [`telemetry`]: logs and Prometheus metrics; [`shutdown`]: SIGINT and SIGTERM.

pub mod config;
pub mod domain;
pub mod engine;
pub mod error;
pub mod openapi;
pub mod routes;
pub mod shutdown;
pub mod startup;
pub mod telemetry;
