//! The client: `baton run`, `acquire`, `refresh`, `release`, `status`,
//! `list`, `healthcheck`, `completions` and `man`, beside the service's own
//! command line. It talks to a baton service over HTTP only; nothing of the
//! server runs in a client process.

mod args;
mod calls;
mod clock;
mod docs;
mod duration;
mod exit;
mod group;
mod healthcheck;
mod http;
mod line;
mod messages;
mod owner;
mod run;
mod signals;

use std::process::ExitCode;

pub use args::{command, parse, ClientCommand, Parsed};
pub use exit::Failure;

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
                run::run(args).await
            }
            ClientCommand::Acquire(args) => {
                messages::set_quiet(args.lease.quiet);
                calls::acquire(args).await.map(|()| 0)
            }
            ClientCommand::Refresh(args) => calls::refresh(args).await.map(|()| 0),
            ClientCommand::Release(args) => calls::release(args).await.map(|()| 0),
            ClientCommand::Status(args) => calls::status(args).await.map(|()| 0),
            ClientCommand::List(args) => calls::list(args).await.map(|()| 0),
            ClientCommand::Healthcheck(args) => {
                if healthcheck::healthy(&args.listen).await {
                    Ok(0)
                } else {
                    eprintln!("baton: {} does not answer /healthz with 200", args.listen);
                    Ok(1)
                }
            }
            ClientCommand::Completions { shell } => {
                docs::completions(shell);
                Ok(0)
            }
            ClientCommand::Man { subcommand } => docs::man(subcommand.as_deref()).map(|()| 0),
        }
    });
    match outcome {
        Ok(status) => ExitCode::from(status),
        Err(failure) => {
            messages::error(&failure.message);
            ExitCode::from(failure.status)
        }
    }
}
