//! HTTP plumbing, below the resources: the connection server ([`server`]),
//! the outermost layer that reads a request whole and keeps a waiting request
//! small ([`ResolveParked`], which answers what a handler [`Parked`]), and
//! the deadline and request-metrics layers. It knows nothing of locks or
//! semaphores; the few answers it gives of its own accord (a request past its
//! deadline, a parked request that panicked) are handed to it, worded by the
//! routes.

mod deadline;
mod parked;
mod record_metrics;
mod resolve_parked;
pub mod server;
mod whole_body;

pub use deadline::Deadline;
pub use parked::Parked;
pub use record_metrics::RecordMetrics;
pub use resolve_parked::ResolveParked;
