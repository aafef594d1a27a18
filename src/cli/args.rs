//! The client subcommands on the command line (clap), beside the service's
//! settings ([`crate::config::Cli`]), and the parse that tells them apart:
//! each subcommand has its own options and `--help`; the settings belong to
//! `baton` without a subcommand, which serves.

use std::ffi::OsString;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, FromArgMatches, Subcommand, ValueEnum};

use super::duration;
use crate::config::{self, Invocation, Settings};
use crate::domain::Kind;

/// What the command line asked for.
pub enum Parsed {
    /// Serve with these settings (no subcommand).
    Serve(Box<Settings>),
    /// A client subcommand.
    Client(ClientCommand),
    /// A half of `baton run`.
    Internal(Internal),
    /// `--help`, `--version`, `help`: print this on stdout and exit 0.
    Print(String),
    /// A client subcommand used wrongly: clap's message, exit 64.
    Usage(clap::Error),
    /// A bad setting or flag of the service: one line, exit 2.
    BadSetting(String),
}

/// The subcommands besides serving.
#[derive(Subcommand, Debug)]
pub enum ClientCommand {
    /// Run a command while holding a lock or a semaphore slot
    #[command(after_help = RUN_AFTER_HELP)]
    Run(Box<RunArgs>),
    /// Take a lock or a semaphore slot and print the lease (release it later)
    #[command(after_help = call_help(&[USAGE_400, UNAVAILABLE_5XX, NOT_ACQUIRED_IN_WAIT, REFUSED_TOKEN, SUPERSEDED_LINE, SIGNALLED]))]
    Acquire(AcquireArgs),
    /// Extend a lease taken with `baton acquire`
    #[command(after_help = call_help(&[USAGE_400, UNAVAILABLE_5XX, LOST_LEASE, REFUSED_TOKEN]))]
    Refresh(RefreshArgs),
    /// Release a lease taken with `baton acquire`
    #[command(after_help = call_help(&[USAGE_400, UNAVAILABLE_5XX, LOST_LEASE, REFUSED_TOKEN]))]
    Release(ReleaseArgs),
    /// Ask the holders of a lock or semaphore to finish early (nothing is
    /// taken from them)
    #[command(after_help = call_help(&[USAGE_400, UNAVAILABLE_5XX, REFUSED_TOKEN]))]
    Yield(YieldArgs),
    /// Show who holds a lock or semaphore and who waits for it
    #[command(after_help = call_help(&[USAGE_400, UNAVAILABLE_5XX, REFUSED_TOKEN]))]
    Status(StatusArgs),
    /// List the held locks (with --limit: the semaphores with holders)
    #[command(after_help = call_help(&[USAGE_400, UNAVAILABLE_5XX, REFUSED_TOKEN]))]
    List(ListArgs),
    /// Freeze a name or a prefix ('deploy-*'): nothing is granted on it while
    /// the freeze holds; waiters keep their place (admin token)
    #[command(after_help = freeze_help(&[USAGE_400, UNAVAILABLE_5XX, FROZEN_NOW, REFUSED_TOKEN]))]
    Freeze(Box<FreezeArgs>),
    /// Delete a freeze: the line is served in order again (admin token)
    #[command(after_help = freeze_help(&[USAGE_400, NO_SUCH_404, UNAVAILABLE_5XX, REFUSED_TOKEN]))]
    Unfreeze(UnfreezeArgs),
    /// List the freezes, with those active now and when the next start
    #[command(after_help = freeze_help(&[USAGE_400, UNAVAILABLE_5XX, REFUSED_TOKEN]))]
    Freezes(FreezesArgs),
    /// Take a ticket: a place in line kept without waiting (`baton run
    /// --ticket` waits on it later)
    #[command(after_help = call_help(&[USAGE_400, UNAVAILABLE_5XX, REFUSED_TOKEN]))]
    Enqueue(Box<EnqueueArgs>),
    /// Give a ticket up (leave the line)
    #[command(after_help = call_help(&[USAGE_400, NO_SUCH_404, UNAVAILABLE_5XX, REFUSED_TOKEN]))]
    Leave(LeaveArgs),
    /// Show who held a lock or semaphore, from when to when, and how each lease ended
    #[command(after_help = call_help(&[USAGE_400, UNAVAILABLE_5XX, REFUSED_TOKEN]))]
    History(HistoryArgs),
    /// Exit 0 when the service at BATON_LISTEN answers /healthz with 200, else 1
    /// (for container health checks without curl)
    Healthcheck(HealthcheckArgs),
    /// Print a shell completion script: `baton completions bash > /etc/bash_completion.d/baton`
    Completions {
        /// The shell to complete in
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): `baton man | man -l -`
    Man {
        /// A subcommand's page instead of baton's (`baton man run`)
        subcommand: Option<String>,
    },
}

