//! The problem types of the API and the problem body: the one vocabulary
//! every failure is told in. Everything about one type is said once: what
//! it is ([`ProblemType::facts`], `facts.rs`), each sentence a `detail` says
//! and the extension members it carries (the constructors of `details.rs`),
//! and its OpenAPI response, whose example those constructors write
//! (`openapi.rs`). `GET /problems/{slug}`, the routes' errors, `Retry-After`
//! and the client all read them here.

mod body;
mod details;
mod facts;
mod kind;
mod openapi;

pub use body::Problem;
pub use details::{LockHeld, SemaphoreFull};
pub use facts::{Facts, RetryAfter};
pub use kind::ProblemType;
