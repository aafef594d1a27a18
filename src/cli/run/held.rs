//! A lease (or a claim) held while COMMAND runs: COMMAND started in its
//! process group, the lease refreshed every ttl/3 and followed on its
//! holders' streams, the group stopped when the lease is lost or baton run
//! gets a signal, and the lease released at the end ([`Held`]).

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use reqwest::Method;

use crate::cli::clock;
use crate::cli::duration::{human, millis};
use crate::cli::exit::{signal_status, Failure, LOST, NOT_FOUND, UNAVAILABLE};
use crate::cli::http::{json, Service};
use crate::cli::messages::{say, signal_name, warn};
use crate::cli::run::acquired::{Acquired, Follow};
use crate::cli::run::follow::follow_all;
use crate::cli::run::group;
use crate::cli::run::guard::{Guard, Message};
use crate::cli::run::launch;
use crate::cli::run::timing::Timing;
use crate::cli::signals::Signals;
use crate::cli::variables;
use crate::wire::Refresh;

/// A lease (or a claim) being held while COMMAND runs.
pub(crate) struct Held {
    pub(crate) service: Service,
    /// What it holds, for messages.
    pub(crate) label: String,
    /// The lease's path (it holds the lease id: never shown).
    pub(crate) path: String,
    /// The variables COMMAND gets.
    pub(crate) env: Vec<(String, String)>,
    pub(crate) timing: Timing,
    /// The signal a yield request sends COMMAND's group (`--on-yield`).
    pub(crate) on_yield: Option<i32>,
    /// The leases whose holder's streams it follows: the one lease, or
    /// every lease of a claim (a claim is refreshed through its own path,
    /// but lost when any of its leases is).
    pub(crate) follows: Vec<Follow>,
    /// The guard, told COMMAND's group and each new deadline for SIGKILL.
    pub(crate) guard: Mutex<Option<Guard>>,
}

impl Held {
    pub(crate) async fn supervise(
        &self,
        lease: &Acquired,
        program: &OsString,
        program_args: &[OsString],
        signals: &mut Signals,
    ) -> Result<u8, Failure> {
        group::become_subreaper();
        // The grant happened between sending and receiving; after a long
        // wait, refresh at once.
        let ok = lease
            .sent
            .max(lease.received.saturating_sub(self.timing.rtt));
        self.tell_guard(&Message::KillBy {
            at_ms: millis(self.timing.kill_by(ok)),
        });
        let (go, mut go_writer) = match launch::pipe() {
            Ok(pipe) => pipe,
            Err(err) => {
                self.release(1, false).await;
                return Err(Failure::new(
                    UNAVAILABLE,
                    format!("cannot make a pipe to start COMMAND: {err}"),
                ));
            }
        };
        let mut command = launch::command(program, program_args, &go);
        // A limit left from an outer semaphore's run does not describe this
        // lease. A nested baton run asks the same service about this lease
        // (the token is not handed on: give it as BATON_TOKEN for that).
        command
            .env_remove(variables::LIMIT)
            .envs(self.env.iter().map(|(key, value)| (key, value)))
            .env("BATON_URL", self.service.url());
        // Outside the terminal's foreground group, reading the terminal would
        // stop COMMAND (SIGTTIN) for good: a terminal as stdin becomes /dev/null.
        if std::io::stdin().is_terminal() {
            command.stdin(Stdio::null());
        }
        let spawned = command.spawn();
        drop(go);
        let mut child = match spawned {
            Ok(child) => child,
            Err(err) => {
                self.release(1, false).await;
                return Err(Failure::new(
                    NOT_FOUND,
                    format!("cannot run {}: {err}", program.to_string_lossy()),
                ));
            }
        };
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .unwrap_or_default();
        // The guard knows the group before COMMAND may start.
        self.tell_guard(&Message::Group { pgid });
        if let Err(err) = go_writer.write_all(b"g") {
            warn(format!("cannot start COMMAND: {err}"));
        }
        drop(go_writer);

        let next = if lease.received - lease.sent > self.timing.rtt {
            lease.received
        } else {
            ok + self.timing.ttl / 3
        };
        let keeping = self.keep(ok, next);
        tokio::pin!(keeping);
        // The lease's own stream, or every stream of a claim's leases: a
        // loss is heard at once, not at the next refresh (which alone keeps
        // the promise, streams or not).
        let following = follow_all(&self.service, &self.follows, pgid, self.on_yield);
        tokio::pin!(following);
        let target = &self.label;
        let finished = async {
            let status = child.wait().await;
            if group::alive(pgid) {
                say(format!(
                    "COMMAND exited ({}); holding {target} until its other processes (group {pgid}) have exited",
                    describe_status(status.as_ref().ok())
                ));
                group::gone(pgid).await;
            }
            status
        };
        tokio::pin!(finished);

        let mut lost = false;
        let mut signal: Option<i32> = None;
        let mut kill_at: Option<Duration> = None;
        let mut killed = false;
        let stop = |kill_at: &mut Option<Duration>, killed: &mut bool| {
            if kill_at.is_some() {
                group::signal(pgid, libc::SIGKILL);
                *killed = true;
            } else {
                group::signal(pgid, libc::SIGTERM);
                let at = clock::now() + self.timing.grace;
                *kill_at = Some(at);
                self.tell_guard(&Message::Stopping {
                    kill_at_ms: millis(at),
                });
            }
        };
        let status = loop {
            tokio::select! {
                status = &mut finished => break status,
                got = signals.recv() => {
                    signal.get_or_insert(got);
                    warn(format!("got {}: stopping COMMAND", signal_name(got)));
                    stop(&mut kill_at, &mut killed);
                }
                why = &mut keeping, if !lost => {
                    lost = true;
                    warn(format!("lease on {target} lost: {why}; stopping COMMAND before the lease can lapse"));
                    stop(&mut kill_at, &mut killed);
                }
                why = &mut following, if !lost => {
                    lost = true;
                    warn(format!("lease on {target} lost: {why}; stopping COMMAND"));
                    stop(&mut kill_at, &mut killed);
                }
                () = clock::sleep_until(kill_at.unwrap_or_default()), if kill_at.is_some() && !killed => {
                    group::signal(pgid, libc::SIGKILL);
                    killed = true;
                }
            }
        };
        let status = status.ok();
        let shown = describe_status(status.as_ref());
        if lost {
            // After an outage the lease may still exist.
            self.release(1, true).await;
            return Err(Failure::new(
                LOST,
                format!("the lease on {target} was lost while COMMAND ran; COMMAND was stopped (its status: {shown})"),
            ));
        }
        self.release(3, false).await;
        if let Some(signal) = signal {
            return Err(Failure::new(
                signal_status(signal),
                format!(
                    "COMMAND was stopped because baton got {} (its status: {shown})",
                    signal_name(signal)
                ),
            ));
        }
        say(format!("COMMAND exited with status {shown}"));
        Ok(exit_status(status.as_ref()))
    }