/// The halves of `baton run` that are processes of their own: not on the
/// command line people use (nor in its help and completions), started by
/// `baton run` alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Internal {
    /// `baton __guard`: the guard of a `baton run` (`guard.rs`).
    Guard,
    /// `baton __exec FD -- COMMAND...`: COMMAND, started once the guard knows
    /// its group (`launch.rs`).
    Exec { fd: i32, command: Vec<OsString> },
}

impl Internal {
    /// The word that starts the guard: `baton __guard`.
    pub const GUARD: &'static str = "__guard";
    /// The word that starts COMMAND: `baton __exec FD -- COMMAND...`.
    pub const EXEC: &'static str = "__exec";

    /// The internal half `args` (the whole command line) starts, if any.
    fn parse(args: &[OsString]) -> Option<Self> {
        let word = |i: usize| args.get(i).and_then(|a| a.to_str());
        match (word(1)?, args.len()) {
            (Self::GUARD, 2) => Some(Self::Guard),
            (Self::EXEC, 5..) if word(3) == Some("--") => Some(Self::Exec {
                fd: word(2)?.parse().ok()?,
                command: args[4..].to_vec(),
            }),
            _ => None,
        }
    }
}

const EXIT_STATUSES: &str = "Exit status:
  64    bad usage, or the service found the request invalid (400)
  66    no such freeze or ticket (404)
  69    the service could not be reached, or answered 5xx
  75    not acquired within --wait; with freeze --check: the name is frozen
  76    the lease was lost (expired or force-released)
  77    the service refused the token (401, 403)
  79    superseded: a newer --newest-wins request took this one's place in line";

const RUN_AFTER_HELP: &str = "COMMAND runs in a process group of its own, with BATON_LOCK_NAME,
BATON_FENCING_TOKEN and BATON_LEASE_ID (a secret) in its environment; the lease
is refreshed every ttl/3 and held until every process of the group has exited.
If the lease is lost (a refresh answered 404, or refreshes failing), the group
gets SIGTERM, then SIGKILL after --grace, so early that it has ended before the
lease can lapse: SIGTERM goes out --grace plus one refresh round trip (ttl/10,
0.5s to 5s) before the earliest possible expiry. SIGINT, SIGTERM, SIGHUP: the
group is stopped the same way, the lease released, and baton exits 128+N.
Should baton itself be killed (SIGKILL of it or of its process group), a
guard process in a session of its own stops the group the same way and then
releases the lease: COMMAND never runs on beside the next holder.
Inside a `baton run` of NAME (BATON_LOCK_NAME and BATON_LEASE_ID set), a
nested `baton run` of the same NAME runs its command at once only when the
service confirms that lease is still held, of the same kind, and covers what
the nested run asks (an exclusive lease covers --shared, not the other way
round; a semaphore lease covers as many --permits as it has); else it waits
in line like any other. COMMAND also gets BATON_KIND (lock or semaphore) and,
for a semaphore, BATON_LIMIT.
Under a claim (--lock, --semaphore) the same holds for every lease of it: the
loss of any stops COMMAND, --on-yield answers a yield request on any of its
names, and a nested `baton run` of a name the claim holds (BATON_CLAIM_ID set)
runs at once only when the service confirms that the claim still holds that
name in a mode that covers the nested run.
A DURATION is seconds, or with a unit: 90, 1.5, 30s, 10m, 1h. While
acquiring, a service that answers 5xx is retried until --wait runs out (at
most 60s in a row); a URL where nothing answers at all fails at once (69).

