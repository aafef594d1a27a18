//! What baton's test binaries share, as one crate (`baton-testkit`):
//!
//! - [`redis_server`]: private redis-servers on free ports, killed with the
//!   test process, and the one a test process shares;
//! - [`topology`]: Redis Cluster, Sentinel and a replicated pair, for the
//!   tests of the Redis modes;
//! - [`app`]: baton services in the test process on free ports, each with
//!   its own key prefix, and the requests and answers the tests share;
//! - [`events`]: server-sent event streams read event by event;
//! - [`baton_process`], [`service`]: the real baton binary as a process of a
//!   test's own, and the command line of it;
//! - [`scenarios`]: what two instances must show, run by the API tests on
//!   every Redis deployment;
//! - [`chaos`]: baton as a real process and the clients of the chaos runs,
//!   which record every call into a [`history::History`];
//! - [`checker`]: the judge of a recorded history, one file per rule with
//!   its unit tests (`cargo test -p baton-testkit`).

pub mod app;
pub mod baton_process;
pub mod chaos;
pub mod checker;
pub mod events;
pub mod history;
pub mod redis_server;
pub mod scenarios;
pub mod service;
pub mod topology;

pub use app::{
    answer_of, commands_per_cycle, granted, join_line, lease_path, problem, release, settings_for,
    status_of, take, token_of, two_instances, unique_prefix, waiting, Answer, TestApp,
};
pub use baton_process::{baton_binary, BatonProcess};
pub use redis_server::{free_port, shared_redis, spawn_dying_with_parent, RedisServer};
