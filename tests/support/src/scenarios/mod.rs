//! Scenarios of two instances that the API tests run on every Redis
//! deployment: one Redis, a Redis Cluster, Sentinel.

pub mod permits;
pub mod shared;
