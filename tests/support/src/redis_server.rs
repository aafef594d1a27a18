//! Private redis-servers on free ports, each killed with the test process,
//! and the one a test process shares.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A redis-server of the tests' own, killed when dropped or when the test
/// process dies.
pub struct RedisServer {
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
    appendonly: bool,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl RedisServer {
    /// Starts a new redis-server on a free port.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// Starts one with append-only persistence (fsync on every write), so it
    /// keeps its data across restarts, even a kill.
    pub fn start_persistent() -> Self {
        Self::start_with(true)
    }

    fn start_with(appendonly: bool) -> Self {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("baton-test-redis-{port}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("redis dir");
        let mut server = Self {
            port,
            dir,
            child: None,
            appendonly,
        };
        server.launch();
        server
    }

    fn launch(&mut self) {
        let mut cmd = Command::new("redis-server");
        cmd.args([
            "--port",
            &self.port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--appendonly", if self.appendonly { "yes" } else { "no" }])
        // Persistent servers fsync every write, so a kill loses nothing.
        .args(["--appendfsync", "always"])
        // DEBUG SLEEP stalls Redis in the fault tests; the server is loopback-only.
        .args(["--enable-debug-command", "yes"])
        .arg("--dir")
        .arg(&self.dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        self.child = Some(spawn_dying_with_parent(&mut cmd));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(client) = redis::Client::open(self.url()) {
                if let Ok(mut conn) = client.get_connection() {
                    if redis::cmd("PING").query::<String>(&mut conn).is_ok() {
                        return;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server on port {} did not start", self.port);
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server (no shutdown save), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and directory.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    /// A synchronous connection for assertions.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("test connection to redis")
    }

    /// Makes Redis stall (DEBUG SLEEP) for `seconds`, from another thread;
    /// join the handle to wait for the end of the stall.
    pub fn stall(&self, seconds: u64) -> std::thread::JoinHandle<redis::RedisResult<()>> {
        let mut conn = self.conn();
        let stall = std::thread::spawn(move || {
            redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg(seconds)
                .query::<()>(&mut conn)
        });
        // Let the DEBUG command reach Redis first.
        std::thread::sleep(Duration::from_millis(50));
        stall
    }

    /// How many commands Redis has run, those that baton's operations ran
    /// inside them included (the `calls` of INFO commandstats, less the
    /// INFO calls that read them), and how many microseconds it spent in
    /// `FCALL`s (each call's own commands included).
    pub fn commands(&self) -> (u64, u64) {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.conn())
            .expect("INFO");
        let stat = |line: &str, field: &str| -> u64 {
            line.split(&format!("{field}="))
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        let calls = info
            .lines()
            .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
            .map(|l| stat(l, "calls"))
            .sum();
        let usec = info
            .lines()
            .filter(|l| l.starts_with("cmdstat_fcall:"))
            .map(|l| stat(l, "usec"))
            .sum();
        (calls, usec)
    }

    /// The sums of the waiting line of `tag` (`sem:NAME` or `lock:NAME`)
    /// under `prefix`, (waiters, their weight): as the owners hash keeps them
    /// (its field `queued`, "count|weight"; none: 0 and 0), and as the queue
    /// holds them (a waiter's weight is the sixth field of its entry); both
    /// read at one instant.
    pub fn line_sums(&self, prefix: &str, tag: &str) -> ((u64, u64), (u64, u64)) {
        let (kept, line): (Option<String>, Vec<String>) = redis::pipe()
            .atomic()
            .hget(format!("{prefix}{{{tag}}}:owners"), "queued")
            .zrange(format!("{prefix}{{{tag}}}:queue"), 0, -1)
            .query(&mut self.conn())
            .expect("the line");
        let kept = kept.map_or((0, 0), |kept| {
            let (count, weight) = kept.split_once('|').expect("count|weight");
            (
                count.parse().expect("count"),
                weight.parse().expect("weight"),
            )
        });
        let weight = line
            .iter()
            .map(|waiter| {
                waiter
                    .split('|')
                    .nth(5)
                    .and_then(|w| w.parse::<u64>().ok())
                    .expect("a waiter's weight")
            })
            .sum();
        (kept, (line.len() as u64, weight))
    }

    /// How many times Redis ran one of baton's operations (FCALL; EVALSHA
    /// and EVAL too, should anything run a script), from INFO commandstats.
    pub fn script_calls(&self) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.conn())
            .expect("INFO");
        info.lines()
            .filter(|l| {
                ["cmdstat_fcall:", "cmdstat_evalsha:", "cmdstat_eval:"]
                    .iter()
                    .any(|stat| l.starts_with(stat))
            })
            .filter_map(|l| l.split("calls=").nth(1))
            .filter_map(|rest| rest.split(',').next())
            .filter_map(|n| n.parse::<u64>().ok())
            .sum()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts `cmd` (a redis-server), asking the kernel to kill it when the
/// thread that started it is gone, so no server outlives the tests.
pub fn spawn_dying_with_parent(cmd: &mut Command) -> Child {
    // SAFETY: prctl is async-signal-safe; it only asks the kernel to kill
    // the server when the thread that started it is gone.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn()
        .expect("redis-server is installed (scripts/test.sh installs it)")
}

/// The redis-server shared by the tests of this process, started once from a
/// thread that lives as long as the process (so the server dies with it).
pub fn shared_redis() -> &'static RedisServer {
    static SHARED: OnceLock<RedisServer> = OnceLock::new();
    SHARED.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            tx.send(RedisServer::start()).expect("send");
            loop {
                std::thread::park();
            }
        });
        rx.recv().expect("shared redis started")
    })
}
