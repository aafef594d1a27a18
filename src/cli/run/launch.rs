//! Starting COMMAND so that it runs only once its guard knows its process
//! group: `baton run` starts `baton __exec FD -- COMMAND...` in a new group,
//! tells the guard that group, and only then writes one byte to the pipe at
//! FD, on which the process execs COMMAND (same pid, same group). Should
//! baton run die before that byte, the pipe ends and COMMAND never starts:
//! there is no moment at which COMMAND runs unknown to the guard.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use crate::cli::exit::{signal_status, Failure, NOT_FOUND};
use crate::cli::run::halves::Internal;

/// A pipe whose ends are closed on exec (so no child holds one unless it is
/// handed down on purpose): `(read, write)`.
///
/// # Errors
/// No file descriptors left.
pub fn pipe() -> std::io::Result<(std::fs::File, std::fs::File)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made, and are owned here alone.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((read.into(), write.into()))
}

/// `baton __exec FD -- PROGRAM ARGS...` in a process group of its own, FD
/// being `go` (the read end of the pipe baton run writes the byte to).
pub fn command(
    program: &OsString,
    args: &[OsString],
    go: &impl AsRawFd,
) -> tokio::process::Command {
    let fd = go.as_raw_fd();
    let mut command = tokio::process::Command::new("/proc/self/exe");
    command
        .arg0("baton")
        .arg(Internal::EXEC)
        .arg(fd.to_string())
        .arg("--")
        .arg(program)
        .args(args)
        .process_group(0);
    // SAFETY: fcntl is async-signal-safe; it only makes the child's copy of
    // `fd` (std's pipes are close-on-exec) survive the exec.
    unsafe {
        command.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
}

/// `baton __exec FD -- PROGRAM ARGS...`: waits for the byte on FD, then
/// becomes PROGRAM. Returns only when it may not or cannot.
pub fn exec_when_told(fd: i32, command: &[OsString]) -> Failure {
    // SAFETY: baton run handed this fd down for this process alone, and
    // nothing else here owns it.
    let mut go = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let mut byte = [0u8; 1];
    if !matches!(go.read(&mut byte), Ok(1)) {
        // baton run was killed before COMMAND could start: the exit status
        // of a SIGKILL, for nobody waits for this one.
        return Failure::new(
            signal_status(libc::SIGKILL),
            "baton run ended before COMMAND could start: not running it",
        );
    }
    drop(go);
    let Some((program, args)) = command.split_first() else {
        return Failure::usage("no COMMAND");
    };
    let err = std::process::Command::new(program).args(args).exec();
    Failure::new(
        NOT_FOUND,
        format!("cannot run {}: {err}", program.to_string_lossy()),
    )
}
