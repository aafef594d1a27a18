//! Every setting of the service, declared once: its flag, its variable, its
//! default and its help line; the command line they make; and how its
//! secrets are hidden when the settings are shown.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, ValueEnum};

use super::redis_url::{redact_url, RedisMode};
use super::secrets::{host_list, token_list};
use super::values::{
    freeze_max_days, history_days, history_max, keep_place_ms, listen_address, max_wait_ms,
    non_empty, pickup_ms, positive_count, positive_millis, worker_threads,
};

/// The largest `wait_ms` accepted unless `BATON_MAX_WAIT_MS` says otherwise.
pub const DEFAULT_MAX_WAIT_MS: u64 = 300_000;
/// `BATON_MAX_KEEP_PLACE_MS` unless configured: 7 days.
pub const DEFAULT_MAX_KEEP_PLACE_MS: u64 = 604_800_000;

/// The version and the source revision it was built from (build.rs reads the
/// revision from git, or `BATON_GIT_REVISION`; "unknown" without either).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("BATON_GIT_REVISION"),
    ")"
);

/// The `baton` command line of the service: its settings. The client
/// subcommands (`crate::cli`) are added beside them.
#[derive(Parser)]
#[command(
    name = "baton",
    version = VERSION,
    about = "Distributed locks and fair counting semaphores over HTTP, with all state in Redis",
    long_about = "Distributed locks and fair counting semaphores over HTTP, with all state in Redis.\n\n\
        Serves until SIGTERM or Ctrl-C. Every setting is a flag or its BATON_* variable \
        (a flag wins over its variable).",
    after_help = "Logs go to stderr, filtered by RUST_LOG (default: info)."
)]
pub struct Cli {
    #[command(flatten)]
    pub settings: Settings,
}

/// How log lines are written to stderr.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// For people: one readable line per event.
    #[default]
    Text,
    /// For log shippers: one JSON object per line, span fields included.
    Json,
}

/// Everything the service can be told at start.
#[derive(Args, Clone)]
pub struct Settings {
    /// Address to serve on (host:port)
    #[arg(long, env = "BATON_LISTEN", default_value = "127.0.0.1:8080", value_parser = listen_address)]
    pub listen: String,

