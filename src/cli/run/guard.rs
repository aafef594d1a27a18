//! The guard of a `baton run`: what stops COMMAND when `baton run` itself is
//! killed and cannot (SIGKILL of it, or of its whole process group, as a CI
//! runner's hard timeout sends).
//!
//! It is the same binary (`baton __guard`), started once the lease is held,
//! in a session of its own so that no signal to baton run's process group or
//! terminal reaches it. It reads messages from a pipe whose only writer is
//! baton run (the write end is close-on-exec: COMMAND does not hold it).
//! When the pipe ends without `done`, baton run is gone: the guard sends
//! SIGTERM to COMMAND's group at once and SIGKILL after the grace, and never
//! later than baton run would have (the last `kill-by` it sent: the lease's
//! earliest possible expiry less a refresh round trip), so COMMAND's group
//! has ended before the lease can lapse. Once no process of the group runs,
//! it releases the lease, so that the next holder need not wait out the ttl.
//!
//! It steps in the same way while baton run lives but has fallen silent (it
//! was stopped, by Ctrl-Z or SIGSTOP, or stalls): when half the grace has
//! passed after the moment baton run itself would have sent SIGTERM without
//! a newer `kill-by`. Once baton run said `stopping` (it sent SIGTERM
//! itself), the guard only backs its SIGKILL up, quietly, should the group
//! still run just after it was due.
//! As with flock(1), whose lock lives as long as any process holding it: the
//! next holder never runs beside what the last one started.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::Method;
use serde::{Deserialize, Serialize};

use crate::cli::clock;
use crate::cli::http::Service;
use crate::cli::messages::warn;
use crate::cli::run::group;
use crate::cli::run::halves::Internal;

/// What baton run tells its guard: one JSON object a line, written by
/// [`Guard`] and read by [`watch`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "message", rename_all = "kebab-case")]
pub enum Message {
    /// The lease to release once COMMAND's group is gone. The path holds the
    /// lease id and the token is a secret: both only ever cross this pipe.
    Lease {
        url: String,
        token: Option<String>,
        path: String,
        grace_ms: u64,
    },
    /// COMMAND's process group, before COMMAND may start.
    Group { pgid: i32 },
    /// SIGKILL must have gone out by then ([`clock`] time, in ms): sent
    /// after each refresh.
    KillBy { at_ms: u64 },
    /// baton run has sent SIGTERM to the group itself and sends SIGKILL at
    /// this time ([`clock`], ms), unless the group has ended before.
    Stopping { kill_at_ms: u64 },
    /// baton run ends on its own: nothing is left to do.
    Done,
}

/// baton run's end of the pipe to its guard.
pub struct Guard {
    child: Child,
    pipe: Option<std::fs::File>,
}

impl Guard {
    /// Starts the guard of a lease.
    ///
    /// # Errors
    /// The guard could not be started, or told about the lease.
    pub fn start(lease: &Message) -> std::io::Result<Self> {
        let (reader, writer) = crate::cli::run::launch::pipe()?;
        let mut command = Command::new("/proc/self/exe");
        command
            .arg0("baton")
            .arg(Internal::GUARD)
            .stdin(reader)
            .stdout(Stdio::null());
        // SAFETY: setsid is async-signal-safe; the child calls nothing else
        // between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn()?;
        let mut guard = Self {
            child,
            pipe: Some(writer),
        };
        guard.send(lease)?;
        Ok(guard)
    }

    /// Tells the guard `message`.
    ///
    /// # Errors
    /// The guard is gone.
    pub fn send(&mut self, message: &Message) -> std::io::Result<()> {
        let pipe = self
            .pipe
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the guard was told done"))?;
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        pipe.write_all(&line)
    }

    /// Tells the guard `message`, with a warning if it is gone: then a
    /// SIGKILL of baton run would leave COMMAND running.
    pub fn tell(&mut self, message: &Message) {
        if let Err(err) = self.send(message) {
            if self.pipe.take().is_some() {
                warn(format!(
                    "the guard that stops COMMAND should baton run be killed is gone ({err})"
                ));
            }
        }
    }

