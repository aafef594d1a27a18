//! The real baton binary: where this build put it, and a process of a
//! test's own on the shared Redis.

use std::time::{Duration, Instant};

use crate::redis_server::{free_port, shared_redis};

/// The baton binary of this build: the one Cargo names to the test binary
/// that runs (`CARGO_BIN_EXE_baton`), or else the `baton` beside the test
/// binary's folder (`target/debug/deps/..`), where Cargo builds it for an
/// integration test of baton.
pub fn baton_binary() -> std::path::PathBuf {
    if let Some(path) = std::env::var_os("CARGO_BIN_EXE_baton") {
        return path.into();
    }
    let test = std::env::current_exe().expect("the test binary's path");
    let deps = test.parent().expect("the test binary's folder");
    deps.parent().unwrap_or(deps).join("baton")
}

/// A baton process of its own (for measuring its memory), killed when dropped.
pub struct BatonProcess {
    child: std::process::Child,
    pub base: String,
}

impl BatonProcess {
    /// On the shared Redis, unless `extra` names another `BATON_REDIS_URL`.
    pub async fn start(prefix: &str, extra: &[(&str, &str)]) -> Self {
        let port = free_port();
        let child = std::process::Command::new(baton_binary())
            .env("BATON_LISTEN", format!("127.0.0.1:{port}"))
            .env("BATON_REDIS_URL", shared_redis().url())
            .env("BATON_KEY_PREFIX", prefix)
            .env("RUST_LOG", "warn")
            .envs(extra.iter().copied())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("baton starts");
        let base = format!("http://127.0.0.1:{port}");
        // reqwest's TLS (rustls) needs a crypto provider: ring, as baton's own.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while client
            .get(format!("{base}/readyz"))
            .send()
            .await
            .map_or(true, |r| r.status() != 200)
        {
            assert!(Instant::now() < deadline, "baton answers /readyz");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self { child, base }
    }

    /// Resident memory of the process, in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }
}

impl Drop for BatonProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
