//! `/claims`: several names held together, all or nothing. `POST /claims`
//! takes every name (201 with the claim) or none (409 `claim-refused`);
//! `GET`, `PATCH` and `DELETE /claims/{id}` show, refresh and release it
//! from any instance. Each lease of a claim is an ordinary lease of its name.
//! With `Accept: text/event-stream` and a `wait_ms`, the acquisition sends
//! `queued` events saying which names it holds and which it waits for, then
//! `acquired` (the claim) or `problem`.
//!
//! - `request.rs`: what a request names (`{id}`, the body of `POST /claims`),
//!   parsed into domain types;
//! - `routes.rs`: the routes, their handlers and their OpenAPI operations;
//! - `answer.rs`: a claim's body, and the problem of a refused claim;
//! - `events.rs`: a claim's acquisition with progress events.

mod answer;
mod events;
mod request;
mod routes;

pub use routes::router;
