//! The client subcommands, one file each with its own options (clap) and
//! its call, as mini-redis keeps its `cmd/`; `baton run` has a folder of
//! its own ([`crate::cli::run`]).

pub mod acquire;
pub mod ask_yield;
pub mod docs;
pub mod freeze;
pub mod healthcheck;
pub mod history;
pub mod lease;
pub mod list;
pub mod status;
pub mod ticket;
