//! API tests against real redis-servers that the harness starts on free ports.

mod helpers;

mod errors;
mod locks;
mod semaphores;
mod service;
mod waiting;
