//! The options several subcommands share (clap): where the service is
//! ([`Connection`]), what to acquire and how ([`LeaseOptions`]), the
//! semaphore switch ([`KindOption`]) and how to print ([`Output`],
//! [`LeaseOutput`]); and the kind of lease a call is about ([`kind_of`]).

use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::cli::duration;
use crate::cli::exit::Failure;
use crate::cli::variables::LeaseVariables;
use crate::domain::Kind;

/// Where the service is, and the token to show it.
#[derive(Args, Debug, Clone)]
pub struct Connection {
    /// The baton service
    #[arg(long, env = "BATON_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,

    /// Bearer token, when the service has tokens. Prefer the variable:
    /// arguments show in `ps`
    #[arg(long, env = "BATON_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// What to acquire and how: shared by `run` and `acquire`.
#[derive(Args, Debug, Clone)]
pub struct LeaseOptions {
    /// Who holds the lease, shown to others (default: the CI job's URL in
    /// GitHub Actions, GitLab CI, Jenkins or Buildkite, else user@host)
    #[arg(long, value_name = "LABEL")]
    pub owner: Option<String>,

    /// Lease time to live
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration::parse)]
    pub ttl: Duration,

    /// How long to wait in line (0: try once)
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = duration::parse)]
    pub wait: Duration,

    /// Take a lease of the semaphore NAME, which has N permits (1-100000)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub limit: Option<u32>,

    /// With --limit: how many of the N permits this lease takes (1-N; default 1)
    #[arg(long, value_name = "P", requires = "limit", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub permits: Option<u32>,

    /// Take a shared (read) lease of the lock: any number of shared leases at
    /// once, none beside an exclusive one
    #[arg(long, conflicts_with = "limit")]
    pub shared: bool,

    /// Deploy queues where only the newest matters: a newer --newest-wins
    /// request for NAME replaces this one while it waits in line (exit 79)
    #[arg(long)]
    pub newest_wins: bool,

    /// Place in line, 0 (default) to 9: ahead of every waiter of a lower
    /// priority, behind those of its own; never takes the lease from a holder
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(u8).range(0..=9))]
    pub priority: Option<u8>,

    /// Be granted through a freeze, for this reason (an admin token; the
    /// audit line and the history show it); in line order as usual
    #[arg(long = "override", value_name = "REASON")]
    pub override_reason: Option<String>,

    /// When this request has to wait, ask the holders to finish early (once,
    /// as it joins the line; `baton yield` asks the same; nothing is taken
    /// from them)
    #[arg(long)]
    pub ask_yield: bool,

    /// Wait on this ticket (from `baton enqueue`) instead of joining the line
    #[arg(long, value_name = "ID", env = "BATON_TICKET", hide_env_values = true)]
    pub ticket: Option<String>,

    /// Print only warnings and errors, and nothing at all when the lock was
    /// simply not had (exit 75 says it)
    #[arg(short, long)]
    pub quiet: bool,
}

impl LeaseOptions {
    /// What to acquire: the semaphore NAME with `--limit`, else the lock NAME.
    pub fn kind(&self) -> Kind {
        limited(self.limit).unwrap_or(Kind::Lock)
    }
}

/// The kind a `--limit` names: a semaphore (of that many permits); without
/// one, the command line does not say.
fn limited(limit: Option<u32>) -> Option<Kind> {
    limit.map(|_| Kind::Semaphore)
}

/// How `acquire` prints the lease.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LeaseOutput {
    /// For people
    #[default]
    Text,
    /// The service's JSON
    Json,
    /// BATON_LOCK_NAME=, BATON_LEASE_ID=, BATON_FENCING_TOKEN=, BATON_KIND=
    /// (and BATON_LIMIT=) lines, values as they are: for $GITHUB_ENV or a
    /// GitLab dotenv file, not for a shell to source
    Env,
    /// The same variables as `export KEY='value'` lines, quoted for a shell:
    /// for `eval "$(baton acquire --output shell NAME)"` or `. FILE`
    Shell,
}

/// How the other calls print what they got.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Output {
    /// For people
    #[default]
    Text,
    /// The service's JSON
    Json,
}

/// The semaphore switch of the calls on one lease or name.
#[derive(Args, Debug, Clone)]
pub struct KindOption {
    /// The semaphore NAME (of N permits) instead of the lock NAME (for the
    /// NAME of BATON_LOCK_NAME, BATON_KIND says which)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub limit: Option<u32>,
}

impl KindOption {
    /// The semaphore with `--limit`; without it, not said here.
    pub fn kind(&self) -> Option<Kind> {
        limited(self.limit)
    }
}

/// What a call on `name` is about: the semaphore with `--limit`; else the
/// kind that the variables of a lease give for that very name (`baton
/// acquire --output env` of a semaphore, a `baton run` around this); else
/// `None`: the lock, unless said otherwise.
///
/// # Errors
/// Unreadable lease variables (64).
pub(crate) fn kind_of(option: &KindOption, name: &str) -> Result<Option<Kind>, Failure> {
    if let Some(kind) = option.kind() {
        return Ok(Some(kind));
    }
    Ok(LeaseVariables::from_env(name)?.map(|lease| lease.kind))
}
