//! What the client commands tell people, on stderr: progress (silenced by
//! `--quiet`), warnings and the last line of a failure. Never a lease id or
//! a token.

use std::sync::atomic::{AtomicBool, Ordering};

static QUIET: AtomicBool = AtomicBool::new(false);

/// `--quiet`: progress is not shown; warnings and errors are.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Progress: `baton: acquired lock 'x' ...`.
pub fn say(message: impl AsRef<str>) {
    if !QUIET.load(Ordering::Relaxed) {
        eprintln!("baton: {}", message.as_ref());
    }
}

pub fn warn(message: impl AsRef<str>) {
    eprintln!("baton: warning: {}", message.as_ref());
}

pub fn error(message: impl AsRef<str>) {
    eprintln!("baton: error: {}", message.as_ref());
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