Exit status:
  its own  COMMAND ran under the lock and exited
  64       bad usage, or the service found the request invalid (400)
  69       the service could not be reached, or answered 5xx; COMMAND did not run
  75       not acquired within --wait; COMMAND did not run
  76       the lease was lost while COMMAND ran; COMMAND was stopped
  77       the service refused the token (401, 403); COMMAND did not run
  79       superseded: a newer --newest-wins request took this one's place in
           line; COMMAND did not run
  127      COMMAND not found (nothing was acquired)
  128+N    baton got signal N (129 SIGHUP, 130 SIGINT, 143 SIGTERM)";

/// One line of an exit status in a subcommand's help.
const USAGE_400: &str = "  64    bad usage, or the service found the request invalid (400)";
const NO_SUCH_404: &str = "  66    no such freeze or ticket (404)";
const UNAVAILABLE_5XX: &str = "  69    the service could not be reached, or answered 5xx";
const NOT_ACQUIRED_IN_WAIT: &str = "  75    not acquired within --wait";
const LOST_LEASE: &str = "  76    the lease was lost (expired or force-released)";
const REFUSED_TOKEN: &str = "  77    the service refused the token (401, 403)";
const SUPERSEDED_LINE: &str =
    "  79    superseded: a newer --newest-wins request took this one's place in line";
const FROZEN_NOW: &str = "  75    with --check: NAME is frozen now";
const SIGNALLED: &str = "  128+N baton got signal N while waiting (130 SIGINT, 143 SIGTERM)";

/// The end of a one-call subcommand's help: where the service is, and the
/// exit statuses that subcommand can return (only those).
fn call_help(statuses: &[&str]) -> String {
    format!(
        "The service is BATON_URL (or --url), the token BATON_TOKEN.\n\nExit status:\n{}",
        statuses.join("\n")
    )
}

/// The same for the freeze subcommands, with how a window is written.
fn freeze_help(statuses: &[&str]) -> String {
    format!(
        "The service is BATON_URL (or --url), the token BATON_TOKEN.
A freeze is one-off (--for DURATION, or --until TIME [--from TIME]: RFC 3339,
or a date YYYY-MM-DD, which is midnight UTC at the start of that day) or
recurring (--start CRON --end CRON [--timezone ZONE], five-field cron as
GitLab's deploy freezes write them, e.g. --start '0 23 * * 5' --end '0 7 * * 1').
`baton freeze --check NAME` is a deploy job's guard, like GitLab's
$CI_DEPLOY_FREEZE: it prints the freezes that hold NAME now and exits 75, or
exits 0 when none does.

Exit status:\n{}",
        statuses.join("\n")
    )
}

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

/// `baton run`
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub lease: LeaseOptions,

    /// Time between SIGTERM and SIGKILL of COMMAND [default: 5s, or less so
    /// that it fits a short --ttl]
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub grace: Option<Duration>,

    /// Send SIGNAL (e.g. TERM, USR1) to COMMAND's process group when someone
    /// asks this holder to yield (`baton yield NAME`; under a claim, on any
    /// of its names) [default: a line on stderr]
    #[arg(long, value_name = "SIGNAL", value_parser = super::follow::parse_signal)]
    pub on_yield: Option<i32>,

    /// Run this shell command line with `sh -c` instead of COMMAND
    #[arg(short = 'c', value_name = "STRING", conflicts_with = "command")]
    pub shell: Option<String>,

    /// Take the lock NAME as part of one claim of several names (repeat it;
    /// with --shared, every --lock is shared): all of them are held, or none
    #[arg(long = "lock", value_name = "NAME",
        conflicts_with_all = ["limit", "newest_wins", "ask_yield"])]
    pub locks: Vec<String>,

    /// Take PERMITS (default 1) of the semaphore NAME of LIMIT permits as
    /// part of one claim (repeat it): NAME:LIMIT or NAME:LIMIT:PERMITS, e.g.
    /// build-farm:4 or test-envs:3:2 (two permits of test-envs, limit 3). A
    /// NAME that itself ends in :digits is written with its PERMITS:
    /// build:1:4:1 is one permit of build:1, limit 4
    #[arg(long = "semaphore", value_name = "NAME:LIMIT[:PERMITS]",
        conflicts_with_all = ["limit", "newest_wins", "ask_yield"])]
    pub semaphores: Vec<String>,

    /// The lock (or with --limit, the semaphore): any text, e.g. review/app-1.
    /// None with --lock or --semaphore
    #[arg(required_unless_present_any = ["locks", "semaphores"])]
    pub name: Option<String>,

    /// The command and its arguments, after `--`
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

