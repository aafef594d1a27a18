//! The client subcommands on the command line (clap), beside the service's
//! settings ([`crate::config::Cli`]), and the parse that tells them apart:
//! each subcommand's options are in its own file (`cmd/`, `run/args.rs`);
//! the settings belong to `baton` without a subcommand, which serves.

use std::ffi::OsString;

use clap::error::ErrorKind;
use clap::{CommandFactory, FromArgMatches, Subcommand};

use crate::cli::cmd::acquire::AcquireArgs;
use crate::cli::cmd::ask_yield::YieldArgs;
use crate::cli::cmd::freeze::{FreezeArgs, FreezesArgs, UnfreezeArgs};
use crate::cli::cmd::healthcheck::HealthcheckArgs;
use crate::cli::cmd::history::HistoryArgs;
use crate::cli::cmd::lease::{RefreshArgs, ReleaseArgs};
use crate::cli::cmd::list::ListArgs;
use crate::cli::cmd::status::StatusArgs;
use crate::cli::cmd::ticket::{EnqueueArgs, LeaveArgs};
use crate::cli::help::{
    call_help, freeze_help, EXIT_STATUSES, FROZEN_NOW, LOST_LEASE, NOT_ACQUIRED_IN_WAIT,
    NO_SUCH_404, REFUSED_TOKEN, RUN_AFTER_HELP, SIGNALLED, SUPERSEDED_LINE, UNAVAILABLE_5XX,
    USAGE_400,
};
use crate::cli::run::args::RunArgs;
use crate::cli::run::halves::Internal;
use crate::config::{self, Invocation, Settings};

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
    use std::time::Duration;

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
