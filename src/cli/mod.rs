//! The client: `baton run`, `acquire`, `refresh`, `release`, `status`,
//! `yield`, `list`, `freeze`, `unfreeze`, `freezes`, `healthcheck`,
//! `completions` and `man`, beside the service's own
//! command line. It talks to a baton service over HTTP only; nothing of the
//! server runs in a client process.
//!
//! Two hidden subcommands are halves of `baton run`: `__guard` (the process
//! that stops COMMAND should baton run be killed or stopped, `run/guard.rs`)
//! and `__exec` (COMMAND, started once the guard knows its group,
//! `run/launch.rs`).
//!
//! # Layout
//! From the top down: this file runs a subcommand; `command.rs` parses the
//! command line; `cmd/` has a file per subcommand (its options and its call)
//! and `run/` is `baton run`; `line/` acquires one lease in the service's
//! line, for `acquire`, `enqueue` and `run`. Below them all: `attempts.rs`
//! (the one acquire loop's rules: deadline, steps, pauses, retries),
//! `answer.rs` (every answer classified once, and the exit status each
//! means), `http.rs`, `options.rs` (the options several subcommands share),
//! `help.rs` (the help texts), `messages.rs` (printing), and small helpers.

mod answer;
mod attempts;
mod clock;
mod cmd;
mod command;
mod duration;
mod exit;
mod help;
mod http;
mod line;
mod messages;
mod options;
mod owner;
mod run;
mod signals;
mod target;
mod variables;

use std::process::ExitCode;

pub use command::{command, parse, ClientCommand, Parsed};
pub use exit::Failure;
pub use run::halves::Internal;

/// Runs a half of `baton run` to its end, without an async runtime (the
/// guard makes its own for its one call; `__exec` becomes COMMAND).
pub fn internal(half: Internal) -> ExitCode {
    match half {
        Internal::Guard => ExitCode::from(run::guard::watch()),
        Internal::Exec { fd, command } => finish(Err(run::launch::exec_when_told(fd, &command))),
    }
}

/// Runs a client subcommand to its exit status.
pub fn main(command: ClientCommand) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            messages::error(format!("cannot start the async runtime: {err}"));
            return ExitCode::from(exit::UNAVAILABLE);
        }
    };
    let outcome = runtime.block_on(async move {
        match command {
            ClientCommand::Run(args) => {
                messages::set_quiet(args.lease.quiet);
                run::supervisor::run(*args).await
            }
            ClientCommand::Acquire(args) => {
                messages::set_quiet(args.lease.quiet);
                cmd::acquire::acquire(args).await.map(|()| 0)
            }
            ClientCommand::Refresh(args) => cmd::lease::refresh(args).await.map(|()| 0),
            ClientCommand::Release(args) => cmd::lease::release(args).await.map(|()| 0),
            ClientCommand::Yield(args) => cmd::ask_yield::ask_yield(args).await.map(|()| 0),
            ClientCommand::Status(args) => cmd::status::status(args).await.map(|()| 0),
            ClientCommand::List(args) => cmd::list::list(args).await.map(|()| 0),
            ClientCommand::Freeze(args) => cmd::freeze::freeze(*args).await.map(|()| 0),
            ClientCommand::Unfreeze(args) => cmd::freeze::unfreeze(args).await.map(|()| 0),
            ClientCommand::Freezes(args) => cmd::freeze::list(args).await.map(|()| 0),
            ClientCommand::Enqueue(args) => cmd::ticket::enqueue(*args).await.map(|()| 0),
            ClientCommand::Leave(args) => cmd::ticket::leave(args).await.map(|()| 0),
            ClientCommand::History(args) => cmd::history::history(args).await.map(|()| 0),
            ClientCommand::Healthcheck(args) => {
                if cmd::healthcheck::healthy(&args.listen).await {
                    Ok(0)
                } else {
                    Err(Failure::new(
                        1,
                        format!("{} does not answer /healthz with 200", args.listen),
                    ))
                }
            }
            ClientCommand::Completions { shell } => {
                cmd::docs::completions(shell, command::command()).map(|()| 0)
            }
            ClientCommand::Man { subcommand } => {
                cmd::docs::man(subcommand.as_deref(), command::command()).map(|()| 0)
            }
        }
    });
    finish(outcome)
}

/// The exit status of an outcome, after its last line on stderr.
fn finish(outcome: Result<u8, Failure>) -> ExitCode {
    match outcome {
        Ok(status) => ExitCode::from(status),
        Err(failure) => {
            // With --quiet, not getting the lock is said by exit 75 alone.
            let not_had = failure.status == exit::NOT_ACQUIRED && messages::quiet();
            if !failure.message.is_empty() && !not_had {
                messages::error(&failure.message);
            }
            ExitCode::from(failure.status)
        }
    }
}

/// Prints what `baton --help` (or `--version`) says, ending with a newline: 0,
/// also when a closed pipe cut it short; 74 when stdout cannot be written.
pub fn print_help(text: &str) -> ExitCode {
    let newline = if text.ends_with('\n') { "" } else { "\n" };
    finish(messages::show(format!("{text}{newline}")).map(|()| 0))
}
