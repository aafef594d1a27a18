//! What an operator sees, tested on the real binary: the command line and its
//! exit codes, JSON log lines with an audit line per operation, request ids,
//! Redis outages logged once, no secret in any log line, and exact metrics
//! of a process of the test's own.

mod claims;
mod cli;
mod freezes;
mod frictions;
mod holder;
mod logs;
mod metrics;
mod revocation;
mod run;
mod secrets;
mod steps;
mod tickets;
mod tokens;
