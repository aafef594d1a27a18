//! COMMAND's process group: whether any process of it still runs, and
//! signals to all of it, from `baton run` (the group's parent) or from its
//! guard (not a parent of any of it).
//!
//! A process of the group whose parent exits is handed to `baton run` (a
//! child subreaper) instead of init, so that it can be reaped here: a zombie
//! would otherwise answer `kill(-pgid, 0)` as if it still ran, until an init
//! that may never reap it (a container's PID 1) does.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Orphans of COMMAND's group become this process's children.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_CHILD_SUBREAPER takes one integer argument.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// Sends `signal` to every process of the group.
pub fn signal(pgid: i32, signal: i32) {
    // SAFETY: killpg has no memory effects; a gone group answers ESRCH.
    unsafe {
        libc::killpg(pgid, signal);
    }
}

/// Whether a process of the group still runs (zombies of it are reaped
/// first). Call only once COMMAND itself has been waited for.
pub fn alive(pgid: i32) -> bool {
    loop {
        // SAFETY: a null status pointer is allowed; WNOHANG never blocks.
        let reaped = unsafe { libc::waitpid(-pgid, std::ptr::null_mut(), libc::WNOHANG) };
        if reaped <= 0 {
            break;
        }
    }
    // SAFETY: signal 0 only checks that the group exists.
    if unsafe { libc::killpg(pgid, 0) } == 0 {
        return true;
    }
    std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Whether a process of the group still runs, asked by a process that is
/// not the parent of any of it (the guard): a zombie of the group has ended
/// (whoever its parent is now reaps it), so it does not count.
pub fn runs(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks that the group exists.
    if unsafe { libc::killpg(pgid, 0) } != 0
        && std::io::Error::last_os_error().raw_os_error() != Some(libc::EPERM)
    {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
        .filter_map(|stat| ProcStat::parse(&stat))
        .any(|stat| stat.pgrp == pgid && !matches!(stat.state, 'Z' | 'X'))
}

/// What `/proc/PID/stat` says of a process's state and group.
#[derive(Debug, PartialEq, Eq)]
struct ProcStat {
    state: char,
    pgrp: i32,
}

impl ProcStat {
    /// `PID (COMM) STATE PPID PGRP ...`; COMM may hold spaces and `)`, so
    /// the fields are those after its last `)`.
    fn parse(stat: &str) -> Option<Self> {
        let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
        let state = fields.next()?.chars().next()?;
        let _ppid = fields.next()?;
        let pgrp = fields.next()?.parse().ok()?;
        Some(Self { state, pgrp })
    }
}

/// Waits until no process of the group runs any more.
pub async fn gone(pgid: i32) {
    while alive(pgid) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Where `program` would be run from: itself when it names a path, else the
/// first executable file of that name on `PATH`.
pub fn find_program(program: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |path: &Path| {
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.components().count() > 1 || program.to_string_lossy().contains('/') {
        return runnable(program).then(|| program.to_owned());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| runnable(candidate))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_is_read_after_the_command_name() {
        assert_eq!(
            ProcStat::parse("42 (a) b) (c) S 1 40 40 0 -1"),
            Some(ProcStat {
                state: 'S',
                pgrp: 40
            })
        );
        assert_eq!(
            ProcStat::parse("7 (sh) Z 1 7 7"),
            Some(ProcStat {
                state: 'Z',
                pgrp: 7
            })
        );
        assert_eq!(ProcStat::parse("garbage"), None);
    }

    #[test]
    fn this_process_s_group_runs() {
        // SAFETY: getpgrp has no failure and no memory effects.
        let own = unsafe { libc::getpgrp() };
        assert!(runs(own));
        assert!(!runs(i32::MAX - 7));
    }

    #[test]
    fn programs_are_found_on_path_or_by_their_path() {
        assert!(find_program(Path::new("sh")).is_some());
        assert!(find_program(Path::new("/bin/sh")).is_some());
        assert!(find_program(Path::new("no-such-program-here")).is_none());
        assert!(find_program(Path::new("/nonexistent/cmd")).is_none());
        assert!(find_program(Path::new("/etc/passwd")).is_none());
    }
}
