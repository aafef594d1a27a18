//! What both chaos tests share: baton as a real process, the holds clients
//! saw, and the checks every run of holds must pass.

use std::collections::{BTreeMap, HashSet};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::helpers::free_port;

/// One baton process on a fixed port, so a restart comes back where it was.
pub struct Instance {
    port: u16,
    env: Vec<(String, String)>,
    child: Option<Child>,
}

impl Instance {
    /// Starts baton with these `BATON_*` settings (and `RUST_LOG=error`) on a
    /// free port, and waits until it listens.
    pub fn start(env: &[(&str, &str)]) -> Self {
        let mut instance = Self {
            port: free_port(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            child: None,
        };
        instance.launch();
        instance
    }

    /// Starts it again, on the same port.
    pub fn launch(&mut self) {
        let child = Command::new(env!("CARGO_BIN_EXE_baton"))
            .env("BATON_LISTEN", format!("127.0.0.1:{}", self.port))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("baton binary");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "baton did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// SIGKILL, as a crash.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` to the process, if it runs.
    fn signal(&self, signal: libc::c_int) {
        if let Some(child) = &self.child {
            // SAFETY: sending a signal to our own child process.
            unsafe {
                libc::kill(child.id() as libc::pid_t, signal);
            }
        }
    }

    /// SIGSTOP: the process is frozen (a VM freeze, CPU throttling) until
    /// [`Self::resume`].
    #[allow(dead_code)] // not every test binary pauses
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// SIGCONT after [`Self::pause`].
    #[allow(dead_code)]
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// SIGTERM, as an orchestrator stopping it; waits for the exit status.
    #[allow(dead_code)] // not every test binary stops instances
    pub fn terminate(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        // SAFETY: sending a signal to our own child process.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        child.wait().ok()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A lease as a client held it: from its 201 to the moment the client sent
/// its release (or the lease's expiry, if sooner).
#[derive(Debug, Clone)]
pub struct Hold {
    pub name: String,
    pub token: u64,
    /// When the acquisition was sent: it was granted after this.
    pub requested: SystemTime,
    pub start: SystemTime,
    pub end: SystemTime,
}

/// The holds of each name, each list in the order they started.
pub fn holds_by_name(holds: &[Hold]) -> BTreeMap<String, Vec<Hold>> {
    let mut by_name: BTreeMap<String, Vec<Hold>> = BTreeMap::new();
    for hold in holds {
        by_name
            .entry(hold.name.clone())
            .or_default()
            .push(hold.clone());
    }
    for holds in by_name.values_mut() {
        holds.sort_by_key(|h| h.start);
    }
    by_name
}

/// The violations in the holds of one name: more than `limit` at once, a
/// token granted twice, or a token not above every token of a hold that had
/// ended before the acquisition was sent.
pub fn check_holds(name: &str, holds: &[Hold], limit: usize, violations: &mut Vec<String>) {
    // Sweep: how many holds are open at each start.
    let mut events: Vec<(SystemTime, i32)> = Vec::new();
    for h in holds {
        events.push((h.start, 1));
        events.push((h.end, -1));
    }
    // Ends before starts at the same instant: touching holds do not overlap.
    events.sort_by_key(|(t, delta)| (*t, *delta));
    let mut open = 0;
    for (at, delta) in events {
        open += delta;
        if open > limit as i32 {
            violations.push(format!("{name}: {open} holders at {at:?}, limit {limit}"));
        }
    }
    let mut tokens = HashSet::new();
    for h in holds {
        if !tokens.insert(h.token) {
            violations.push(format!("{name}: token {} granted twice", h.token));
        }
    }
    // An acquisition sent after another hold ended was granted after that
    // one, so it must carry a larger token (across Redis restarts and
    // failovers too).
    let mut by_end = holds.to_vec();
    by_end.sort_by_key(|h| h.end);
    let mut by_request = holds.to_vec();
    by_request.sort_by_key(|h| h.requested);
    let mut max_ended = 0u64;
    let mut j = 0;
    for h in &by_request {
        while j < by_end.len() && by_end[j].end < h.requested {
            max_ended = max_ended.max(by_end[j].token);
            j += 1;
        }
        if h.token <= max_ended {
            violations.push(format!(
                "{name}: token {} after a finished hold with token {max_ended}",
                h.token
            ));
        }
    }
}
