//! Settings from the command line and the `BATON_*` environment variables,
//! each with a default that works on a developer's machine.
//!
//! clap reads both: every setting is a flag (`--max-wait-ms`) that mirrors its
//! variable (`BATON_MAX_WAIT_MS`), and `--help` lists them with their defaults.
//! A bad value is reported as one line naming the variable, the value (never a
//! secret) and the form expected ([`ConfigError`]).

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Args, CommandFactory, FromArgMatches, Parser, ValueEnum};

/// The largest `wait_ms` accepted unless `BATON_MAX_WAIT_MS` says otherwise.
pub const DEFAULT_MAX_WAIT_MS: u64 = 300_000;

/// The version and the source revision it was built from (build.rs reads the
/// revision from git, or `BATON_GIT_REVISION`; "unknown" without either).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("BATON_GIT_REVISION"),
    ")"
);

/// The largest `BATON_MAX_WAIT_MS` accepted: a day.
pub const MAX_MAX_WAIT_MS: u64 = 86_400_000;

/// Variables that are not settings of the service but that the client
/// subcommands and baton's own scripts read (scripts/run.sh, scripts/with-lock);
/// never warned about.
const SCRIPT_VARIABLES: &[&str] = &[
    "BATON_URL",
    "BATON_TOKEN",
    "BATON_PORT",
    "BATON_PID",
    "BATON_BIN",
    "BATON_DATA_DIR",
    "BATON_DEV_REDIS_PORT",
    "BATON_UPDATE_OPENAPI",
    "BATON_LEASE_ID",
    "BATON_LOCK_NAME",
    "BATON_FENCING_TOKEN",
    "BATON_CACHE_DIR",
    "BATON_GIT_REVISION",
];

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

/// How the service reaches Redis.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RedisMode {
    /// One Redis server (or a proxy in front of several).
    #[default]
    Standalone,
    /// Redis Cluster: `BATON_REDIS_URL` lists seed nodes, comma-separated.
    Cluster,
    /// Redis Sentinel: `BATON_REDIS_URL` lists sentinels, comma-separated.
    Sentinel,
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
    #[arg(long, env = "BATON_MAX_WAIT_MS", default_value = "300000", value_parser = max_wait_ms, value_name = "MS")]
    pub max_wait_ms: u64,

    /// Comma-separated bearer tokens; when set (or admin tokens are), /locks and
    /// /semaphores need one. Prefer the variable: flags show in `ps`
    #[arg(long, env = "BATON_API_TOKENS", default_value = "", hide_default_value = true,
          hide_env_values = true, value_parser = token_list)]
    pub api_tokens: ::std::vec::Vec<String>,

    /// Comma-separated tokens that may also force-release
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
            .field("api_tokens", &self.api_tokens.len())
            .field("admin_tokens", &self.admin_tokens.len())
            .field("api_tokens_file", &self.api_tokens_file)
            .field("admin_tokens_file", &self.admin_tokens_file)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_waiters", &self.max_waiters)
            .field("max_event_streams", &self.max_event_streams)
            .field("request_timeout", &self.request_timeout)
            .field("redis_timeout", &self.redis_timeout)
            .field("header_timeout", &self.header_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_connections", &self.max_connections)
            .field("worker_threads", &self.worker_threads)
            .field("log_format", &self.log_format)
            .finish()
    }
}

/// A setting that could not be read: shown as one line naming the variable,
/// the value (a secret never) and the form expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The variable, with its flag: `BATON_MAX_WAIT_MS (--max-wait-ms)`; or the
    /// command-line word that was not understood.
    pub setting: String,
    /// The value as it may be shown, `None` when there is nothing to show.
    pub value: Option<String>,
    /// What was expected instead.
    pub expected: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(value) => write!(f, "{} = {value:?}: {}", self.setting, self.expected),
            None => write!(f, "{}: {}", self.setting, self.expected),
        }
    }
}

impl std::error::Error for ConfigError {}

