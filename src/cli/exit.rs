//! The exit statuses of the client commands (sysexits where one fits), and
//! the failure that carries one with the last line to print.

use std::fmt;

/// Bad usage, or the service found the request invalid (400). EX_USAGE.
pub const USAGE: u8 = 64;
/// No such freeze or ticket: the service answered 404 for the one named.
/// EX_NOINPUT (bad usage, 64, is for what is wrong on the command line).
pub const NO_SUCH: u8 = 66;
/// The service could not be reached, or answered 5xx. EX_UNAVAILABLE.
pub const UNAVAILABLE: u8 = 69;
/// Not acquired within `--wait`. EX_TEMPFAIL.
pub const NOT_ACQUIRED: u8 = 75;
/// The lease was lost (expired, force-released). EX_PROTOCOL's number.
pub const LOST: u8 = 76;
/// The service refused the token: 401 or 403. EX_NOPERM.
pub const REFUSED: u8 = 77;
/// A newer `--newest-wins` request took this one's place in line.
pub const SUPERSEDED: u8 = 79;
/// What was to be printed could not be written (not a closed pipe). EX_IOERR.
pub const IO_ERROR: u8 = 74;
/// COMMAND not found, as a shell says it.
pub const NOT_FOUND: u8 = 127;

/// Why a client command stops: its exit status and one line for stderr
/// (none when the message is empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub status: u8,
    pub message: String,
}

impl Failure {
    pub fn new(status: u8, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(USAGE, message)
    }

    /// An end with `status` and nothing to say (the status says it).
    pub fn silent(status: u8) -> Self {
        Self::new(status, "")
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// 128 + N for a process that ended on signal N, as shells report it.
pub fn signal_status(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(255)
}