    // Its help is an attribute, not a doc comment: rustdoc would read the
    // brackets (optional parts) as links.
    #[arg(
        long,
        help = "The Redis to use: redis://[user:password@]host[:port][/db], rediss://…, \
                redis+unix:///path[?db=N&pass=…]; a comma-separated list in cluster and sentinel modes",
        env = "BATON_REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true
    )]
    pub redis_url: String,

    /// How to reach Redis
    #[arg(long, env = "BATON_REDIS_MODE", value_enum, default_value_t)]
    pub redis_mode: RedisMode,

    /// The master name to ask the sentinels for (sentinel mode)
    #[arg(long, env = "BATON_REDIS_SENTINEL_MASTER", default_value = "mymaster", value_parser = non_empty)]
    pub redis_sentinel_master: String,

    /// How many replicas must have an acquisition before it is answered 201
    /// (Redis WAIT); fewer in time answers 503. 0: answer at once
    #[arg(
        long,
        env = "BATON_REDIS_WAIT_REPLICAS",
        default_value = "0",
        value_name = "N"
    )]
    pub redis_wait_replicas: u32,

    /// Prefix of every Redis key and channel the service uses
    #[arg(long, env = "BATON_KEY_PREFIX", default_value = "baton:")]
    pub key_prefix: String,

    /// The largest wait_ms accepted (0 to 86400000)
    #[arg(long, env = "BATON_MAX_WAIT_MS", default_value_t = DEFAULT_MAX_WAIT_MS, value_parser = max_wait_ms, value_name = "MS")]
    pub max_wait_ms: u64,

    /// The largest keep_place_ms accepted: how long a ticket may keep its
    /// place in line (default 7 days)
    #[arg(long, env = "BATON_MAX_KEEP_PLACE_MS", default_value_t = DEFAULT_MAX_KEEP_PLACE_MS, value_parser = keep_place_ms, value_name = "MS")]
    pub max_keep_place_ms: u64,

    /// How long a ticket's lease is held for it after its grant, to be collected
    #[arg(long, env = "BATON_PICKUP_MS", default_value = "300000", value_parser = pickup_ms, value_name = "MS")]
    pub pickup_ms: u64,

    /// Comma-separated bearer tokens; when set (or admin tokens are), /locks and
    /// /semaphores need one. Prefer the variable, or BATON_API_TOKENS_FILE:
    /// flags show in `ps`
    #[arg(long, env = "BATON_API_TOKENS", default_value = "", hide_default_value = true,
          hide_env_values = true, value_parser = token_list)]
    pub api_tokens: ::std::vec::Vec<String>,

    /// Comma-separated tokens that may also force-release. Prefer the
    /// variable, or BATON_ADMIN_TOKENS_FILE: flags show in `ps`
    #[arg(long, env = "BATON_ADMIN_TOKENS", default_value = "", hide_default_value = true,
          hide_env_values = true, value_parser = token_list)]
    pub admin_tokens: ::std::vec::Vec<String>,

    /// A file of API tokens (comma- or newline-separated), e.g. a container
    /// secret; added to BATON_API_TOKENS
    #[arg(long, env = "BATON_API_TOKENS_FILE", value_name = "PATH")]
    pub api_tokens_file: Option<PathBuf>,

    /// A file of admin tokens (comma- or newline-separated); added to BATON_ADMIN_TOKENS
    #[arg(long, env = "BATON_ADMIN_TOKENS_FILE", value_name = "PATH")]
    pub admin_tokens_file: Option<PathBuf>,

    /// A TOML file of named tokens, each allowed read, write or admin on some
    /// names or prefixes; combined with the tokens above, read again on SIGHUP
    /// and when it changes
    #[arg(long, env = "BATON_TOKENS_FILE", value_name = "PATH")]
    pub tokens_file: Option<PathBuf>,

    /// The largest request body accepted, in bytes
    #[arg(long, env = "BATON_MAX_BODY_BYTES", default_value = "16384", value_parser = positive_count)]
    pub max_body_bytes: usize,

    /// How many requests may wait at once on this instance
    #[arg(long, env = "BATON_MAX_WAITERS", default_value = "100000", value_parser = positive_count)]
    pub max_waiters: usize,

    /// How many GET /events streams may be open at once on this instance
    #[arg(long, env = "BATON_MAX_EVENT_STREAMS", default_value = "1000", value_parser = positive_count)]
    pub max_event_streams: usize,

    /// How long a request may take beyond the longest wait, in milliseconds
    #[arg(long = "request-timeout-ms", env = "BATON_REQUEST_TIMEOUT_MS", default_value = "10000",
          value_parser = positive_millis, value_name = "MS")]
    pub request_timeout: Duration,

    /// How long one Redis call may take, in milliseconds
    #[arg(long = "redis-timeout-ms", env = "BATON_REDIS_TIMEOUT_MS", default_value = "1000",
          value_parser = positive_millis, value_name = "MS")]
    pub redis_timeout: Duration,

    /// A connection that has not sent a whole request head by then is closed, in milliseconds
    #[arg(long = "header-timeout-ms", env = "BATON_HEADER_TIMEOUT_MS", default_value = "10000",
          value_parser = positive_millis, value_name = "MS")]
    pub header_timeout: Duration,

    /// An idle keep-alive connection is closed after this, in milliseconds
    #[arg(long = "idle-timeout-ms", env = "BATON_IDLE_TIMEOUT_MS", default_value = "60000",
          value_parser = positive_millis, value_name = "MS")]
    pub idle_timeout: Duration,

    /// Connections past this many are closed at once, until others close
    #[arg(long, env = "BATON_MAX_CONNECTIONS", default_value = "10000", value_parser = positive_count)]
    pub max_connections: usize,

    /// Threads of the async runtime: a number, or auto (one per CPU, one on two CPUs or fewer)
    #[arg(long, env = "BATON_WORKER_THREADS", default_value = "auto", value_parser = worker_threads)]
    pub worker_threads: usize,

    /// How many ended leases each name's history keeps (0 to 100000; 0: no history)
    #[arg(long, env = "BATON_HISTORY_MAX", default_value = "1000", value_parser = history_max, value_name = "N")]
    pub history_max: u32,

    /// How many days a name's history is kept after the name was last used (1 to 365)
    #[arg(long, env = "BATON_HISTORY_DAYS", default_value = "7", value_parser = history_days, value_name = "DAYS")]
    pub history_days: u32,

    /// How far ahead a one-off freeze's `until` may lie, in days (1 to 36500)
    #[arg(long, env = "BATON_FREEZE_MAX_DAYS", default_value = "400", value_parser = freeze_max_days, value_name = "DAYS")]
    pub freeze_max_days: u32,

    /// Comma-separated host names that turn notices (notify) may be sent to;
    /// unset: notices are off
    #[arg(long, env = "BATON_WEBHOOK_HOSTS", default_value = "", hide_default_value = true,
          value_parser = host_list)]
    pub webhook_hosts: ::std::vec::Vec<String>,

    /// The key that signs turn notices (HMAC-SHA256 in Baton-Signature);
    /// needed with BATON_WEBHOOK_HOSTS. Prefer the variable: flags show in `ps`
    #[arg(
        long,
        env = "BATON_WEBHOOK_SECRET",
        default_value = "",
        hide_default_value = true,
        hide_env_values = true
    )]
    pub webhook_secret: String,

    /// Log lines on stderr as text or as one JSON object per line
    #[arg(long, env = "BATON_LOG_FORMAT", value_enum, default_value_t)]
    pub log_format: LogFormat,
}

