//! What the client commands tell people: progress on stderr (silenced by
//! `--quiet`), warnings and the last line of a failure, and what they print
//! on stdout. Never a lease id or a token, except where `acquire` is asked
//! to print the lease.
//!
//! Neither stream may end the process: a closed stderr (a CI log collector
//! gone) loses the message, not the lease, and stdout cut short by a closed
//! pipe (`baton --help | head -1`) ends the command quietly.

use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::cli::exit::{Failure, IO_ERROR};

static QUIET: AtomicBool = AtomicBool::new(false);

/// `--quiet`: progress is not shown; warnings and errors are.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether `--quiet` was given.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// One line on stderr; a stderr that cannot be written to loses it.
fn line(text: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// Progress: `baton: acquired lock 'x' ...`.
pub fn say(message: impl AsRef<str>) {
    if !quiet() {
        line(format_args!("baton: {}", message.as_ref()));
    }
}

pub fn warn(message: impl AsRef<str>) {
    line(format_args!("baton: warning: {}", message.as_ref()));
}

pub fn error(message: impl AsRef<str>) {
    line(format_args!("baton: error: {}", message.as_ref()));
}

/// Why stdout took not all of what was printed.
#[derive(Debug)]
pub enum NotPrinted {
    /// Nobody reads it any more (a closed pipe): nothing to say about it.
    Closed,
    /// Writing failed otherwise (a full disk).
    Failed(std::io::Error),
}

impl NotPrinted {
    /// How a command that only prints ends: quietly (0) when nobody reads,
    /// else with the error (74).
    pub fn into_failure(self) -> Failure {
        match self {
            NotPrinted::Closed => Failure::silent(0),
            NotPrinted::Failed(err) => {
                Failure::new(IO_ERROR, format!("cannot write the output: {err}"))
            }
        }
    }
}

/// Writes `text` to stdout, as it is.
///
/// # Errors
/// A closed pipe, or another write error.
pub fn print(text: impl AsRef<[u8]>) -> Result<(), NotPrinted> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_ref())
        .and_then(|()| out.flush())
        .map_err(|err| match err.kind() {
            ErrorKind::BrokenPipe => NotPrinted::Closed,
            _ => NotPrinted::Failed(err),
        })
}

/// Writes `text` to stdout for a command that only prints.
///
/// # Errors
/// See [`NotPrinted::into_failure`].
pub fn show(text: impl AsRef<[u8]>) -> Result<(), Failure> {
    print(text).map_err(NotPrinted::into_failure)
}

/// `SIGTERM` for 15, for messages.
pub fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGKILL => "SIGKILL".into(),
        other => format!("signal {other}"),
    }
}