impl RunArgs {
    /// Whether it runs under a claim of several names (`--lock`, `--semaphore`).
    pub fn claims(&self) -> bool {
        !self.locks.is_empty() || !self.semaphores.is_empty()
    }

    /// COMMAND and its arguments. With a claim there is no NAME, so what
    /// the command line took for one is COMMAND's first word.
    pub fn command_line(&self) -> Vec<OsString> {
        match (&self.name, self.claims()) {
            (Some(first), true) => std::iter::once(OsString::from(first))
                .chain(self.command.iter().cloned())
                .collect(),
            _ => self.command.clone(),
        }
    }
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

/// `baton acquire`
#[derive(Args, Debug, Clone)]
pub struct AcquireArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub lease: LeaseOptions,

    /// How to print the lease
    #[arg(long, value_enum, default_value_t)]
    pub output: LeaseOutput,

    /// The lock (or with --limit, the semaphore)
    pub name: String,
}

/// `baton enqueue`
#[derive(Args, Debug, Clone)]
pub struct EnqueueArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub lease: LeaseOptions,

    /// How long the ticket keeps its place (the service's maximum bounds it)
    #[arg(long, value_name = "DURATION", default_value = "1d", value_parser = duration::parse)]
    pub keep: Duration,

    /// When the ticket's turn comes while nobody waits on it, the service
    /// POSTs a signed turn notice here (its host must be one of the
    /// service's BATON_WEBHOOK_HOSTS)
    #[arg(long, value_name = "URL")]
    pub notify: Option<String>,

    /// How to print the ticket (env, shell: BATON_TICKET= with BATON_LOCK_NAME,
    /// BATON_KIND and BATON_LIMIT)
    #[arg(long, value_enum, default_value_t)]
    pub output: LeaseOutput,

    /// The lock (or with --limit, the semaphore)
    pub name: String,
}

/// `baton leave`
#[derive(Args, Debug, Clone)]
pub struct LeaveArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub kind: KindOption,

    /// The lock or semaphore
    #[arg(env = "BATON_LOCK_NAME")]
    pub name: String,

    /// The ticket that `baton enqueue` printed
    #[arg(env = "BATON_TICKET", hide_env_values = true)]
    pub ticket: String,
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

/// `baton refresh`
#[derive(Args, Debug, Clone)]
pub struct RefreshArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub kind: KindOption,

    /// The new time to live (default: the lease's own)
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub ttl: Option<Duration>,

    /// How to print the lease
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,

    /// The lock or semaphore
    #[arg(env = "BATON_LOCK_NAME")]
    pub name: String,

    /// The lease id that `baton acquire` printed
    #[arg(env = "BATON_LEASE_ID", hide_env_values = true)]
    pub id: String,
}

/// `baton release`
#[derive(Args, Debug, Clone)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub kind: KindOption,

    /// Print only warnings and errors
    #[arg(short, long)]
    pub quiet: bool,

    /// The lock or semaphore
    #[arg(env = "BATON_LOCK_NAME")]
    pub name: String,

    /// The lease id that `baton acquire` printed
    #[arg(env = "BATON_LEASE_ID", hide_env_values = true)]
    pub id: String,
}

/// `baton status`
#[derive(Args, Debug, Clone)]
pub struct StatusArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub kind: KindOption,

    /// How to print the status
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,

    /// The lock or semaphore (without --limit: the semaphore when the lock
    /// is not in use and the semaphore is)
    #[arg(env = "BATON_LOCK_NAME")]
    pub name: String,
}

/// `baton yield`
#[derive(Args, Debug, Clone)]
pub struct YieldArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub kind: KindOption,

    /// Why, shown to the holders (at most 200 characters)
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,

    /// Who asks, shown to the holders (default: the CI job's URL in CI,
    /// else user@host)
    #[arg(long, value_name = "TEXT")]
    pub owner: Option<String>,

    /// The lock or semaphore
    pub name: String,
}

