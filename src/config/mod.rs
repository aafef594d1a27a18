//! Settings from the command line and the `BATON_*` environment variables,
//! each with a default that works on a developer's machine.
//!
//! clap reads both: every setting is a flag (`--max-wait-ms`) that mirrors its
//! variable (`BATON_MAX_WAIT_MS`), and `--help` lists them with their defaults.
//! A bad value is reported as one line naming the variable, the value (never a
//! secret) and the form expected ([`ConfigError`]).
//!
//! - `settings.rs`: every setting, declared once with its flag, variable,
//!   default and help line, and the command line they make ([`Cli`]).
//! - `parse.rs`: reading them, from the command line or the environment
//!   through one parser, the checks across settings, and a clap error as one
//!   line.
//! - `values.rs`: the form each value must have, and the words that say so.
//! - `secrets.rs`: bearer tokens, listed or read from files.
//! - `redis_url.rs`: how the service reaches Redis: the mode, the URLs each
//!   mode takes, and a URL with its passwords hidden.
//! - `error.rs`: a setting that could not be read, as one line.
//! - `variables.rs`: the variables baton knows, to warn of unknown ones.

mod error;
mod parse;
mod redis_url;
mod secrets;
mod settings;
mod values;
mod variables;

pub use error::ConfigError;
pub use parse::{one_line, Invocation};
pub use redis_url::{redact_url, RedisMode};
pub use settings::{
    Cli, LogFormat, Settings, DEFAULT_MAX_KEEP_PLACE_MS, DEFAULT_MAX_WAIT_MS, VERSION,
};
pub use values::MAX_MAX_WAIT_MS;
pub use variables::{unknown_variables, variables};