/// Secrets hidden: the Redis password, and the tokens (only their number).
impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("listen", &self.listen)
            .field("redis_url", &self.redis_url_redacted())
            .field("redis_mode", &self.redis_mode)
            .field("redis_sentinel_master", &self.redis_sentinel_master)
            .field("redis_wait_replicas", &self.redis_wait_replicas)
            .field("key_prefix", &self.key_prefix)
            .field("max_wait_ms", &self.max_wait_ms)
            .field("max_keep_place_ms", &self.max_keep_place_ms)
            .field("pickup_ms", &self.pickup_ms)
            .field("api_tokens", &self.api_tokens.len())
            .field("admin_tokens", &self.admin_tokens.len())
            .field("api_tokens_file", &self.api_tokens_file)
            .field("admin_tokens_file", &self.admin_tokens_file)
            .field("tokens_file", &self.tokens_file)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_waiters", &self.max_waiters)
            .field("max_event_streams", &self.max_event_streams)
            .field("request_timeout", &self.request_timeout)
            .field("redis_timeout", &self.redis_timeout)
            .field("header_timeout", &self.header_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_connections", &self.max_connections)
            .field("worker_threads", &self.worker_threads)
            .field("history_max", &self.history_max)
            .field("history_days", &self.history_days)
            .field("freeze_max_days", &self.freeze_max_days)
            .field("webhook_hosts", &self.webhook_hosts)
            .field("webhook_secret", &!self.webhook_secret.is_empty())
            .field("log_format", &self.log_format)
            .finish()
    }
}

impl Settings {
    /// The Redis URL with any password hidden, for logs.
    pub fn redis_url_redacted(&self) -> String {
        redact_url(&self.redis_url)
    }

    /// The longest any request may take: the longest wait plus the request timeout.
    pub fn request_deadline(&self) -> Duration {
        Duration::from_millis(self.max_wait_ms) + self.request_timeout
    }
}