/// What the command line asked for.
pub enum Invocation {
    /// Serve with these settings.
    Run(Box<Settings>),
    /// `--help` or `--version`: print this on stdout and exit 0.
    Print(String),
}

impl Cli {
    /// Reads the command line and the process environment.
    ///
    /// # Errors
    /// The first setting or flag that could not be read.
    pub fn from_args<I, T>(args: I) -> Result<Invocation, ConfigError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        parse(Self::command(), args)
    }
}

fn parse<I, T>(command: clap::Command, args: I) -> Result<Invocation, ConfigError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    // The declared arguments, with their variables, to name them in errors.
    let reference = Cli::command();
    let matches = match command.try_get_matches_from(args) {
        Ok(matches) => matches,
        Err(err)
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) =>
        {
            return Ok(Invocation::Print(err.render().to_string()));
        }
        Err(err) => return Err(one_line(&reference, &err)),
    };
    let cli = Cli::from_arg_matches(&matches).map_err(|err| one_line(&reference, &err))?;
    Ok(Invocation::Run(Box::new(cli.settings.check()?)))
}

impl Settings {
    /// Reads the process environment (no flags).
    ///
    /// # Errors
    /// The first setting that could not be read.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Reads settings through `lookup` instead of the environment, so tests
    /// need not touch the process environment.
    ///
    /// # Errors
    /// The first setting that could not be read.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        // The same parser as the command line, fed each variable as its flag,
        // with clap's own reading of the environment turned off.
        let command = Cli::command().mut_args(|arg| arg.env(None::<&'static str>));
        let mut args = vec![OsString::from("baton")];
        for (variable, flag) in variables() {
            if let Some(value) = lookup(&variable) {
                args.push(format!("--{flag}={value}").into());
            }
        }
        match parse(command, args)? {
            Invocation::Run(settings) => Ok(*settings),
            Invocation::Print(_) => unreachable!("no --help or --version is passed"),
        }
    }

    /// The checks that involve more than one setting, and the token files read.
    fn check(mut self) -> Result<Self, ConfigError> {
        let urls: Vec<&str> = match self.redis_mode {
            RedisMode::Standalone => vec![self.redis_url.trim()],
            RedisMode::Cluster | RedisMode::Sentinel => self
                .redis_url
                .split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .collect(),
        };
        let expected = match self.redis_mode {
            RedisMode::Standalone => {
                "expected one Redis URL: redis://[user:password@]host[:port][/db], rediss://… or redis+unix:///path[?db=N&pass=…]"
            }
            RedisMode::Cluster | RedisMode::Sentinel => {
                "expected a comma-separated list of Redis URLs (redis://[user:password@]host[:port], rediss://…)"
            }
        };
        let readable = |url: &&str| redis::IntoConnectionInfo::into_connection_info(*url).is_ok();
        if urls.is_empty() || !urls.iter().all(readable) {
            return Err(ConfigError {
                setting: "BATON_REDIS_URL (--redis-url)".into(),
                value: Some(redact_url(&self.redis_url)),
                expected: expected.into(),
            });
        }
        if let Some(path) = &self.api_tokens_file {
            let tokens = read_tokens(path, "BATON_API_TOKENS_FILE (--api-tokens-file)")?;
            self.api_tokens.extend(tokens);
        }
        if let Some(path) = &self.admin_tokens_file {
            let tokens = read_tokens(path, "BATON_ADMIN_TOKENS_FILE (--admin-tokens-file)")?;
            self.admin_tokens.extend(tokens);
        }
        Ok(self)
    }

    /// The Redis URL with any password hidden, for logs.
    pub fn redis_url_redacted(&self) -> String {
        redact_url(&self.redis_url)
    }

    /// The longest any request may take: the longest wait plus the request timeout.
    pub fn request_deadline(&self) -> Duration {
        Duration::from_millis(self.max_wait_ms) + self.request_timeout
    }
}

/// The tokens of a secret file: comma- or newline-separated, blanks ignored.
fn read_tokens(path: &std::path::Path, setting: &str) -> Result<Vec<String>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|err| ConfigError {
        setting: setting.to_owned(),
        value: Some(path.display().to_string()),
        expected: format!("a readable file of tokens ({err})"),
    })?;
    let tokens = token_list(&text.replace(['\n', '\r'], ",")).map_err(|expected| ConfigError {
        setting: setting.to_owned(),
        value: Some(path.display().to_string()),
        expected,
    })?;
    if tokens.is_empty() {
        return Err(ConfigError {
            setting: setting.to_owned(),
            value: Some(path.display().to_string()),
            expected: "a file with at least one token".to_owned(),
        });
    }
    Ok(tokens)
}

