//! `baton run`'s command line (clap): the lease or claim to take, COMMAND,
//! and how to stop it.

use std::ffi::OsString;
use std::time::Duration;

use clap::Args;

use crate::cli::duration;
use crate::cli::options::{Connection, LeaseOptions};

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
    #[arg(long, value_name = "SIGNAL", value_parser = crate::cli::run::follow::parse_signal)]
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
