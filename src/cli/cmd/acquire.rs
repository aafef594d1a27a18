//! `baton acquire`: takes a lease in one step of a job and prints it
//! (text, JSON, or variables), for `refresh` and `release` in later steps:
//! the lease goes from step to step in the variables of
//! [`crate::cli::variables`], a semaphore's as a lock's.

use clap::Args;
use reqwest::Method;

use crate::cli::duration::human;
use crate::cli::exit::{signal_status, Failure, UNAVAILABLE};
use crate::cli::http::{call, Service};
use crate::cli::line;
use crate::cli::line::request::Request;
use crate::cli::messages::{print, say, NotPrinted};
use crate::cli::options::{Connection, LeaseOptions, LeaseOutput};
use crate::cli::signals::Signals;
use crate::cli::target::Target;
use crate::cli::variables::LeaseVariables;

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

/// `baton acquire`: prints the lease.
///
/// # Errors
/// As `baton run` before COMMAND; the lease could not be printed (it is
/// released then: nobody has its id).
pub async fn acquire(args: AcquireArgs) -> Result<(), Failure> {
    let options = &args.lease;
    let kind = options.kind();
    let target = Target::new(kind, &args.name)?;
    let service = Service::new(&args.connection.url, args.connection.token.as_deref())?;
    let request = Request::new(&target, options.ttl, options);
    let mut signals = Signals::catch()
        .map_err(|err| Failure::new(UNAVAILABLE, format!("cannot catch signals: {err}")))?;
    let lease = line::acquire(&service, &request, &mut signals).await?;
    let token = lease.body.fencing_token();
    let variables = LeaseVariables {
        name: target.name.to_string(),
        id: lease.body.id().to_owned(),
        fencing_token: Some(token),
        kind,
        limit: options.limit,
    };
    let printed = match args.output {
        LeaseOutput::Json => print(format!("{}\n", lease.json)),
        LeaseOutput::Env => print(variables.env_lines()),
        LeaseOutput::Shell => print(variables.shell_lines()),
        LeaseOutput::Text => print(format!(
            "acquired {target}: lease {}, fencing token {token}, expires at {}\n",
            lease.body.id(),
            lease.body.expires_at()
        )),
    };
    if let Err(not_printed) = printed {
        // Nobody got the lease id, so nobody could release it: do it now.
        let path = target.lease_path(lease.body.id());
        let released = matches!(
            call(&service, Method::DELETE, &path, None).await,
            Ok(answer) if answer.status == 204
        );
        let what = if released {
            "released it"
        } else {
            "it frees itself when its ttl runs out"
        };
        return Err(match not_printed {
            NotPrinted::Closed => Failure::new(
                signal_status(libc::SIGPIPE),
                format!("acquired {target}, but nobody read the lease (a closed pipe): {what}"),
            ),
            NotPrinted::Failed(err) => Failure::new(
                crate::cli::exit::IO_ERROR,
                format!("acquired {target}, but cannot write the lease ({err}): {what}"),
            ),
        });
    }
    say(format!(
        "acquired {target} (fencing token {token}); it expires unless refreshed within {}",
        human(options.ttl)
    ));
    Ok(())
}