/// Every setting's variable and flag, as the command line declares them.
pub fn variables() -> Vec<(String, String)> {
    Cli::command()
        .get_arguments()
        .filter_map(|arg| {
            let variable = arg.get_env()?.to_str()?.to_owned();
            Some((variable, arg.get_long()?.to_owned()))
        })
        .collect()
}

/// `BATON_*` names in `names` that are neither a setting nor a variable of
/// baton's scripts, each with the closest known setting.
pub fn unknown_variables<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<(String, String)> {
    let known: Vec<String> = variables().into_iter().map(|(v, _)| v).collect();
    names
        .into_iter()
        .filter(|name| name.starts_with("BATON_"))
        .filter(|name| !known.iter().any(|k| k == name) && !SCRIPT_VARIABLES.contains(name))
        .map(|name| {
            let closest = known
                .iter()
                .min_by_key(|k| strsim::levenshtein(k, name))
                .cloned()
                .unwrap_or_default();
            (name.to_owned(), closest)
        })
        .collect()
}

/// Turns a clap error into one line naming the variable and its flag; an
/// unknown flag or subcommand keeps clap's "did you mean".
pub fn one_line(command: &clap::Command, err: &clap::Error) -> ConfigError {
    let context = |kind| match err.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    let arg = context(ContextKind::InvalidArg);
    // "--max-wait-ms <MAX_WAIT_MS>" -> the argument declared as max-wait-ms.
    let declared = arg.as_deref().and_then(|shown| {
        let long = shown.trim_start_matches('-').split([' ', '=']).next()?;
        command.get_arguments().find(|a| a.get_long() == Some(long))
    });
    let about_a_value = match (err.kind(), err.get(ContextKind::ValidValue)) {
        (ErrorKind::ValueValidation, _) => true,
        (ErrorKind::InvalidValue, Some(ContextValue::Strings(valid))) => !valid.is_empty(),
        _ => false,
    };
    let (Some(declared), true) = (declared, about_a_value) else {
        // Not about a value: an unknown flag or subcommand, a missing value.
        let rendered = err.render().to_string();
        let first = rendered
            .lines()
            .next()
            .unwrap_or("bad command line")
            .trim_start_matches("error: ");
        let tip = rendered
            .lines()
            .find_map(|line| line.trim().strip_prefix("tip: "))
            .map(|tip| format!(" ({tip})"))
            .unwrap_or_default();
        return ConfigError {
            setting: "command line".into(),
            value: None,
            expected: format!("{first}{tip}; see baton --help"),
        };
    };
    let long = declared.get_long().unwrap_or_default();
    let setting = match declared.get_env().and_then(|e| e.to_str()) {
        Some(variable) => format!("{variable} (--{long})"),
        None => format!("--{long}"),
    };
    let raw = context(ContextKind::InvalidValue).unwrap_or_default();
    let value = match long {
        "redis-url" => Some(redact_url(&raw)),
        "api-tokens" | "admin-tokens" => None,
        _ => Some(raw),
    };
    let expected = match (err.kind(), err.get(ContextKind::ValidValue)) {
        (ErrorKind::InvalidValue, Some(ContextValue::Strings(valid))) => {
            format!("expected one of {}", valid.join(", "))
        }
        _ => std::error::Error::source(err)
            .map_or_else(|| "not a valid value".to_owned(), ToString::to_string),
    };
    ConfigError {
        setting,
        value,
        expected,
    }
}