    /// Tells the guard `message` (if it runs).
    fn tell_guard(&self, message: &Message) {
        if let Some(guard) = self
            .guard
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_mut()
        {
            guard.tell(message);
        }
    }

    /// Refreshes the lease every ttl/3 (every second while refreshes fail);
    /// returns why the lease is lost, early enough to stop COMMAND.
    async fn keep(&self, mut ok: Duration, mut next: Duration) -> String {
        let timing = self.timing;
        let body = json(&Refresh {
            ttl_ms: Some(millis(timing.ttl)),
        });
        let mut failing: Option<String> = None;
        let mut warned: Option<Duration> = None;
        loop {
            let stop_at = timing.stop_at(ok);
            let now = clock::now();
            if now >= stop_at {
                return format!(
                    "not refreshed for {} ({})",
                    human(now - ok),
                    failing.as_deref().unwrap_or("no answer")
                );
            }
            clock::sleep_until(next.min(stop_at)).await;
            let sent = clock::now();
            if sent >= stop_at {
                continue;
            }
            let answer = self
                .service
                .call(
                    Method::PATCH,
                    &self.path,
                    Some(&body),
                    timing.rtt.min(stop_at - sent),
                )
                .await;
            let now = clock::now();
            match answer {
                Ok(answer) if answer.status == 200 => {
                    if failing.take().is_some() {
                        warn("refreshed the lease again");
                    }
                    ok = sent;
                    next = sent + timing.ttl / 3;
                    self.tell_guard(&Message::KillBy {
                        at_ms: millis(timing.kill_by(ok)),
                    });
                }
                Ok(answer) if answer.status == 404 => {
                    return format!("the service no longer has it ({})", answer.describe());
                }
                other => {
                    let why = match other {
                        Ok(answer) => answer.describe(),
                        Err(no_answer) => no_answer.why,
                    };
                    if warned.is_none_or(|at| now - at >= Duration::from_secs(5)) {
                        warn(format!(
                            "could not refresh the lease ({why}); it may lapse in {}",
                            human((ok + timing.ttl).saturating_sub(now))
                        ));
                        warned = Some(now);
                    }
                    failing = Some(why);
                    next = now + Duration::from_secs(1);
                }
            }
        }
    }

    /// DELETEs the lease, trying again what may pass.
    pub(crate) async fn release(&self, tries: u32, quietly: bool) {
        let target = &self.label;
        let mut why = String::new();
        for attempt in 1..=tries {
            match self
                .service
                .call(Method::DELETE, &self.path, None, Duration::from_secs(5))
                .await
            {
                Ok(answer) if answer.status == 204 => {
                    if !quietly {
                        say(format!("released {target}"));
                    }
                    return;
                }
                Ok(answer) if answer.status == 404 => {
                    if !quietly {
                        warn(format!(
                            "{target} was no longer held by this lease (expired or force-released)"
                        ));
                    }
                    return;
                }
                Ok(answer) if !answer.may_pass() => {
                    why = answer.describe();
                    break;
                }
                Ok(answer) => why = answer.describe(),
                Err(no_answer) => why = no_answer.why,
            }
            if attempt < tries {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        if !quietly {
            warn(format!(
                "could not release {target} ({why}); it frees itself within {}",
                human(self.timing.ttl)
            ));
        }
    }
}

/// COMMAND's exit status as a shell reports it: its code, or 128 + its signal.
fn exit_status(status: Option<&std::process::ExitStatus>) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(status) => match (status.code(), status.signal()) {
            (Some(code), _) => u8::try_from(code).unwrap_or(1),
            (None, Some(signal)) => signal_status(signal),
            (None, None) => 1,
        },
        None => 1,
    }
}

fn describe_status(status: Option<&std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.and_then(ExitStatusExt::signal) {
        Some(signal) => format!("{} ({})", exit_status(status), signal_name(signal)),
        None => exit_status(status).to_string(),
    }
}
