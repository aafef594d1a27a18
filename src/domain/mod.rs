//! Types that cannot hold an invalid value: requests are parsed into them at the
//! HTTP boundary, so the engine never sees a bad name, id, ttl or limit.

mod acquire;
mod demand;
mod kind;
mod lease_id;
mod name;
mod numbers;
mod owner;
mod printable;

pub use acquire::AcquireRequest;
pub use demand::{Demand, Permits};
pub use kind::Kind;
pub use lease_id::LeaseId;
pub use name::{Name, NamePrefix};
pub use numbers::{Limit, Ttl, WaitTime};
pub use owner::{Owner, MAX_OWNER_LEN};
pub use printable::{printable_pattern, Printable};

/// Why a value was refused, phrased for the person who sent it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);
