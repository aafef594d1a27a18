//! HTTP plumbing, below the resources: the connection server, the
//! outermost layer that keeps a waiting request small ([`Parked`]), and the
//! deadline and request-metrics layers. It knows nothing of locks or
//! semaphores; the few answers it gives of its own accord (a request past its
//! deadline, a parked request that panicked) are handed to it, worded by the
//! routes.

mod deadline;
mod parked;
mod record_metrics;
pub mod server;

pub use deadline::Deadline;
pub use parked::{Parked, ResolveParked};
pub use record_metrics::RecordMetrics;