/// `host:port`, as a listener binds it.
fn listen_address(raw: &str) -> Result<String, String> {
    let expected = || "expected host:port, e.g. 127.0.0.1:8080 or 0.0.0.0:8080".to_owned();
    let (host, port) = raw.rsplit_once(':').ok_or_else(expected)?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(expected());
    }
    Ok(raw.to_owned())
}

fn non_empty(raw: &str) -> Result<String, String> {
    if raw.trim().is_empty() {
        return Err("expected a non-empty name".into());
    }
    Ok(raw.trim().to_owned())
}

fn max_wait_ms(raw: &str) -> Result<u64, String> {
    raw.trim()
        .parse::<u64>()
        .ok()
        .filter(|ms| *ms <= MAX_MAX_WAIT_MS)
        .ok_or_else(|| {
            format!("expected a whole number of milliseconds from 0 to {MAX_MAX_WAIT_MS}")
        })
}

fn positive_millis(raw: &str) -> Result<Duration, String> {
    raw.trim()
        .parse::<u64>()
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
        .ok_or_else(|| "expected a whole number of milliseconds above 0".to_owned())
}

fn positive_count(raw: &str) -> Result<usize, String> {
    raw.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| "expected a whole number above 0".to_owned())
}

fn worker_threads(raw: &str) -> Result<usize, String> {
    if raw.trim() == "auto" {
        return Ok(default_worker_threads());
    }
    positive_count(raw).map_err(|_| "expected auto or a whole number above 0".to_owned())
}

/// `" a, b ,,c"` -> `["a", "b", "c"]`.
fn token_list(raw: &str) -> Result<Vec<String>, String> {
    Ok(raw
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect())
}

/// One thread per CPU, but a single one on machines with two CPUs or fewer:
/// the work is waiting on Redis, and there a second thread mostly wakes the
/// first (measured: about 40% more CPU per operation) while Redis wants a core.
fn default_worker_threads() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    if cpus <= 2 {
        1
    } else {
        cpus
    }
}

/// Hides every password in a Redis URL (or a comma-separated list of them),
/// in each form baton accepts: `redis://:secret@host`, `redis://user:secret@host`,
/// `rediss://…`, and `redis+unix:///path?pass=secret` / `unix:///path?pass=secret`.
pub fn redact_url(url: &str) -> String {
    url.split(',')
        .map(redact_one_url)
        .collect::<Vec<_>>()
        .join(",")
}

