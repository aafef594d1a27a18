//! The HTTP API: one file per resource, the pieces they share, and
//! problem+json. Handlers parse requests (the [`crate::wire`] bodies) into
//! domain types, call the engine, and map its results to the wire's JSON
//! and problem+json.

pub mod api;
mod auth;
pub mod claims;
pub mod dashboard;
mod error;
pub mod events;
mod extract;
mod freezes;
pub mod health;
pub mod history;
pub mod holder;
pub mod json;
pub mod kind;
pub mod kind_doc;
pub mod lease;
mod listing;
pub mod locks;
mod outcome;
pub mod problem;
pub mod progress;
pub mod semaphores;
mod state;
pub mod tickets;
mod yield_throttle;

pub use auth::{Caller, RequireToken};
pub use error::AppError;
pub use extract::{BodyLimit, JsonBody};
pub use json::Json;
pub use state::{AppParts, AppState};
pub use yield_throttle::{YieldThrottle, YIELD_EVERY};
