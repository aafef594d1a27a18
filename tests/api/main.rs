//! API tests against real redis-servers that the harness starts on free ports.

mod auth;
mod claims;
mod errors;
mod eta;
mod formats;
mod freeze_limits;
mod freezes;
mod history;
mod holder_stream;
mod listing;
mod locks;
mod long_lines;
mod modes;
mod names;
mod notices;
mod outages;
mod permits;
mod priority;
mod scopes;
mod semaphores;
mod service;
mod shared;
mod tickets;
mod transport;
mod waiting;
mod watching;