/// `baton history`
#[derive(Args, Debug, Clone)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub kind: KindOption,

    /// How many leases to show, newest first (1-100)
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub last: u8,

    /// How to print the history
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,

    /// The lock or semaphore
    #[arg(env = "BATON_LOCK_NAME")]
    pub name: String,
}

/// `baton list`
#[derive(Args, Debug, Clone)]
pub struct ListArgs {
    #[command(flatten)]
    pub connection: Connection,

    #[command(flatten)]
    pub kind: KindOption,

    /// Only names that start with this
    #[arg(long, default_value = "")]
    pub prefix: String,

    /// How to print the list
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
}

/// `baton healthcheck`
#[derive(Args, Debug, Clone)]
pub struct HealthcheckArgs {
    /// The address the service listens on (host:port)
    #[arg(long, env = "BATON_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
}

/// `baton freeze`
#[derive(Args, Debug, Clone)]
pub struct FreezeArgs {
    #[command(flatten)]
    pub connection: Connection,

    /// A one-off freeze of this long, from now (e.g. 2h, 3d is 72h)
    #[arg(long = "for", value_name = "DURATION", value_parser = duration::parse,
        conflicts_with_all = ["until", "start"])]
    pub for_: Option<Duration>,

    /// A one-off freeze until this time: RFC 3339 (2026-12-27T08:00:00Z), or
    /// a date (2026-12-27: midnight UTC at the start of that day)
    #[arg(long, value_name = "TIME", conflicts_with = "start", value_parser = moment)]
    pub until: Option<String>,

    /// With --until: from this time instead of now (RFC 3339, or a date:
    /// midnight UTC at its start)
    #[arg(long, value_name = "TIME", requires = "until", value_parser = moment)]
    pub from: Option<String>,

    /// A recurring freeze: a five-field cron expression for each start (e.g. '0 23 * * 5')
    #[arg(long, value_name = "CRON", requires = "end")]
    pub start: Option<String>,

    /// A recurring freeze: a five-field cron expression for each end (e.g. '0 7 * * 1')
    #[arg(long, value_name = "CRON", requires = "start")]
    pub end: Option<String>,

    /// The IANA time zone of --start and --end (default UTC)
    #[arg(long, value_name = "ZONE", requires = "start")]
    pub timezone: Option<String>,

    /// Only locks, or only semaphores (default: both)
    #[arg(long, value_parser = ["lock", "semaphore"])]
    pub kind: Option<String>,

    /// Why, shown to everyone it refuses
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,

    /// How to print the freeze
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,

    /// Make no freeze: check whether MATCH, a name, is frozen now (with
    /// --kind, as that kind). Frozen: print the freezes that hold it, exit
    /// 75; not frozen: exit 0. A deploy job's guard, like GitLab's
    /// $CI_DEPLOY_FREEZE (any token that may read the name)
    #[arg(long, conflicts_with_all = ["for_", "until", "from", "start", "end", "timezone", "reason"])]
    pub check: bool,

    /// The name to freeze, or a prefix ending in '*' (quote it: 'deploy-*');
    /// with --check, the name to check
    #[arg(value_name = "MATCH")]
    pub pattern: String,
}

/// A moment of `--until` or `--from`: a date alone (`2026-12-06`) is
/// midnight UTC at its start (`2026-12-06T00:00:00Z`); anything else goes to
/// the service as it is, which reads RFC 3339 and names what it refuses.
fn moment(raw: &str) -> Result<String, String> {
    let raw = raw.trim();
    if raw.len() == 10 && raw.as_bytes().get(4) == Some(&b'-') {
        return chrono::NaiveDate::parse_from_str(raw, "%Y-%m-%d")
            .map(|date| format!("{date}T00:00:00Z"))
            .map_err(|err| format!("not a date YYYY-MM-DD ({err})"));
    }
    Ok(raw.to_owned())
}

/// `baton unfreeze`
#[derive(Args, Debug, Clone)]
pub struct UnfreezeArgs {
    #[command(flatten)]
    pub connection: Connection,