    /// baton run ends on its own: the guard leaves everything as it is.
    pub fn done(mut self) {
        let _ = self.send(&Message::Done);
        self.pipe = None;
        // It exits as soon as it reads that.
        let _ = self.child.wait();
    }
}

/// What the guard knows, from baton run's messages.
#[derive(Debug, Default)]
struct Watch {
    /// The service, the token and the lease's path.
    lease: Option<(String, Option<String>, String)>,
    grace: Duration,
    pgid: Option<i32>,
    kill_by: Option<Duration>,
    /// baton run has sent SIGTERM itself.
    stopping: bool,
    /// The guard has backed baton run's SIGKILL up.
    killed: bool,
}

impl Watch {
    /// Takes `message` in; `false` for `done`.
    fn take(&mut self, message: Message) -> bool {
        match message {
            Message::Done => return false,
            Message::Lease {
                url,
                token,
                path,
                grace_ms,
            } => {
                self.lease = Some((url, token, path));
                self.grace = Duration::from_millis(grace_ms);
            }
            Message::Group { pgid } => self.pgid = Some(pgid),
            Message::KillBy { at_ms } => self.kill_by = Some(Duration::from_millis(at_ms)),
            Message::Stopping { kill_at_ms } => {
                self.stopping = true;
                self.kill_by = Some(Duration::from_millis(kill_at_ms));
            }
        }
        true
    }

    /// When baton run, alive but silent, is late: half the grace after it
    /// would have sent SIGTERM, or just after its own SIGKILL once it said
    /// `stopping`. None before COMMAND's group is known.
    fn late_at(&self) -> Option<Duration> {
        if self.killed {
            return None;
        }
        self.pgid?;
        let by = self.kill_by?;
        Some(if self.stopping {
            by + Duration::from_millis(100)
        } else {
            by.saturating_sub(self.grace / 2)
        })
    }

    /// Stops COMMAND's group, then releases the lease.
    fn take_over(self, why: &str) -> u8 {
        if let Some(pgid) = self.pgid {
            if group::runs(pgid) && !stop(pgid, why, self.grace, self.kill_by) {
                warn(format!(
                    "guard: COMMAND's group {pgid} did not end after SIGKILL; its lease is left \
                     to expire"
                ));
                return 0;
            }
        }
        if let Some((url, token, path)) = self.lease {
            release(&url, token.as_deref(), &path);
        }
        0
    }
}

/// `baton __guard`: watches the pipe on stdin until baton run is done; when
/// it is gone or late, stops COMMAND's group and releases the lease. Exit 0
/// either way; what went wrong is said on stderr.
pub fn watch() -> u8 {
    let mut watch = Watch::default();
    let mut pipe = BufReader::new(std::io::stdin().lock());
    loop {
        let late_at = watch.late_at();
        if late_at.is_some_and(|at| clock::now() >= at) {
            match watch.pgid {
                Some(pgid) if watch.stopping => {
                    if group::runs(pgid) {
                        group::signal(pgid, libc::SIGKILL);
                    }
                    watch.killed = true;
                }
                _ => return watch.take_over("baton run has not kept its lease in time (stopped?)"),
            }
            continue;
        }
        // Lines come whole (one write each, shorter than PIPE_BUF).
        if pipe.buffer().is_empty() && !readable(pipe.get_ref(), late_at) {
            continue;
        }
        let mut line = String::new();
        match pipe.read_line(&mut line) {
            Ok(0) | Err(_) => return watch.take_over("baton run ended without stopping COMMAND"),
            Ok(_) => {}
        }
        match serde_json::from_str::<Message>(&line) {
            Ok(message) => {
                if !watch.take(message) {
                    return 0;
                }
            }
            Err(err) => warn(format!("guard: a message it cannot read ({err})")),
        }
    }
}