fn redact_one_url(url: &str) -> String {
    let (before_query, query) = match url.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (url, None),
    };
    let mut out = match before_query.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((userinfo, host)) => {
                let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
                format!("{scheme}://{user}:***@{host}")
            }
            None => before_query.to_owned(),
        },
        // Not a URL at all: it could be a password pasted in the wrong place.
        None if !before_query.is_empty() => "***".to_owned(),
        None => String::new(),
    };
    if let Some(query) = query {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _))
                    if key.eq_ignore_ascii_case("pass") || key.eq_ignore_ascii_case("password") =>
                {
                    format!("{key}=***")
                }
                _ => pair.to_owned(),
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Settings::from_lookup(|k| vars.get(k).cloned())
    }

    #[test]
    fn defaults_work_on_a_developer_machine() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.listen, "127.0.0.1:8080");
        assert_eq!(s.redis_url, "redis://127.0.0.1:6379");
        assert_eq!(s.key_prefix, "baton:");
        assert_eq!(s.max_wait_ms, 300_000);
        assert!(s.api_tokens.is_empty() && s.admin_tokens.is_empty());
        assert_eq!(s.max_body_bytes, 16 * 1024);
        assert_eq!(s.redis_mode, RedisMode::Standalone);
        assert_eq!(s.redis_sentinel_master, "mymaster");
        assert_eq!(s.redis_wait_replicas, 0);
        assert_eq!(s.log_format, LogFormat::Text);
        assert_eq!(s.header_timeout, Duration::from_secs(10));
        assert_eq!(s.idle_timeout, Duration::from_secs(60));
        assert_eq!(s.max_connections, 10_000);
    }

    #[test]
    fn tokens_are_comma_separated_and_trimmed() {
        let s = settings(&[
            ("BATON_API_TOKENS", " a, b ,,c"),
            ("BATON_ADMIN_TOKENS", "root"),
        ])
        .unwrap();
        assert_eq!(s.api_tokens, ["a", "b", "c"]);
        assert_eq!(s.admin_tokens, ["root"]);
    }

    #[test]
    fn tokens_can_come_from_files_as_container_secrets() {
        let dir = std::env::temp_dir().join(format!("baton-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let api = dir.join("api");
        let admin = dir.join("admin");
        std::fs::write(&api, "tok-1\ntok-2, tok-3\n").unwrap();
        std::fs::write(&admin, "root\n").unwrap();
        let s = settings(&[
            ("BATON_API_TOKENS", "a"),
            ("BATON_API_TOKENS_FILE", api.to_str().unwrap()),
            ("BATON_ADMIN_TOKENS_FILE", admin.to_str().unwrap()),
        ])
        .unwrap();
        assert_eq!(s.api_tokens, ["a", "tok-1", "tok-2", "tok-3"]);
        assert_eq!(s.admin_tokens, ["root"]);
        let missing = dir.join("missing");
        let err = settings(&[("BATON_API_TOKENS_FILE", missing.to_str().unwrap())]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("BATON_API_TOKENS_FILE (--api-tokens-file) = ")
                && err.to_string().contains("a readable file of tokens"),
            "{err}"
        );
        std::fs::write(&api, "\n").unwrap();
        let err = settings(&[("BATON_API_TOKENS_FILE", api.to_str().unwrap())]).unwrap_err();
        assert!(err.to_string().contains("at least one token"), "{err}");
        let shown = format!("{s:?}");
        assert!(!shown.contains("tok-"), "{shown}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn worker_threads_can_be_set_but_not_to_zero() {
        assert_eq!(
            settings(&[("BATON_WORKER_THREADS", "3")])
                .unwrap()
                .worker_threads,
            3
        );
        assert!(settings(&[("BATON_WORKER_THREADS", "0")]).is_err());
        assert!(settings(&[]).unwrap().worker_threads >= 1);
    }

    #[test]
    fn a_bad_number_names_the_variable_the_value_and_the_form() {
        let err = settings(&[("BATON_MAX_WAIT_MS", "soon")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "BATON_MAX_WAIT_MS (--max-wait-ms) = \"soon\": expected a whole number of milliseconds from 0 to 86400000"
        );
        let err = settings(&[("BATON_MAX_WAIT_MS", "86400001")]).unwrap_err();
        assert!(err.to_string().contains("86400001"), "{err}");
    }

    #[test]
    fn a_bad_choice_lists_the_choices() {
        let err = settings(&[("BATON_LOG_FORMAT", "xml")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "BATON_LOG_FORMAT (--log-format) = \"xml\": expected one of text, json"
        );
        let err = settings(&[("BATON_REDIS_MODE", "cluster ")]).unwrap_err();
        assert!(err.to_string().starts_with("BATON_REDIS_MODE"), "{err}");
    }

    #[test]
    fn new_settings_are_read() {
        let s = settings(&[
            ("BATON_REDIS_MODE", "sentinel"),
            ("BATON_REDIS_URL", "redis://a:26379, redis://b:26379"),
            ("BATON_REDIS_SENTINEL_MASTER", "main"),
            ("BATON_LOG_FORMAT", "json"),
            ("BATON_HEADER_TIMEOUT_MS", "250"),
            ("BATON_IDLE_TIMEOUT_MS", "500"),
            ("BATON_MAX_CONNECTIONS", "50"),
            ("BATON_REDIS_WAIT_REPLICAS", "1"),
        ])
        .unwrap();
        assert_eq!(s.redis_wait_replicas, 1);
        assert_eq!(s.redis_mode, RedisMode::Sentinel);
        assert_eq!(s.redis_sentinel_master, "main");
        assert_eq!(s.log_format, LogFormat::Json);
        assert_eq!(s.header_timeout, Duration::from_millis(250));
        assert_eq!(s.idle_timeout, Duration::from_millis(500));
        assert_eq!(s.max_connections, 50);
    }

    #[test]
    fn a_bad_redis_url_is_shown_without_its_password() {
        let err = settings(&[("BATON_REDIS_URL", "http://:hunter2@redis:6379")]).unwrap_err();
        let line = err.to_string();
        assert!(
            line.starts_with(
                "BATON_REDIS_URL (--redis-url) = \"http://:***@redis:6379\": expected"
            ),
            "{line}"
        );
        assert!(!line.contains("hunter2"), "{line}");
        // Several URLs are for cluster and sentinel modes only.
        assert!(settings(&[("BATON_REDIS_URL", "redis://a:1,redis://b:2")]).is_err());
        assert!(settings(&[
            ("BATON_REDIS_MODE", "cluster"),
            ("BATON_REDIS_URL", "redis://a:1,redis://b:2")
        ])
        .is_ok());
    }

    #[test]
    fn a_bad_listen_address_says_host_and_port() {
        let err = settings(&[("BATON_LISTEN", "8080")]).unwrap_err();
        assert!(err.to_string().contains("expected host:port"), "{err}");
    }

    #[test]
    fn unknown_variables_get_the_closest_known_one() {
        let unknown = unknown_variables(["BATON_MAX_WAITMS", "BATON_LISTEN", "BATON_URL", "PATH"]);
        assert_eq!(
            unknown,
            [(
                "BATON_MAX_WAITMS".to_owned(),
                "BATON_MAX_WAIT_MS".to_owned()
            )]
        );
    }

    #[test]
    fn flags_mirror_variables_and_win_over_them() {
        let Ok(Invocation::Run(s)) = Cli::from_args(["baton", "--max-wait-ms", "5"]) else {
            panic!("parses");
        };
        assert_eq!(s.max_wait_ms, 5);
        for (variable, flag) in variables() {
            assert_eq!(
                variable,
                format!("BATON_{}", flag.replace('-', "_").to_uppercase())
            );
        }
    }

    #[test]
    fn debug_hides_secrets() {
        let s = settings(&[
            ("BATON_REDIS_URL", "redis://:hunter2@redis:6379"),
            ("BATON_API_TOKENS", "tok-1,tok-2"),
        ])
        .unwrap();
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("tok-"),
            "{shown}"
        );
        assert!(shown.contains("api_tokens: 2"), "{shown}");
    }

    #[test]
    fn passwords_are_redacted_in_every_url_form() {
        for (url, shown) in [
            ("redis://:s3cret@redis:6379/2", "redis://:***@redis:6379/2"),
            (
                "redis://app:s3cret@redis:6379",
                "redis://app:***@redis:6379",
            ),
            (
                "rediss://app:s3cret@redis:6380",
                "rediss://app:***@redis:6380",
            ),
            (
                "redis+unix:///run/redis.sock?db=1&pass=s3cret",
                "redis+unix:///run/redis.sock?db=1&pass=***",
            ),
            (
                "unix:///run/redis.sock?pass=s3cret",
                "unix:///run/redis.sock?pass=***",
            ),
            (
                "redis://a:s3cret@x:1,redis://b:s3cret@y:2",
                "redis://a:***@x:1,redis://b:***@y:2",
            ),
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
        ] {
            assert_eq!(redact_url(url), shown);
        }
    }
}
