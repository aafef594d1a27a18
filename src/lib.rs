//! baton: distributed locks and fair counting semaphores over HTTP, with all
//! state in Redis.
//!
//! # Layout
//!
//! A strict stack, top to bottom; each module uses only modules below it
//! (`tests/layers.rs` checks it):
//!
//! - [`startup`]: the router, its layers, and the run loop with graceful shutdown.
//! - [`openapi`]: the OpenAPI document built from the routes, and Swagger UI.
//! - [`routes`]: resources only: one module per resource, and what the two
//!   kinds share (their handlers, [`routes::kind`]; their OpenAPI operations,
//!   [`routes::kind_doc`]; their path parameters and the making of their
//!   bodies, [`routes::lease`]); handlers parse requests into [`domain`]
//!   types, call the [`engine`], and answer [`wire`] bodies as JSON or
//!   problem+json (one table of problem types: [`wire::ProblemType`]).
//! - [`engine`]: the Redis core: one function of baton's Redis Functions
//!   library per operation over a lease core in parts by concern, the
//!   connection to Redis, change events, this instance's waiters (woken by
//!   pub/sub instead of polling) and the operations of both kinds, a room
//!   each (the engine's own map says which uses which).
//! - [`http`], beside [`engine`] (neither uses the other): the HTTP plumbing.
//!   The connection server ([`http::server`]: HTTP/1.1 and HTTP/2 on one port,
//!   connection limits), the outermost layer that reads a request whole and
//!   keeps a waiting request small ([`http::ResolveParked`], [`http::Parked`]),
//!   and the deadline and request-metrics layers.
//! - [`wire`], beside them (none of the three uses another): the bodies on
//!   the wire, one type each (leases, statuses, listing pages, the problem
//!   types and body, progress events, the requests), which the routes
//!   serialize with their OpenAPI schemas and the client deserializes.
//! - [`telemetry`]: logs, the audit trail, request spans, Redis outages and
//!   Prometheus metrics, a file each; [`shutdown`]: SIGINT and SIGTERM;
//!   [`access`]: bearer tokens and their scopes (who may read, write or
//!   administer which names), read again on SIGHUP.
//! - [`config`]: settings from the `BATON_*` environment variables and flags
//!   (declared once, read through one parser, their values, secrets and
//!   Redis URLs each in a room); [`domain`]: types that cannot hold an
//!   invalid value.
//!
//! Beside the stack, [`cli`] is the client (`baton run`, `acquire`, ...): it
//! uses only [`config`] (for the one command line), [`domain`] and [`wire`]
//! (the service's bodies, typed), and talks to a service over HTTP.

// The futures of the acquire routes are deep (a waiting request's, a
// ticket's); proving them Send needs more than the default 128 levels.
#![recursion_limit = "256"]

pub mod access;
pub mod cli;
pub mod config;
pub mod domain;
pub mod engine;
pub mod http;
pub mod openapi;
pub mod routes;
pub mod shutdown;
pub mod startup;
pub mod telemetry;
pub mod wire;