/// Whether `pipe` has something to read (or has ended) before `until`, or
/// a quarter second, whichever comes first ([`clock`] time goes on in a
/// suspension; poll's timeout may not).
fn readable(pipe: &impl AsRawFd, until: Option<Duration>) -> bool {
    let wait = until.map_or(Duration::from_millis(250), |at| {
        at.saturating_sub(clock::now())
            .min(Duration::from_millis(250))
    });
    let mut fds = [libc::pollfd {
        fd: pipe.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: one valid pollfd, for the length given.
    let ready = unsafe {
        libc::poll(
            fds.as_mut_ptr(),
            1,
            i32::try_from(wait.as_millis()).unwrap_or(250),
        )
    };
    ready > 0
}

/// SIGTERM to the group now, SIGKILL after `grace` or at `kill_by`, whichever
/// comes first; whether the group has ended (within 10 s of the SIGKILL).
fn stop(pgid: i32, why: &str, grace: Duration, kill_by: Option<Duration>) -> bool {
    warn(format!(
        "guard: {why}: sending SIGTERM to COMMAND's group {pgid}"
    ));
    group::signal(pgid, libc::SIGTERM);
    let now = clock::now();
    let kill_at = kill_by.map_or(now + grace, |by| by.min(now + grace));
    let pause = Duration::from_millis(20);
    while group::runs(pgid) && clock::now() < kill_at {
        std::thread::sleep(pause);
    }
    if !group::runs(pgid) {
        return true;
    }
    warn(format!("guard: sending SIGKILL to COMMAND's group {pgid}"));
    group::signal(pgid, libc::SIGKILL);
    let give_up = clock::now() + Duration::from_secs(10);
    while group::runs(pgid) {
        if clock::now() >= give_up {
            return false;
        }
        std::thread::sleep(pause);
    }
    true
}

/// Releases the lease (COMMAND's group has ended), trying three times.
fn release(url: &str, token: Option<&str>, path: &str) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            warn(format!(
                "guard: cannot release the lease ({err}); it frees itself when its ttl runs out"
            ));
            return;
        }
    };
    runtime.block_on(async {
        let service = match Service::new(url, token) {
            Ok(service) => service,
            Err(failure) => return warn(format!("guard: {failure}")),
        };
        let mut why = String::new();
        for attempt in 1..=3 {
            match service
                .call(Method::DELETE, path, None, Duration::from_secs(5))
                .await
            {
                // 404: released already, or ended otherwise.
                Ok(answer) if matches!(answer.status, 204 | 404) => {
                    warn("guard: COMMAND's group has ended; the lease is released");
                    return;
                }
                Ok(answer) => why = answer.describe(),
                Err(no_answer) => why = no_answer.why,
            }
            if attempt < 3 {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        warn(format!(
            "guard: could not release the lease ({why}); it frees itself when its ttl runs out"
        ));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_json_object_a_line() {
        for message in [
            Message::Lease {
                url: "http://x".into(),
                token: None,
                path: "/locks/a/b".into(),
                grace_ms: 5000,
            },
            Message::Group { pgid: 42 },
            Message::KillBy { at_ms: 7 },
            Message::Stopping { kill_at_ms: 9 },
            Message::Done,
        ] {
            let line = serde_json::to_string(&message).unwrap();
            assert!(!line.contains('\n'), "{line}");
            assert_eq!(serde_json::from_str::<Message>(&line).unwrap(), message);
        }
        assert_eq!(
            serde_json::to_string(&Message::Done).unwrap(),
            r#"{"message":"done"}"#
        );
    }

    #[test]
    fn the_guard_steps_in_half_a_grace_after_baton_run_would_have() {
        let mut watch = Watch::default();
        let ms = Duration::from_millis;
        watch.take(Message::Lease {
            url: "http://x".into(),
            token: None,
            path: "/locks/a/b".into(),
            grace_ms: 4000,
        });
        watch.take(Message::KillBy { at_ms: 60_000 });
        assert_eq!(watch.late_at(), None, "not before COMMAND's group is known");
        watch.take(Message::Group { pgid: 42 });
        assert_eq!(watch.late_at(), Some(ms(58_000)));
        watch.take(Message::KillBy { at_ms: 80_000 });
        assert_eq!(watch.late_at(), Some(ms(78_000)));
        watch.take(Message::Stopping { kill_at_ms: 70_000 });
        assert_eq!(watch.late_at(), Some(ms(70_100)));
        watch.killed = true;
        assert_eq!(
            watch.late_at(),
            None,
            "once backed up, it waits for the end"
        );
        assert!(!watch.take(Message::Done));
    }
}
