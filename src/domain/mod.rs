//! Types that cannot hold an invalid value: requests are parsed into them at the
//! HTTP boundary, so the engine never sees a bad name, id, ttl or limit.

mod acquire;
mod claim;
mod demand;
mod freeze;
mod grant;
mod kind;
mod lease_id;
mod name;
mod name_pattern;
mod notify_url;
mod numbers;
mod owner;
mod printable;
mod priority;
mod reason;
mod schedule;
mod scope;
mod token_name;

pub use acquire::{AcquireRequest, Forsaken, KeepPlace};
pub use claim::{ClaimId, ClaimPart, ClaimParts, CLAIM_NAMES};
pub use demand::{Demand, Permits};
pub use freeze::{Freeze, FreezeId};
pub use grant::Grant;
pub use kind::Kind;
pub use lease_id::LeaseId;
pub use name::{Name, NamePrefix};
pub use name_pattern::NamePattern;
pub use notify_url::{NotifyUrl, MAX_NOTIFY_URL_LEN};
pub use numbers::{Limit, Ttl, WaitTime};
pub use owner::{Owner, MAX_OWNER_LEN};
pub use printable::{printable_pattern, Printable};
pub use priority::Priority;
pub use reason::Reason;
pub use schedule::{Recurring, Schedule, Window, DAY_MS, HORIZON_DAYS};
pub use scope::Scope;
pub use token_name::{TokenName, MAX_TOKEN_NAME_LEN};

/// Why a value was refused, phrased for the person who sent it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);
