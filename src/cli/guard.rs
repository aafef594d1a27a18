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
//! As with flock(1), whose lock lives as long as any process holding it: the
//! next holder never runs beside what the last one started.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::Method;
use serde::{Deserialize, Serialize};

use super::clock;
use super::group;
use super::http::Service;
use super::messages::warn;

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
    /// SIGKILL must have gone out by then ([`clock`] time, in ms).
    KillBy { at_ms: u64 },
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
        let (reader, writer) = super::launch::pipe()?;
        let mut command = Command::new("/proc/self/exe");
        command
            .arg0("baton")
            .arg("__guard")
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

/// `baton __guard`: watches the pipe on stdin until baton run is done, or
/// gone (then stops COMMAND's group and releases the lease). Exit 0 either
/// way; what went wrong is said on stderr.
pub fn watch() -> u8 {
    let mut lease: Option<(String, Option<String>, String)> = None;
    let mut grace = Duration::ZERO;
    let mut pgid: Option<i32> = None;
    let mut kill_by: Option<Duration> = None;
    for line in BufReader::new(std::io::stdin().lock()).lines() {
        let Ok(line) = line else { break };
        match serde_json::from_str::<Message>(&line) {
            Ok(Message::Done) => return 0,
            Ok(Message::Lease {
                url,
                token,
                path,
                grace_ms,
            }) => {
                lease = Some((url, token, path));
                grace = Duration::from_millis(grace_ms);
            }
            Ok(Message::Group { pgid: group }) => pgid = Some(group),
            Ok(Message::KillBy { at_ms }) => kill_by = Some(Duration::from_millis(at_ms)),
            Err(err) => warn(format!("guard: a message it cannot read ({err})")),
        }
    }
    // The pipe ended without `done`: baton run is gone.
    if let Some(pgid) = pgid {
        if group::runs(pgid) && !stop(pgid, grace, kill_by) {
            warn(format!(
                "guard: COMMAND's group {pgid} did not end after SIGKILL; its lease is left \
                 to expire"
            ));
            return 0;
        }
    }
    if let Some((url, token, path)) = lease {
        release(&url, token.as_deref(), &path);
    }
    0
}

/// SIGTERM to the group now, SIGKILL after `grace` or at `kill_by`, whichever
/// comes first; whether the group has ended (within 10 s of the SIGKILL).
fn stop(pgid: i32, grace: Duration, kill_by: Option<Duration>) -> bool {
    warn(format!(
        "guard: baton run ended without stopping COMMAND: sending SIGTERM to its group {pgid}"
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
}
