//! The real `baton` binary as a child process, with its stderr (the log) in a
//! file, for the tests of what an operator sees: the command line, exit codes
//! and log lines.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::baton_process::baton_binary;

/// `baton` with none of the caller's `BATON_*` or `RUST_LOG` variables.
pub fn baton() -> Command {
    let mut cmd = Command::new(baton_binary());
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("BATON_") || name == "RUST_LOG" {
            cmd.env_remove(name);
        }
    }
    cmd.stdin(Stdio::null());
    cmd
}

/// Runs `baton` to its end, killing it after `limit`.
pub fn run(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("baton starts");
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("baton did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// A serving `baton` process.
pub struct Service {
    child: Option<Child>,
    pub base: String,
    pub listen: String,
    log: PathBuf,
}

impl Service {
    /// Starts `baton` on the shared Redis with a key prefix of its own.
    pub async fn on_shared_redis() -> Self {
        let redis = crate::shared_redis();
        let prefix = crate::unique_prefix();
        Self::start(&[
            ("BATON_REDIS_URL", &redis.url()),
            ("BATON_KEY_PREFIX", &prefix),
        ])
        .await
    }

    /// Starts `baton` on a free port with `env` and waits until /healthz answers.
    pub async fn start(env: &[(&str, &str)]) -> Self {
        // reqwest's TLS (rustls) needs a crypto provider: ring, as baton's own.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let port = crate::free_port();
        let listen = format!("127.0.0.1:{port}");
        let log =
            std::env::temp_dir().join(format!("baton-ops-test-{port}-{}.log", std::process::id()));
        let mut cmd = baton();
        cmd.env("BATON_LISTEN", &listen)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"));
        let service = Self {
            child: Some(cmd.spawn().expect("baton starts")),
            base: format!("http://{listen}"),
            listen,
            log,
        };
        service.wait_healthy().await;
        service
    }

    async fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let url = format!("{}/healthz", self.base);
        while Instant::now() < deadline {
            if let Ok(response) = reqwest::get(&url).await {
                if response.status() == 200 {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("baton did not answer /healthz; log:\n{}", self.log());
    }

    /// Everything logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log lines, each parsed as one JSON object (panics on any other line).
    pub fn json_lines(&self) -> Vec<Value> {
        self.log()
            .lines()
            .map(|line| {
                let value: Value = serde_json::from_str(line)
                    .unwrap_or_else(|err| panic!("not a JSON line ({err}): {line}"));
                assert!(value.is_object(), "not a JSON object: {line}");
                value
            })
            .collect()
    }

    /// Sends `signal` (e.g. `libc::SIGHUP`) to the running process.
    pub fn signal(&self, signal: i32) {
        let child = self.child.as_ref().expect("running");
        let pid = i32::try_from(child.id()).expect("pid");
        // SAFETY: kill(2) on the pid of our own child, which has not been reaped.
        unsafe {
            libc::kill(pid, signal);
        }
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        let child = self.child.as_mut().expect("not stopped");
        child.try_wait().expect("try_wait").is_none()
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let pid = i32::try_from(child.id()).expect("pid");
        // SAFETY: kill(2) on the pid of our own child, which has not been reaped.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("baton did not stop on SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(&self.log);
    }
}
