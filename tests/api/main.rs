//! API tests against real redis-servers that the harness starts on free ports.

mod helpers;

mod auth;
mod errors;
mod locks;
mod outages;
mod semaphores;
mod service;
mod waiting;
