//! The client: `baton run`, `acquire`, `refresh`, `release`, `status`,
//! `yield`, `list`, `freeze`, `unfreeze`, `freezes`, `healthcheck`,
//! `completions` and `man`, beside the service's own
//! command line. It talks to a baton service over HTTP only; nothing of the
//! server runs in a client process.
//!
//! Two hidden subcommands are halves of `baton run`: `__guard` (the process
//! that stops COMMAND should baton run be killed or stopped, `guard.rs`) and
//! `__exec` (COMMAND, started once the guard knows its group, `launch.rs`).

mod acquired;
mod answer;
mod args;
mod ask_yield;
mod attempts;
mod calls;
mod claim;
mod clock;
mod docs;
mod duration;
mod exit;
mod follow;
mod freezes;
mod group;
mod guard;
mod healthcheck;
mod history;
mod http;
mod launch;
mod line;
mod messages;
mod nested;
mod owner;
mod progress;
mod request;
mod run;
mod signals;
mod target;
mod ticket;
mod timing;
mod variables;
mod waiting;

use std::process::ExitCode;

pub use args::{command, parse, ClientCommand, Internal, Parsed};
pub use exit::Failure;

/// Runs a half of `baton run` to its end, without an async runtime (the
/// guard makes its own for its one call; `__exec` becomes COMMAND).
pub fn internal(half: Internal) -> ExitCode {
    match half {
        Internal::Guard => ExitCode::from(guard::watch()),
        Internal::Exec { fd, command } => finish(Err(launch::exec_when_told(fd, &command))),
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
                run::run(*args).await
            }
            ClientCommand::Acquire(args) => {
                messages::set_quiet(args.lease.quiet);
                calls::acquire(args).await.map(|()| 0)
            }
            ClientCommand::Refresh(args) => calls::refresh(args).await.map(|()| 0),
            ClientCommand::Release(args) => calls::release(args).await.map(|()| 0),
            ClientCommand::Yield(args) => ask_yield::ask_yield(args).await.map(|()| 0),
            ClientCommand::Status(args) => calls::status(args).await.map(|()| 0),
            ClientCommand::List(args) => calls::list(args).await.map(|()| 0),
            ClientCommand::Freeze(args) => freezes::freeze(*args).await.map(|()| 0),
            ClientCommand::Unfreeze(args) => freezes::unfreeze(args).await.map(|()| 0),
            ClientCommand::Freezes(args) => freezes::list(args).await.map(|()| 0),
            ClientCommand::Enqueue(args) => ticket::enqueue(*args).await.map(|()| 0),
            ClientCommand::Leave(args) => ticket::leave(args).await.map(|()| 0),
            ClientCommand::History(args) => history::history(args).await.map(|()| 0),
            ClientCommand::Healthcheck(args) => {
                if healthcheck::healthy(&args.listen).await {
                    Ok(0)
                } else {
                    Err(Failure::new(
                        1,
                        format!("{} does not answer /healthz with 200", args.listen),
                    ))
                }
            }
            ClientCommand::Completions { shell } => docs::completions(shell).map(|()| 0),
            ClientCommand::Man { subcommand } => docs::man(subcommand.as_deref()).map(|()| 0),
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
