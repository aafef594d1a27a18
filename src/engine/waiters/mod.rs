//! This instance's waiters: who waits on which name, what each hears while
//! it waits, and the tasks that keep them alive in the line.
//!
//! The line itself lives in Redis (`functions/core/`). A waiter joins it with
//! one call and then sleeps: the call that ends a lease grants it to the head
//! of the line and publishes the grant on the name's channel, which this
//! instance subscribes to only while it has a waiter on that name.

mod mailbox;
mod registration;
mod registry;
mod tasks;

pub(in crate::engine) use mailbox::WaiterNotice;
pub(in crate::engine) use registration::{new_tag, Registration};
pub(in crate::engine) use registry::Registry;