    /// The freeze's id, as `baton freeze` or `baton freezes` printed it
    pub id: String,
}

/// `baton freezes`
#[derive(Args, Debug, Clone)]
pub struct FreezesArgs {
    #[command(flatten)]
    pub connection: Connection,

    /// How to print the list
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
}

/// The whole command line: the service's settings, and the subcommands.
pub fn command() -> clap::Command {
    ClientCommand::augment_subcommands(config::Cli::command())
        // Whatever the file is called (the launcher caches it as baton-<sha256>).
        .bin_name("baton")
        .args_conflicts_with_subcommands(true)
        .after_help(format!(
            "Logs go to stderr, filtered by RUST_LOG (default: info).\n\
             `baton help COMMAND` or `baton COMMAND --help` for a subcommand.\n\n\
             The client subcommands exit with the status they report:\n{}",
            EXIT_STATUSES.trim_start_matches("Exit status:\n")
        ))
}

/// Reads the command line (and, to serve, the environment).
pub fn parse(args: Vec<OsString>) -> Parsed {
    if let Some(internal) = Internal::parse(&args) {
        return Parsed::Internal(internal);
    }
    // A client subcommand is parsed without the service's variables (a bad
    // `BATON_MAX_WAIT_MS` in a CI job's environment does not stop a client).
    let client = args
        .get(1)
        .and_then(|a| a.to_str())
        .is_some_and(ClientCommand::has_subcommand);
    let mut full = command();
    if client {
        // The service's settings are not read for a client subcommand.
        full = full.mut_args(|arg| arg.env(None::<&'static str>));
    }
    match full.clone().try_get_matches_from(&args) {
        Ok(matches) if matches.subcommand_name().is_some() => {
            match ClientCommand::from_arg_matches(&matches) {
                Ok(command) => Parsed::Client(command),
                Err(err) => Parsed::Usage(err.with_cmd(&full)),
            }
        }
        Ok(_) => match config::Cli::from_args(args) {
            Ok(Invocation::Run(settings)) => Parsed::Serve(settings),
            Ok(Invocation::Print(text)) => Parsed::Print(text),
            Err(err) => Parsed::BadSetting(err.to_string()),
        },
        Err(err)
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            Parsed::Print(err.render().to_string())
        }
        Err(err) if client => Parsed::Usage(err),
        Err(err) => Parsed::BadSetting(config::one_line(&full, &err).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_args(args: &[&str]) -> Parsed {
        parse(args.iter().map(OsString::from).collect())
    }

    #[test]
    fn the_command_line_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn run_takes_options_a_name_and_a_command() {
        let Parsed::Client(ClientCommand::Run(run)) = parse_args(&[
            "baton", "run", "--ttl", "3s", "--wait", "0", "deploy/x", "--", "make", "-j", "2",
        ]) else {
            panic!("parses");
        };
        assert_eq!(run.name.as_deref(), Some("deploy/x"));
        assert_eq!(run.lease.ttl, Duration::from_secs(3));
        assert_eq!(run.lease.wait, Duration::ZERO);
        assert_eq!(run.command, ["make", "-j", "2"]);
        assert!(run.grace.is_none() && run.shell.is_none());
        let Parsed::Client(ClientCommand::Run(run)) =
            parse_args(&["baton", "run", "x", "-c", "echo hi && true"])
        else {
            panic!("parses -c");
        };
        assert_eq!(run.shell.as_deref(), Some("echo hi && true"));
        assert!(matches!(
            parse_args(&["baton", "run", "x", "-c", "true", "--", "false"]),
            Parsed::Usage(_)
        ));
    }

    #[test]
    fn run_takes_a_claim_of_several_names() {
        let Parsed::Client(ClientCommand::Run(run)) = parse_args(&[
            "baton",
            "run",
            "--lock",
            "a",
            "--lock",
            "b",
            "--semaphore",
            "farm:4",
            "--",
            "make",
            "x",
        ]) else {
            panic!("parses a claim");
        };
        assert!(run.claims());
        assert_eq!((run.locks.len(), run.semaphores.len()), (2, 1));
        assert_eq!(run.command_line(), ["make", "x"]);
        let Parsed::Client(ClientCommand::Run(run)) =
            parse_args(&["baton", "run", "--lock", "a", "--lock", "b", "-c", "true"])
        else {
            panic!("parses a claim with -c");
        };
        assert!(run.name.is_none() && run.command_line().is_empty());
        assert!(matches!(
            parse_args(&["baton", "run", "--lock", "a", "--limit", "2", "--", "true"]),
            Parsed::Usage(_)
        ));
    }

    #[test]
    fn shared_is_for_locks_and_permits_for_semaphores() {
        let Parsed::Client(ClientCommand::Run(run)) =
            parse_args(&["baton", "run", "--shared", "docs", "--", "true"])
        else {
            panic!("parses --shared");
        };
        assert!(run.lease.shared && run.lease.limit.is_none());
        let Parsed::Client(ClientCommand::Acquire(acquire)) =
            parse_args(&["baton", "acquire", "--limit", "5", "--permits", "3", "pool"])
        else {
            panic!("parses --permits");
        };
        assert_eq!(
            (acquire.lease.limit, acquire.lease.permits),
            (Some(5), Some(3))
        );
        for misuse in [
            &["baton", "run", "--permits", "2", "x", "--", "true"][..],
            &[
                "baton", "run", "--shared", "--limit", "2", "x", "--", "true",
            ],
            &["baton", "acquire", "--limit", "2", "--permits", "0", "x"],
        ] {
            assert!(matches!(parse_args(misuse), Parsed::Usage(_)), "{misuse:?}");
        }
    }

    #[test]
    fn the_halves_of_baton_run_are_parsed_apart_and_hidden() {
        let Parsed::Internal(Internal::Exec { fd, command: run }) =
            parse_args(&["baton", "__exec", "7", "--", "make", "--help"])
        else {
            panic!("parses __exec");
        };
        assert_eq!((fd, run), (7, vec!["make".into(), "--help".into()]));
        assert!(matches!(
            parse_args(&["baton", "__guard"]),
            Parsed::Internal(Internal::Guard)
        ));
        for not_one in [
            &["baton", "__exec", "x", "--", "make"][..],
            &["baton", "__exec", "7", "make"],
            &["baton", "__exec", "7", "--"],
            &["baton", "__guard", "x"],
        ] {
            assert!(
                !matches!(parse_args(not_one), Parsed::Internal(_)),
                "{not_one:?}"
            );
        }
        let mut script = Vec::new();
        clap_complete::generate(
            clap_complete::Shell::Bash,
            &mut command(),
            "baton",
            &mut script,
        );
        let script = String::from_utf8(script).unwrap();
        assert!(
            script.contains("acquire") && !script.contains("__guard") && !script.contains("__exec")
        );
    }

    #[test]
    fn every_subcommand_but_help_is_a_client_s_and_the_halves_are_none() {
        let full = command();
        let names: Vec<&str> = full
            .get_subcommands()
            .map(clap::Command::get_name)
            .collect();
        assert!(
            names.contains(&"run") && names.contains(&"man"),
            "{names:?}"
        );
        for name in names.iter().filter(|name| **name != "help") {
            assert!(ClientCommand::has_subcommand(name), "{name}");
        }
        for half in [Internal::GUARD, Internal::EXEC] {
            assert!(!names.contains(&half) && !ClientCommand::has_subcommand(half));
        }
    }

    #[test]
    fn a_client_misuse_keeps_clap_s_suggestion() {
        let Parsed::Usage(err) = parse_args(&["baton", "acquire", "--tll", "3s", "x"]) else {
            panic!("a usage error");
        };
        assert!(
            err.render().to_string().contains("--ttl"),
            "{}",
            err.render()
        );
    }

    #[test]
    fn the_service_s_settings_are_not_the_subcommands_options() {
        assert!(matches!(
            parse_args(&["baton", "run", "--max-wait-ms", "5", "x", "--", "true"]),
            Parsed::Usage(_)
        ));
        assert!(matches!(parse_args(&["baton"]), Parsed::Serve(_)));
        assert!(matches!(
            parse_args(&["baton", "help", "run"]),
            Parsed::Print(_)
        ));
    }
}
