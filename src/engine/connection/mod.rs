//! The connection to Redis, the same to the rest of the engine in each of
//! its deployments (one server, a Redis Cluster, a master named by Redis
//! Sentinel): the calls ([`Store`]), every one bounded in time; the
//! subscriptions ([`PubSub`]), which say when messages may have been
//! missed; and how either connection is made ([`StoreConfig`]). What the
//! calls do is the library's (`functions/`); this room only carries them.

mod connect;
mod pubsub;
mod store;

pub use connect::StoreConfig;
pub use pubsub::{PubSub, PubSubNotice, PubSubNotices};
pub use store::Store;
