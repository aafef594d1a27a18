//! Freezes: a window of time in which nothing is granted on the names a
//! freeze matches (deploys stopped over a weekend, a holiday, an incident),
//! its id, and the windows its schedule makes (a one-off window,
//! or a recurring one written as cron, GitLab's way).

mod freeze;
mod schedule;

pub use freeze::{Freeze, FreezeId};
pub use schedule::{Recurring, Schedule, Window};
