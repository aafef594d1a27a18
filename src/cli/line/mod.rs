//! Acquiring one lease in the service's line, as `baton run`, `acquire`
//! and `enqueue` ask: the [`request::Request`] their options make, the wait
//! itself ([`acquire`]), the waiting line printed meanwhile, and a ticket's
//! place.

pub mod progress;
pub mod request;
pub mod ticket;
mod wait;
pub mod waiting;

pub use wait::acquire;
