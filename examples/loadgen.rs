//! A load generator written for baton's HTTP API, in the manner of redis-benchmark,
//! and the classic Redis lock recipe it is measured against.
//!
//! ```text
//! cargo run --release --example loadgen -- run --target 127.0.0.1:8080 \
//!     --kind lock|sem [--limit 4] --names each|one --clients 16 --duration 5 \
//!     [--windows 1] [--warmup 1] [--wait-ms 10000] [--ttl-ms 30000] [--hold-ms 0] \
//!     [--max-ops N] [--redis 127.0.0.1:6379] [--baton-pid PID] [--label ul] [--out results.env]
//! cargo run --release --example loadgen -- run --classic 127.0.0.1:6379 \
//!     --kind lock|sem [--limit 4] --clients 16 --duration 5 [...]   # no baton: Redis alone
//! cargo run --release --example loadgen -- idle --target 127.0.0.1:8080 \
//!     --waiters 10000 --hold 10 [--redis ...] [--baton-pid PID] [--label idle] [--out ...]
//! cargo run --release --example loadgen -- report results.env
//! ```
//!
//! `run` keeps `--clients` keep-alive HTTP/1.1 connections busy with
//! acquire (POST) + release (DELETE) cycles, each client on its own name
//! (`--names each`, uncontended) or all on one name (`--names one`, contended,
//! with `--wait-ms`). After `--warmup` seconds it measures `--windows`
//! consecutive windows of `--duration` seconds and reports the best one (the
//! one with the most operations per second): cycles per second, acquire and
//! release latency, and, when contended, hand-offs: the time from a holder
//! sending its DELETE to the next holder's 201 arriving. With `--redis` it
//! reads Redis's INFO before and after the window (script calls, commands
//! counted by `INFO commandstats`, those run inside scripts and functions
//! included, and CPU per operation); with `--baton-pid` it reads the
//! service's CPU time (user and kernel apart) and resident memory from /proc:
//! baton's, or a floor's (`examples/floor.rs`) when that is the target.
//!
//! `run --classic REDIS` runs the same closed loop with no baton at all: the
//! classic recipe, through redis-rs (the client library baton uses), each
//! client on its own connection as separate workers would be, or with
//! `--connections N` on N shared multiplexed connections (redis-rs then
//! pipelines the clients' calls, as baton pipelines all of its own on one).
//! A lock is `SET key id NX PX ttl` and a compare-and-delete script (EVALSHA);
//! a semaphore is the well-known counting-semaphore script (ZREMRANGEBYSCORE
//! the expired, ZCARD, ZADD when there is room) and `ZREM`. Uncontended only:
//! the recipe has no waiting.
//!
//! `idle` takes a lock and opens `--waiters` connections that each wait for it,
//! then, once baton reports them all waiting, measures for `--hold` seconds how
//! many commands Redis receives and how much memory baton holds.
//!
//! `report` turns the `label.key=value` lines that `run`, `idle` and
//! scripts/bench.sh wrote into the tables of scripts/bench.sh: each figure
//! the median of its rounds (labels `{side}{workload}{round}`, e.g. `rul2`),
//! the targets judged on those medians.
//!
//! The client is a minimal HTTP/1.1 client over a raw `TcpStream` (no pooling,
//! no TLS, no chunked bodies: baton answers with `Content-Length`), so that the
//! load generator costs as little CPU as possible next to the service it
//! measures. It only talks to loopback addresses, and every loop is bounded in
//! count and time.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// Upper bounds on what one invocation may do.
const MAX_SECONDS: u64 = 300;
const MAX_CLIENTS: usize = 20_000;
const MAX_OPS: u64 = 50_000_000;
/// How many connections `idle` opens at once (the listen backlog is 1024).
const CONNECT_BATCH: usize = 256;

type Error = Box<dyn std::error::Error + Send + Sync>;
type Result<T, E = Error> = std::result::Result<T, E>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let outcome = match command.as_str() {
        "run" => Options::parse(rest, RUN_OPTIONS).and_then(|o| runtime()?.block_on(run(&o))),
        "idle" => Options::parse(rest, IDLE_OPTIONS).and_then(|o| runtime()?.block_on(idle(&o))),
        "report" => match rest {
            [path] => report(path),
            _ => Err("usage: loadgen report RESULTS_FILE".into()),
        },
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command {other:?}\n{USAGE}").into()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("loadgen: {err}");
            ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "usage: loadgen run --target 127.0.0.1:PORT --kind lock|sem [--limit N] \
--names each|one --clients N --duration S [--windows N] [--warmup S] [--wait-ms MS] \
[--ttl-ms MS] [--hold-ms MS] [--max-ops N] [--http 1|2] [--connections N] \
[--hammer N --hammer-holders N --hammer-locks N] \
[--redis 127.0.0.1:PORT] [--baton-pid PID] [--label L] [--out FILE]
       loadgen run --classic 127.0.0.1:PORT --kind lock|sem [--limit N] --clients N ... \
(the classic recipe on Redis alone, each client its own name)
       loadgen idle --target 127.0.0.1:PORT --waiters N --hold S [--http 1|2] [--connections N] \
[--redis 127.0.0.1:PORT] [--baton-pid PID] [--label L] [--out FILE]
       loadgen report FILE";

const RUN_OPTIONS: &[&str] = &[
    "target",
    "classic",
    "kind",
    "limit",
    "names",
    "clients",
    "duration",
    "warmup",
    "wait-ms",
    "ttl-ms",
    "hold-ms",
    "max-ops",
    "windows",
    "redis",
    "baton-pid",
    "label",
    "out",
    "http",
    "connections",
    "hammer",
    "hammer-holders",
    "hammer-locks",
];
const IDLE_OPTIONS: &[&str] = &[
    "target",
    "http",
    "connections",
    "waiters",
    "hold",
    "redis",
    "baton-pid",
    "label",
    "out",
];

/// One thread: the load generator must leave the cores to baton and Redis.
fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

// ---------------------------------------------------------------------------
// Options

struct Options(BTreeMap<String, String>);

impl Options {
    fn parse(args: &[String], allowed: &[&str]) -> Result<Self> {
        let mut map = BTreeMap::new();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let key = arg
                .strip_prefix("--")
                .filter(|k| allowed.contains(k))
                .ok_or_else(|| format!("unknown option {arg:?}\n{USAGE}"))?;
            let value = it.next().ok_or_else(|| format!("{arg} needs a value"))?;
            map.insert(key.to_owned(), value.clone());
        }
        Ok(Self(map))
    }

    fn text(&self, key: &str, default: &str) -> String {
        self.0
            .get(key)
            .map_or_else(|| default.to_owned(), Clone::clone)
    }

    fn number(&self, key: &str, default: u64, max: u64) -> Result<u64> {
        let value = match self.0.get(key) {
            None => default,
            Some(raw) => raw
                .parse()
                .map_err(|_| format!("--{key} must be a whole number, not {raw:?}"))?,
        };
        if value > max {
            return Err(format!("--{key} must be at most {max}").into());
        }
        Ok(value)
    }

    /// A loopback address: this tool never sends load anywhere else.
    fn loopback(&self, key: &str) -> Result<Option<SocketAddr>> {
        let Some(raw) = self.0.get(key) else {
            return Ok(None);
        };
        let addr: SocketAddr = raw
            .parse()
            .map_err(|_| format!("--{key} must be IP:PORT, not {raw:?}"))?;
        if !addr.ip().is_loopback() {
            return Err(format!("--{key} must be a loopback address (127.0.0.1:PORT)").into());
        }
        Ok(Some(addr))
    }

    fn out(&self) -> Option<PathBuf> {
        self.0.get("out").map(PathBuf::from)
    }
}

// ---------------------------------------------------------------------------
// A minimal HTTP/1.1 client

struct Reply {
    status: u16,
    location: Option<String>,
    body: Vec<u8>,
}

/// One keep-alive connection, reopened after an error or `Connection: close`.
struct Conn {
    addr: SocketAddr,
    stream: Option<TcpStream>,
    buf: Vec<u8>,
    req: Vec<u8>,
}

impl Conn {
    fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            stream: None,
            buf: Vec::with_capacity(4096),
            req: Vec::with_capacity(512),
        }
    }

    async fn request(&mut self, method: &str, path: &str, body: &str) -> io::Result<Reply> {
        if self.stream.is_none() {
            let stream = TcpStream::connect(self.addr).await?;
            stream.set_nodelay(true)?;
            self.stream = Some(stream);
            self.buf.clear();
        }
        self.req.clear();
        write_request(&mut self.req, method, path, body);
        let Some(stream) = self.stream.as_mut() else {
            return Err(io::Error::other("not connected"));
        };
        let outcome = match stream.write_all(&self.req).await {
            Ok(()) => read_reply(stream, &mut self.buf).await,
            Err(err) => Err(err),
        };
        match outcome {
            Ok((reply, close)) => {
                if close {
                    self.stream = None;
                }
                Ok(reply)
            }
            Err(err) => {
                self.stream = None;
                Err(err)
            }
        }
    }
}

fn write_request(out: &mut Vec<u8>, method: &str, path: &str, body: &str) {
    // Writing into a Vec cannot fail.
    let _ = write!(
        out,
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
}

/// Reads one response; returns it and whether the server closes the connection.
async fn read_reply(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<(Reply, bool)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = parse_head(&buf[..end])?;
            let total = end + 4 + head.content_length;
            while buf.len() < total {
                read_more(stream, buf).await?;
            }
            let body = buf[end + 4..total].to_vec();
            buf.drain(..total);
            let reply = Reply {
                status: head.status,
                location: head.location,
                body,
            };
            return Ok((reply, head.close));
        }
        if buf.len() > 64 * 1024 {
            return Err(io::Error::other("response head too large"));
        }
        read_more(stream, buf).await?;
    }
}

async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.reserve(4096);
    if stream.read_buf(buf).await? == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

struct Head {
    status: u16,
    content_length: usize,
    location: Option<String>,
    close: bool,
}

fn parse_head(raw: &[u8]) -> io::Result<Head> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let text = std::str::from_utf8(raw).map_err(|_| bad("response head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let mut head = Head {
        status,
        content_length: 0,
        location: None,
        close: false,
    };
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            head.content_length = value.parse().map_err(|_| bad("bad content-length"))?;
        } else if name.eq_ignore_ascii_case("location") {
            head.location = Some(value.to_owned());
        } else if name.eq_ignore_ascii_case("connection") {
            head.close = value.eq_ignore_ascii_case("close");
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(bad("chunked responses are not supported"));
        }
    }
    Ok(head)
}

// ---------------------------------------------------------------------------
// HTTP/2 (prior knowledge) through the `h2` crate

/// One HTTP/2 connection; clones share it, each request is a stream of it.
#[derive(Clone)]
struct H2Conn {
    authority: Arc<str>,
    send: h2::client::SendRequest<Bytes>,
}

fn other(err: impl std::fmt::Display) -> io::Error {
    io::Error::other(err.to_string())
}

impl H2Conn {
    async fn connect(addr: SocketAddr) -> io::Result<Self> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let (send, connection) = h2::client::Builder::new()
            .initial_connection_window_size(1 << 20)
            .handshake(tcp)
            .await
            .map_err(other)?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Self {
            authority: Arc::from(addr.to_string().as_str()),
            send,
        })
    }

    async fn request(&self, method: &str, path: &str, body: &str) -> io::Result<Reply> {
        let request = axum::http::Request::builder()
            .method(method)
            .uri(format!("http://{}{path}", self.authority))
            .header("content-type", "application/json")
            .body(())
            .map_err(other)?;
        let mut send = self.send.clone().ready().await.map_err(other)?;
        let (response, mut stream) = send.send_request(request, body.is_empty()).map_err(other)?;
        if !body.is_empty() {
            stream
                .send_data(Bytes::copy_from_slice(body.as_bytes()), true)
                .map_err(other)?;
        }
        let response = response.await.map_err(other)?;
        let status = response.status().as_u16();
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body = response.into_body();
        let mut data = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(other)?;
            let _ = body.flow_control().release_capacity(chunk.len());
            data.extend_from_slice(&chunk);
        }
        Ok(Reply {
            status,
            location,
            body: data,
        })
    }
}

/// A client of either protocol.
enum Client {
    H1(Conn),
    H2(H2Conn),
}

impl Client {
    async fn request(&mut self, method: &str, path: &str, body: &str) -> io::Result<Reply> {
        match self {
            Self::H1(conn) => conn.request(method, path, body).await,
            Self::H2(conn) => conn.request(method, path, body).await,
        }
    }
}

/// `--http 1|2`: whether to speak HTTP/2.
fn http2(options: &Options) -> Result<bool> {
    match options.text("http", "1").as_str() {
        "1" | "1.1" => Ok(false),
        "2" => Ok(true),
        other => Err(format!("--http must be 1 or 2, not {other:?}").into()),
    }
}

/// `--connections` HTTP/2 connections to `target`.
async fn h2_connections(target: SocketAddr, n: usize) -> Result<Vec<H2Conn>> {
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        conns.push(H2Conn::connect(target).await?);
    }
    Ok(conns)
}

// ---------------------------------------------------------------------------
// Redis INFO and /proc

/// A plain RESP connection for INFO, opened before the measured window.
struct RedisInfo {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl RedisInfo {
    async fn connect(addr: SocketAddr) -> Result<Self> {
        Ok(Self {
            stream: TcpStream::connect(addr).await?,
            buf: Vec::with_capacity(16 * 1024),
        })
    }

    /// `INFO all` as a map of `key -> value`.
    async fn info(&mut self) -> Result<BTreeMap<String, String>> {
        self.stream
            .write_all(b"*2\r\n$4\r\nINFO\r\n$3\r\nall\r\n")
            .await?;
        self.buf.clear();
        let (len, start) = loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = std::str::from_utf8(&self.buf[..end])?;
                let len: usize = line
                    .strip_prefix('$')
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| format!("unexpected INFO reply {line:?}"))?;
                break (len, end + 2);
            }
            read_more(&mut self.stream, &mut self.buf).await?;
        };
        while self.buf.len() < start + len + 2 {
            read_more(&mut self.stream, &mut self.buf).await?;
        }
        let text = std::str::from_utf8(&self.buf[start..start + len])?;
        Ok(text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
            .collect())
    }
}

/// What Redis had done by one moment.
#[derive(Clone, Copy, Default)]
struct RedisCounters {
    /// EVALSHA plus EVAL calls: every script call, however it was sent.
    scripts: f64,
    /// Every command, those run inside scripts and functions included: the
    /// sum of `calls` over `INFO commandstats` (on Redis 7.0 it counts what
    /// `MONITOR` shows, a script's own commands too; scripts/bench.sh checks).
    commands: f64,
    /// Calls that clients sent, a script counting once: the script calls
    /// and the commands no script runs (`INFO` counts both kinds together).
    calls: f64,
    /// used_cpu_user + used_cpu_sys, seconds.
    cpu: f64,
}

/// Commands that only a client sends, never a script: with the script calls,
/// what a client asks of Redis.
const CLIENT_ONLY_COMMANDS: [&str; 21] = [
    "fcall",
    "fcall_ro",
    "function|load",
    "evalsha",
    "eval",
    "evalsha_ro",
    "eval_ro",
    "ping",
    "info",
    "config|get",
    "client|setname",
    "client|setinfo",
    "hello",
    "script|load",
    "subscribe",
    "unsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "psubscribe",
    "punsubscribe",
    "wait",
];

impl RedisCounters {
    fn from_info(info: &BTreeMap<String, String>) -> Self {
        let calls = |key: &str| -> f64 {
            info.get(key)
                .and_then(|v| v.split(',').find_map(|kv| kv.strip_prefix("calls=")))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0.0)
        };
        let number =
            |key: &str| -> f64 { info.get(key).and_then(|v| v.parse().ok()).unwrap_or(0.0) };
        Self {
            // Functions (baton now) and scripts (earlier builds measured beside it).
            scripts: calls("cmdstat_fcall") + calls("cmdstat_evalsha") + calls("cmdstat_eval"),
            commands: info
                .iter()
                .filter(|(k, _)| k.starts_with("cmdstat_"))
                .map(|(k, _)| calls(k))
                .sum(),
            calls: CLIENT_ONLY_COMMANDS
                .iter()
                .map(|c| calls(&format!("cmdstat_{c}")))
                .sum(),
            cpu: number("used_cpu_user") + number("used_cpu_sys"),
        }
    }
}

/// CPU seconds of a process in user mode and in the kernel, from /proc/PID/stat.
#[derive(Clone, Copy)]
struct CpuTimes {
    user: f64,
    system: f64,
}

impl CpuTimes {
    fn of(pid: &str) -> Option<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        // SAFETY: sysconf has no preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let ticks = if ticks > 0 { ticks as f64 } else { 100.0 };
        Some(Self {
            user: utime / ticks,
            system: stime / ticks,
        })
    }

    fn total(self) -> f64 {
        self.user + self.system
    }
}

/// Resident memory of a process in KiB (VmRSS).
fn rss_kb(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Everything read at the start and at the end of a measured window.
struct Snapshot {
    at: Instant,
    redis: Option<RedisCounters>,
    baton_cpu: Option<CpuTimes>,
    own_cpu: Option<CpuTimes>,
}

async fn snapshot(redis: &mut Option<RedisInfo>, baton_pid: Option<&str>) -> Result<Snapshot> {
    let counters = match redis {
        Some(conn) => Some(RedisCounters::from_info(&conn.info().await?)),
        None => None,
    };
    Ok(Snapshot {
        at: Instant::now(),
        redis: counters,
        baton_cpu: baton_pid.and_then(CpuTimes::of),
        own_cpu: CpuTimes::of("self"),
    })
}

/// Results as `label.key=value` lines, appended to `--out` and printed.
struct Results {
    label: String,
    lines: Vec<(String, String)>,
}

impl Results {
    fn new(label: String) -> Self {
        Self {
            label,
            lines: Vec::new(),
        }
    }

    fn put(&mut self, key: &str, value: impl ToString) {
        self.lines.push((key.to_owned(), value.to_string()));
    }

    fn put_f(&mut self, key: &str, value: f64) {
        if value.is_finite() {
            self.put(key, format!("{value:.3}"));
        }
    }

    fn save(&self, out: Option<PathBuf>) -> Result<()> {
        let mut text = String::new();
        for (k, v) in &self.lines {
            text.push_str(&format!("{}.{k}={v}\n", self.label));
        }
        print!("{text}");
        if let Some(path) = out {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            file.write_all(text.as_bytes())?;
        }
        Ok(())
    }

    /// Redis, baton and load-generator costs between two snapshots, per `ops`.
    fn put_costs(&mut self, before: &Snapshot, after: &Snapshot, ops: u64, own_commands: f64) {
        let window = after.at.duration_since(before.at).as_secs_f64();
        let per_op = |delta: f64| {
            if ops > 0 {
                delta / ops as f64
            } else {
                f64::NAN
            }
        };
        if let (Some(b), Some(a)) = (before.redis, after.redis) {
            self.put_f("redis_scripts_per_op", per_op(a.scripts - b.scripts));
            self.put_f(
                "redis_commands_per_op",
                per_op(a.commands - b.commands - own_commands),
            );
            self.put_f("redis_cpu_us_per_op", per_op((a.cpu - b.cpu) * 1e6));
            self.put_f("redis_cpu_pct", (a.cpu - b.cpu) / window * 100.0);
        }
        if let (Some(b), Some(a)) = (before.baton_cpu, after.baton_cpu) {
            self.put_f("baton_cpu_us_per_op", per_op((a.total() - b.total()) * 1e6));
            // The kernel's part: system calls and what they do (loopback
            // TCP runs the receiver's side too), from stime.
            self.put_f("baton_user_us_per_op", per_op((a.user - b.user) * 1e6));
            self.put_f("baton_sys_us_per_op", per_op((a.system - b.system) * 1e6));
            self.put_f("baton_cpu_pct", (a.total() - b.total()) / window * 100.0);
        }
        if let (Some(b), Some(a)) = (before.own_cpu, after.own_cpu) {
            self.put_f("loadgen_cpu_pct", (a.total() - b.total()) / window * 100.0);
        }
    }
}

// ---------------------------------------------------------------------------
// run: acquire + release cycles

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Lock,
    Semaphore,
}

struct RunConfig {
    kind: Kind,
    limit: u64,
    contended: bool,
    clients: usize,
    wait_ms: u64,
    ttl_ms: u64,
    hold: Duration,
    ops_per_client: u64,
    prefix: String,
}

/// What the clients share.
#[derive(Default)]
struct Shared {
    /// The measured window operations count in: 1, 2, ...; 0 outside them.
    window: AtomicUsize,
    stop: AtomicBool,
    /// When each release not yet followed by an acquisition was sent, oldest
    /// first: the next 201 is the hand-off from the oldest of them.
    releases: Mutex<VecDeque<Instant>>,
}

/// One client's measurements; merged at the end.
struct Tally {
    acquire: Histogram<u64>,
    release: Histogram<u64>,
    handoff: Histogram<u64>,
    cycles: u64,
    busy: u64,
    errors: u64,
    first_error: Option<String>,
}

impl Tally {
    fn new() -> Self {
        let hist = || Histogram::new_with_bounds(1, 120_000_000, 3).expect("valid bounds");
        Self {
            acquire: hist(),
            release: hist(),
            handoff: hist(),
            cycles: 0,
            busy: 0,
            errors: 0,
            first_error: None,
        }
    }

    fn error(&mut self, what: String) {
        self.errors += 1;
        self.first_error.get_or_insert(what);
    }

    fn merge(&mut self, other: &Self) {
        // Same bounds everywhere, so adding cannot fail.
        let _ = self.acquire.add(&other.acquire);
        let _ = self.release.add(&other.release);
        let _ = self.handoff.add(&other.handoff);
        self.cycles += other.cycles;
        self.busy += other.busy;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

/// What one acquire came to.
enum Acquired {
    /// The lease: baton's Location, or the classic recipe's id.
    Lease(String),
    /// 409 (baton) or no room (the classic recipe).
    Busy,
    Failed(String),
}

/// How a client acquires and releases: through baton over HTTP, or the
/// classic recipe on Redis directly.
enum Driver {
    Http {
        conn: Client,
        path: String,
        body: String,
    },
    Classic {
        conn: redis::aio::MultiplexedConnection,
        kind: Kind,
        key: String,
        ttl_ms: u64,
        limit: u64,
    },
}

/// The classic recipe's release of a lock: delete the key only while it
/// still holds our id.
static CLASSIC_UNLOCK: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end",
    )
});

/// The classic counting semaphore: drop the holders whose time is up, count
/// the rest, join when there is room. A sorted set of id -> expiry (ms,
/// the client's clock, as in the recipe); release is `ZREM`.
static CLASSIC_SEM_ACQUIRE: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        "local now = tonumber(ARGV[1])
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
if redis.call('zcard', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('zadd', KEYS[1], now + tonumber(ARGV[2]), ARGV[4])
  return 1
end
return 0",
    )
});

fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Driver {
    async fn acquire(&mut self) -> Acquired {
        match self {
            Self::Http { conn, path, body } => match conn.request("POST", path, body).await {
                Ok(reply) => match (reply.status, reply.location) {
                    (201, Some(lease)) => Acquired::Lease(lease),
                    (201, None) => Acquired::Failed("201 without Location".into()),
                    (409, _) => Acquired::Busy,
                    (status, _) => Acquired::Failed(format!("POST {path} answered {status}")),
                },
                Err(err) => Acquired::Failed(format!("POST {path}: {err}")),
            },
            Self::Classic {
                conn,
                kind,
                key,
                ttl_ms,
                limit,
            } => {
                let id = uuid::Uuid::new_v4().to_string();
                let granted = match kind {
                    Kind::Lock => redis::cmd("SET")
                        .arg(&*key)
                        .arg(&id)
                        .arg("NX")
                        .arg("PX")
                        .arg(*ttl_ms)
                        .query_async::<Option<String>>(conn)
                        .await
                        .map(|ok| ok.is_some()),
                    Kind::Semaphore => CLASSIC_SEM_ACQUIRE
                        .key(&*key)
                        .arg(epoch_ms())
                        .arg(*ttl_ms)
                        .arg(*limit)
                        .arg(&id)
                        .invoke_async::<i64>(conn)
                        .await
                        .map(|n| n == 1),
                };
                match granted {
                    Ok(true) => Acquired::Lease(id),
                    Ok(false) => Acquired::Busy,
                    Err(err) => Acquired::Failed(format!("acquire {key}: {err}")),
                }
            }
        }
    }

    async fn release(&mut self, lease: &str) -> Result<(), String> {
        match self {
            Self::Http { conn, .. } => match conn.request("DELETE", lease, "").await {
                Ok(reply) if reply.status == 204 => Ok(()),
                Ok(reply) => Err(format!("DELETE {lease} answered {}", reply.status)),
                Err(err) => Err(format!("DELETE {lease}: {err}")),
            },
            Self::Classic {
                conn, kind, key, ..
            } => {
                let released = match kind {
                    Kind::Lock => {
                        CLASSIC_UNLOCK
                            .key(&*key)
                            .arg(lease)
                            .invoke_async::<i64>(conn)
                            .await
                    }
                    Kind::Semaphore => {
                        redis::cmd("ZREM")
                            .arg(&*key)
                            .arg(lease)
                            .query_async::<i64>(conn)
                            .await
                    }
                };
                match released {
                    Ok(1) => Ok(()),
                    Ok(n) => Err(format!("release {key} removed {n}")),
                    Err(err) => Err(format!("release {key}: {err}")),
                }
            }
        }
    }
}

/// The name client `index` works on.
fn name_of(config: &RunConfig, index: usize) -> String {
    if config.contended {
        config.prefix.clone()
    } else {
        format!("{}-{index}", config.prefix)
    }
}

/// Client `index`'s way to baton over `conn`.
fn http_driver(config: &RunConfig, index: usize, conn: Client) -> Driver {
    let name = name_of(config, index);
    let (path, body) = match config.kind {
        Kind::Lock => (
            format!("/locks/{name}"),
            format!(
                r#"{{"ttl_ms":{},"wait_ms":{}}}"#,
                config.ttl_ms, config.wait_ms
            ),
        ),
        Kind::Semaphore => (
            format!("/semaphores/{name}"),
            format!(
                r#"{{"limit":{},"ttl_ms":{},"wait_ms":{}}}"#,
                config.limit, config.ttl_ms, config.wait_ms
            ),
        ),
    };
    Driver::Http { conn, path, body }
}

/// One client's loop; returns its measurements per window.
async fn client(
    config: Arc<RunConfig>,
    shared: Arc<Shared>,
    windows: usize,
    mut driver: Driver,
) -> Vec<Tally> {
    let mut tallies: Vec<Tally> = (0..=windows).map(|_| Tally::new()).collect();
    let pause = Duration::from_millis(20);
    // Index 0 collects what happens outside the windows (errors included).
    let window = |shared: &Shared| shared.window.load(Ordering::Relaxed).min(windows);
    for _ in 0..config.ops_per_client {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let sent = Instant::now();
        let outcome = driver.acquire().await;
        let acquired = Instant::now();
        let w = window(&shared);
        let lease = match outcome {
            Acquired::Lease(lease) => lease,
            Acquired::Busy => {
                tallies[w].busy += 1;
                continue;
            }
            Acquired::Failed(err) => {
                tallies[w].error(err);
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        if config.contended {
            let released = shared
                .releases
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front();
            if let Some(at) = released {
                tallies[w].handoff.saturating_record(micros(acquired - at));
            }
        }
        if !config.hold.is_zero() {
            tokio::time::sleep(config.hold).await;
        }
        let releasing = Instant::now();
        if config.contended {
            shared
                .releases
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push_back(releasing);
        }
        match driver.release(&lease).await {
            Ok(()) => {
                // A cycle counts in the window it began and ended in.
                if w == window(&shared) {
                    let tally = &mut tallies[w];
                    tally.acquire.saturating_record(micros(acquired - sent));
                    tally.release.saturating_record(micros(releasing.elapsed()));
                    tally.cycles += 1;
                }
            }
            Err(err) => tallies[w].error(err),
        }
    }
    tallies
}

async fn run(options: &Options) -> Result<()> {
    let classic = options.loopback("classic")?;
    let target = options.loopback("target")?;
    if classic.is_some() == target.is_some() {
        return Err(format!("give either --target (baton) or --classic (Redis)\n{USAGE}").into());
    }
    let kind = match options.text("kind", "lock").as_str() {
        "lock" => Kind::Lock,
        "sem" | "semaphore" => Kind::Semaphore,
        other => return Err(format!("--kind must be lock or sem, not {other:?}").into()),
    };
    let contended = match options.text("names", "each").as_str() {
        "each" => false,
        "one" => true,
        other => return Err(format!("--names must be each or one, not {other:?}").into()),
    };
    let clients = options.number("clients", 16, MAX_CLIENTS as u64)?.max(1) as usize;
    let duration = Duration::from_secs(options.number("duration", 5, MAX_SECONDS)?.max(1));
    let windows = options.number("windows", 1, 10)?.max(1) as usize;
    let warmup = Duration::from_secs(options.number("warmup", 1, MAX_SECONDS)?);
    let default_wait = if contended { 10_000 } else { 0 };
    let label = options.text("label", "run");
    let config = Arc::new(RunConfig {
        kind,
        limit: options.number("limit", 4, 100_000)?.max(1),
        contended,
        clients,
        wait_ms: options.number("wait-ms", default_wait, 300_000)?,
        ttl_ms: options.number("ttl-ms", 30_000, 86_400_000)?.max(1),
        hold: Duration::from_millis(options.number("hold-ms", 0, 60_000)?),
        ops_per_client: options
            .number("max-ops", 10_000_000, MAX_OPS)?
            .div_ceil(clients as u64),
        prefix: format!("loadgen-{label}-{}", std::process::id()),
    });
    let baton_pid = options.0.get("baton-pid").cloned();
    let mut redis = match options.loopback("redis")?.or(classic) {
        Some(addr) => Some(RedisInfo::connect(addr).await?),
        None => None,
    };
    let shared = Arc::new(Shared::default());
    let hammer = Hammer {
        clients: options.number("hammer", 0, 1000)? as usize,
        holders: options.number("hammer-holders", 10_000, 100_000)?.max(1),
        locks: options.number("hammer-locks", 10_000, 1_000_000)?,
        prefix: format!("{}-hammer", config.prefix),
    };
    let h2 = http2(options)?;
    let mut h2conns = Vec::new();
    let mut hammers = Vec::new();
    let mut drivers = Vec::with_capacity(config.clients);
    if let Some(redis_addr) = classic {
        if contended || h2 || hammer.clients > 0 {
            return Err("--classic runs the uncontended recipe only: \
                        no --names one, --http 2 or --hammer"
                .into());
        }
        // Each client its own connection, as separate workers using the
        // recipe have (`--connections N`: the clients share N connections,
        // which redis-rs pipelines, as baton pipelines all its calls on one).
        let n = options
            .number("connections", config.clients as u64, MAX_CLIENTS as u64)?
            .max(1) as usize;
        let redis_client = redis::Client::open(format!("redis://{redis_addr}"))?;
        let mut conns = Vec::with_capacity(n);
        for _ in 0..n {
            conns.push(redis_client.get_multiplexed_async_connection().await?);
        }
        for i in 0..config.clients {
            drivers.push(Driver::Classic {
                conn: conns[i % n].clone(),
                kind,
                key: format!("classic:{}", name_of(&config, i)),
                ttl_ms: config.ttl_ms,
                limit: config.limit,
            });
        }
    } else if let Some(target) = target {
        let mut probe = Conn::new(target);
        let ready = probe.request("GET", "/readyz", "").await?;
        if ready.status != 200 {
            return Err(format!("baton at {target} is not ready ({})", ready.status).into());
        }
        if h2 {
            let n = options.number("connections", 1, MAX_CLIENTS as u64)?.max(1) as usize;
            h2conns = h2_connections(target, n).await?;
        }
        if hammer.clients > 0 {
            hammer.setup(target).await?;
            hammers = (0..hammer.clients)
                .map(|i| tokio::spawn(hammer.clone().run(target, shared.clone(), i)))
                .collect();
        }
        for i in 0..config.clients {
            let conn = if h2 {
                Client::H2(h2conns[i % h2conns.len()].clone())
            } else {
                Client::H1(Conn::new(target))
            };
            drivers.push(http_driver(&config, i, conn));
        }
    }
    let handles: Vec<JoinHandle<Vec<Tally>>> = drivers
        .into_iter()
        .map(|driver| tokio::spawn(client(config.clone(), shared.clone(), windows, driver)))
        .collect();
    let hammer_started = Instant::now();

    tokio::time::sleep(warmup).await;
    // Consecutive windows; the report keeps the best (noise on a shared
    // machine only ever slows a window down).
    let mut marks = vec![snapshot(&mut redis, baton_pid.as_deref()).await?];
    let mut rss_max = 0;
    for w in 1..=windows {
        shared.window.store(w, Ordering::Relaxed);
        let end = Instant::now() + duration;
        // A window ends early when every client has done its --max-ops.
        while Instant::now() < end && !handles.iter().all(JoinHandle::is_finished) {
            let step = end
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(100));
            tokio::time::sleep(step).await;
            if let Some(kb) = baton_pid.as_deref().and_then(rss_kb) {
                rss_max = rss_max.max(kb);
            }
        }
        marks.push(snapshot(&mut redis, baton_pid.as_deref()).await?);
    }
    shared.window.store(0, Ordering::Relaxed);
    shared.stop.store(true, Ordering::Relaxed);
    let hammer_time = hammer_started.elapsed().as_secs_f64();
    let mut hammered = HammerTally::new();
    for handle in hammers {
        if let Ok(Ok(tally)) = tokio::time::timeout(Duration::from_secs(30), handle).await {
            hammered.merge(&tally);
        }
    }

    // Every client stops after its current cycle; waiters are served in turn.
    let drain_until = tokio::time::Instant::now()
        + Duration::from_millis(config.wait_ms)
        + Duration::from_secs(10);
    let mut totals: Vec<Tally> = (0..=windows).map(|_| Tally::new()).collect();
    for handle in handles {
        let abort = handle.abort_handle();
        match tokio::time::timeout_at(drain_until, handle).await {
            Ok(Ok(tallies)) => {
                for (total, tally) in totals.iter_mut().zip(&tallies) {
                    total.merge(tally);
                }
            }
            Ok(Err(err)) => totals[0].error(format!("client task failed: {err}")),
            Err(_) => {
                abort.abort();
                totals[0].error("a client did not stop in time".into());
            }
        }
    }

    let ops_of = |t: &Tally| if contended { t.handoff.len() } else { t.cycles };
    let rate = |w: usize| {
        let secs = marks[w].at.duration_since(marks[w - 1].at).as_secs_f64();
        ops_of(&totals[w]) as f64 / secs
    };
    let best = (1..=windows)
        .max_by(|&a, &b| rate(a).total_cmp(&rate(b)))
        .unwrap_or(1);
    let (before, after, total) = (&marks[best - 1], &marks[best], &totals[best]);
    let errors: u64 = totals.iter().map(|t| t.errors).sum();
    let first_error = totals.iter().find_map(|t| t.first_error.clone());

    let window = after.at.duration_since(before.at).as_secs_f64();
    let mut results = Results::new(label);
    results.put("kind", if kind == Kind::Lock { "lock" } else { "sem" });
    results.put("names", if contended { "one" } else { "each" });
    results.put("clients", config.clients);
    if kind == Kind::Semaphore {
        results.put("limit", config.limit);
    }
    results.put("wait_ms", config.wait_ms);
    results.put("windows", windows);
    let rates: Vec<String> = (1..=windows).map(|w| format!("{:.0}", rate(w))).collect();
    results.put("rate_per_window", rates.join(","));
    results.put("best_window", best);
    results.put_f("window_s", window);
    results.put("cycles", total.cycles);
    results.put_f("cycles_per_s", total.cycles as f64 / window);
    results.put("acquire_p50_us", total.acquire.value_at_quantile(0.5));
    results.put("acquire_p99_us", total.acquire.value_at_quantile(0.99));
    results.put("release_p50_us", total.release.value_at_quantile(0.5));
    results.put("release_p99_us", total.release.value_at_quantile(0.99));
    results.put("release_max_us", total.release.max());
    if contended {
        let handoffs = total.handoff.len();
        results.put("handoffs", handoffs);
        results.put_f("handoffs_per_s", handoffs as f64 / window);
        results.put("handoff_p50_us", total.handoff.value_at_quantile(0.5));
        results.put("handoff_p90_us", total.handoff.value_at_quantile(0.9));
        results.put("handoff_p99_us", total.handoff.value_at_quantile(0.99));
        results.put("handoff_max_us", total.handoff.max());
    }
    // Our own INFO at the start of the window is counted in it.
    results.put_costs(before, after, ops_of(total), 1.0);
    if classic.is_some() {
        results.put("mode", "classic");
    } else {
        results.put("baton_rss_max_kb", rss_max);
    }
    results.put("http", if h2 { 2 } else { 1 });
    if h2 {
        results.put("connections", h2conns.len());
    }
    if hammer.clients > 0 {
        results.put("hammer_clients", hammer.clients);
        results.put("hammer_holders", hammer.holders);
        results.put("hammer_locks", hammer.locks);
        results.put_f(
            "hammer_requests_per_s",
            hammered.requests as f64 / hammer_time,
        );
        results.put(
            "hammer_status_p50_us",
            hammered.status.value_at_quantile(0.5),
        );
        results.put(
            "hammer_status_p99_us",
            hammered.status.value_at_quantile(0.99),
        );
        results.put("hammer_list_p50_us", hammered.list.value_at_quantile(0.5));
        results.put("hammer_list_p99_us", hammered.list.value_at_quantile(0.99));
        results.put("hammer_status_bytes", hammered.status_bytes);
        results.put("hammer_list_bytes", hammered.list_bytes);
        results.put("hammer_errors", hammered.errors);
        if let Some(err) = &hammered.first_error {
            eprintln!(
                "loadgen: {} hammer errors, the first: {err}",
                hammered.errors
            );
        }
    }
    results.put("busy", total.busy);
    results.put("errors", errors);
    if let Some(err) = first_error {
        eprintln!("loadgen: {errors} errors, the first: {err}");
    }
    results.save(options.out())
}

// ---------------------------------------------------------------------------
// hammer: the largest status and listing calls, next to the measured clients

/// `--hammer N` clients that repeat `GET /semaphores/{big}` (a semaphore with
/// `--hammer-holders` holders) and `GET /locks` (with `--hammer-locks` held
/// locks) as fast as they can, while the measured clients acquire and release.
#[derive(Clone)]
struct Hammer {
    clients: usize,
    holders: u64,
    locks: u64,
    prefix: String,
}

struct HammerTally {
    requests: u64,
    errors: u64,
    first_error: Option<String>,
    status: Histogram<u64>,
    list: Histogram<u64>,
    status_bytes: usize,
    list_bytes: usize,
}

impl HammerTally {
    fn new() -> Self {
        let hist = || Histogram::new_with_bounds(1, 120_000_000, 3).expect("valid bounds");
        Self {
            requests: 0,
            errors: 0,
            first_error: None,
            status: hist(),
            list: hist(),
            status_bytes: 0,
            list_bytes: 0,
        }
    }

    fn merge(&mut self, other: &Self) {
        self.requests += other.requests;
        self.errors += other.errors;
        let _ = self.status.add(&other.status);
        let _ = self.list.add(&other.list);
        self.status_bytes = self.status_bytes.max(other.status_bytes);
        self.list_bytes = self.list_bytes.max(other.list_bytes);
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }
}

/// How many connections set the data up.
const SETUP_CLIENTS: u64 = 32;

impl Hammer {
    fn big(&self) -> String {
        format!("/semaphores/{}-big", self.prefix)
    }

    /// Takes `holders` leases of one semaphore and `locks` locks, each for
    /// ten minutes.
    async fn setup(&self, target: SocketAddr) -> Result<()> {
        let tasks: Vec<JoinHandle<Result<()>>> = (0..SETUP_CLIENTS)
            .map(|c| {
                let this = self.clone();
                tokio::spawn(async move {
                    let mut conn = Conn::new(target);
                    let sem = format!(r#"{{"limit":{},"ttl_ms":600000}}"#, this.holders);
                    for i in (c..this.holders).step_by(SETUP_CLIENTS as usize) {
                        let owner = format!(
                            r#"{{"limit":{},"ttl_ms":600000,"owner":"holder-{i}"}}"#,
                            this.holders
                        );
                        let body = if i % 2 == 0 { &owner } else { &sem };
                        let reply = conn.request("POST", &this.big(), body).await?;
                        if reply.status != 201 {
                            return Err(
                                format!("setup: semaphore answered {}", reply.status).into()
                            );
                        }
                    }
                    for i in (c..this.locks).step_by(SETUP_CLIENTS as usize) {
                        let path = format!("/locks/{}-held-{i:07}", this.prefix);
                        let reply = conn
                            .request("POST", &path, r#"{"ttl_ms":600000,"owner":"hammer"}"#)
                            .await?;
                        if reply.status != 201 {
                            return Err(format!("setup: lock answered {}", reply.status).into());
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for task in tasks {
            task.await??;
        }
        Ok(())
    }

    async fn run(self, target: SocketAddr, shared: Arc<Shared>, index: usize) -> HammerTally {
        let mut tally = HammerTally::new();
        let mut conn = Conn::new(target);
        let big = self.big();
        let mut i = index;
        while !shared.stop.load(Ordering::Relaxed) && tally.requests < MAX_OPS {
            i += 1;
            let (path, status) = if i.is_multiple_of(2) {
                (big.as_str(), true)
            } else {
                ("/locks", false)
            };
            let sent = Instant::now();
            match conn.request("GET", path, "").await {
                Ok(reply) if reply.status == 200 => {
                    let took = micros(sent.elapsed());
                    if status {
                        tally.status.saturating_record(took);
                        tally.status_bytes = tally.status_bytes.max(reply.body.len());
                    } else {
                        tally.list.saturating_record(took);
                        tally.list_bytes = tally.list_bytes.max(reply.body.len());
                    }
                }
                Ok(reply) => {
                    tally.errors += 1;
                    tally
                        .first_error
                        .get_or_insert(format!("GET {path} answered {}", reply.status));
                }
                Err(err) => {
                    tally.errors += 1;
                    tally
                        .first_error
                        .get_or_insert(format!("GET {path}: {err}"));
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            tally.requests += 1;
        }
        tally
    }
}

// ---------------------------------------------------------------------------
// idle: many clients waiting on one held lock

/// The value of a gauge in baton's Prometheus text, if present: the sum of
/// its series when it has labels.
fn gauge(metrics: &str, name: &str) -> Option<f64> {
    let values: Vec<f64> = metrics
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let value = match rest.strip_prefix('{') {
                Some(labelled) => labelled.split_once('}')?.1,
                None => rest,
            };
            value.strip_prefix(' ')?.trim().parse::<f64>().ok()
        })
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

async fn waiter(
    target: SocketAddr,
    path: Arc<str>,
    body: Arc<str>,
    gate: Arc<tokio::sync::Semaphore>,
    sent: Arc<AtomicUsize>,
    give_up: Duration,
) -> Result<u16, String> {
    let mut stream = {
        let _permit = gate.acquire().await.map_err(|e| e.to_string())?;
        let mut stream = TcpStream::connect(target)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let mut req = Vec::with_capacity(256);
        write_request(&mut req, "POST", &path, &body);
        stream
            .write_all(&req)
            .await
            .map_err(|e| format!("send: {e}"))?;
        stream
    };
    sent.fetch_add(1, Ordering::Relaxed);
    let mut buf = Vec::new();
    match tokio::time::timeout(give_up, read_reply(&mut stream, &mut buf)).await {
        Ok(Ok((reply, _))) => Ok(reply.status),
        Ok(Err(err)) => Err(format!("reply: {err}")),
        Err(_) => Err("no reply in time".into()),
    }
}

/// A waiter as one stream of a shared HTTP/2 connection.
async fn h2_waiter(
    conn: H2Conn,
    path: Arc<str>,
    body: Arc<str>,
    sent: Arc<AtomicUsize>,
    give_up: Duration,
) -> Result<u16, String> {
    sent.fetch_add(1, Ordering::Relaxed);
    match tokio::time::timeout(give_up, conn.request("POST", &path, &body)).await {
        Ok(Ok(reply)) => Ok(reply.status),
        Ok(Err(err)) => Err(format!("reply: {err}")),
        Err(_) => Err("no reply in time".into()),
    }
}

fn raise_fd_limit(want: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < want {
            limit.rlim_cur = want.min(limit.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

async fn idle(options: &Options) -> Result<()> {
    let target = options.loopback("target")?.ok_or("--target is required")?;
    let waiters = options.number("waiters", 10_000, MAX_CLIENTS as u64)? as usize;
    let hold = Duration::from_secs(options.number("hold", 10, MAX_SECONDS)?.max(1));
    let label = options.text("label", "idle");
    let baton_pid = options.0.get("baton-pid").cloned();
    let mut redis = match options.loopback("redis")? {
        Some(addr) => Some(RedisInfo::connect(addr).await?),
        None => None,
    };
    raise_fd_limit(waiters as u64 + 256);

    let name = format!("loadgen-{label}-{}", std::process::id());
    let path = format!("/locks/{name}");
    // Long enough to outlast the whole measurement; baton is stopped after it.
    let wait_ms = (hold.as_millis() as u64 + 120_000).min(300_000);
    let mut conn = Conn::new(target);
    let holder = conn
        .request(
            "POST",
            &path,
            &format!(r#"{{"ttl_ms":{}}}"#, wait_ms + 60_000),
        )
        .await?;
    let lease = match (holder.status, holder.location) {
        (201, Some(lease)) => lease,
        (status, _) => return Err(format!("could not take {path}: {status}").into()),
    };
    let rss_rest = baton_pid.as_deref().and_then(rss_kb);

    let started = Instant::now();
    let gate = Arc::new(tokio::sync::Semaphore::new(CONNECT_BATCH));
    let sent = Arc::new(AtomicUsize::new(0));
    let (path_arc, body): (Arc<str>, Arc<str>) = (
        Arc::from(path.as_str()),
        Arc::from(format!(r#"{{"wait_ms":{wait_ms}}}"#).as_str()),
    );
    let give_up = Duration::from_millis(wait_ms) + Duration::from_secs(10);
    let h2conns = if http2(options)? {
        let n = options.number("connections", 1, MAX_CLIENTS as u64)?.max(1) as usize;
        h2_connections(target, n).await?
    } else {
        Vec::new()
    };
    let mut handles: Vec<JoinHandle<Result<u16, String>>> = (0..waiters)
        .map(|i| {
            if h2conns.is_empty() {
                tokio::spawn(waiter(
                    target,
                    path_arc.clone(),
                    body.clone(),
                    gate.clone(),
                    sent.clone(),
                    give_up,
                ))
            } else {
                tokio::spawn(h2_waiter(
                    h2conns[i % h2conns.len()].clone(),
                    path_arc.clone(),
                    body.clone(),
                    sent.clone(),
                    give_up,
                ))
            }
        })
        .collect();

    // Wait (bounded) until baton reports every request waiting.
    let registered_by = Instant::now() + Duration::from_secs(90);
    let mut waiting = 0.0;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let metrics = conn.request("GET", "/metrics", "").await?;
        waiting =
            gauge(&String::from_utf8_lossy(&metrics.body), "baton_waiters").unwrap_or(waiting);
        if waiting >= waiters as f64 {
            break;
        }
        let finished = handles.iter().filter(|h| h.is_finished()).count();
        if finished > 0 || Instant::now() > registered_by {
            let mut first = String::new();
            for handle in &mut handles {
                if handle.is_finished() {
                    first = match handle.await {
                        Ok(Ok(status)) => format!(", the first answered {status}"),
                        Ok(Err(err)) => format!(", the first: {err}"),
                        Err(err) => format!(", the first: {err}"),
                    };
                    break;
                }
            }
            for handle in &handles {
                handle.abort();
            }
            return Err(format!(
                "only {waiting} of {waiters} requests waiting ({} sent, {finished} ended early{first})",
                sent.load(Ordering::Relaxed)
            )
            .into());
        }
    }
    let ramp = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;

    let before = snapshot(&mut redis, baton_pid.as_deref()).await?;
    let end = Instant::now() + hold;
    let mut rss_max = 0;
    while Instant::now() < end {
        let step = end
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(500));
        tokio::time::sleep(step).await;
        if let Some(kb) = baton_pid.as_deref().and_then(rss_kb) {
            rss_max = rss_max.max(kb);
        }
    }
    let after = snapshot(&mut redis, baton_pid.as_deref()).await?;
    let still_waiting = handles.iter().filter(|h| !h.is_finished()).count();
    for handle in &handles {
        handle.abort();
    }
    let _ = conn.request("DELETE", &lease, "").await;

    let window = after.at.duration_since(before.at).as_secs_f64();
    let mut results = Results::new(label);
    results.put("waiters", waiters);
    results.put("http", if h2conns.is_empty() { 1 } else { 2 });
    results.put(
        "connections",
        if h2conns.is_empty() {
            waiters
        } else {
            h2conns.len()
        },
    );
    results.put("still_waiting", still_waiting);
    results.put_f("ramp_s", ramp.as_secs_f64());
    results.put_f("window_s", window);
    if let (Some(b), Some(a)) = (before.redis, after.redis) {
        // Our own first INFO is the one command expected in the window.
        let commands = a.commands - b.commands - 1.0;
        results.put_f("redis_commands", commands);
        results.put_f("redis_commands_per_s", commands / window);
        let calls = a.calls - b.calls - 1.0;
        results.put_f("redis_calls_per_s", calls / window);
        results.put_f("redis_cpu_pct", (a.cpu - b.cpu) / window * 100.0);
    }
    if let (Some(b), Some(a)) = (before.baton_cpu, after.baton_cpu) {
        results.put_f("baton_cpu_pct", (a.total() - b.total()) / window * 100.0);
    }
    if let Some(rest) = rss_rest {
        results.put("baton_rss_rest_kb", rest);
        results.put("baton_rss_waiting_kb", rss_max);
        let per_waiter = (rss_max.saturating_sub(rest) * 1024) as f64 / waiters.max(1) as f64;
        results.put_f("bytes_per_waiter", per_waiter);
    }
    results.save(options.out())
}

// ---------------------------------------------------------------------------
// report: the tables

struct Figures(BTreeMap<String, String>);

impl Figures {
    fn load(path: &str) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        Ok(Self(
            text.lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .collect(),
        ))
    }

    fn num(&self, key: &str) -> Option<f64> {
        self.0.get(key).and_then(|v| v.parse().ok())
    }

    fn text(&self, key: &str) -> &str {
        self.0.get(key).map_or("?", String::as_str)
    }

    /// The rounds of one series: `{series}1`, `{series}2`, ... that have `key`.
    fn rounds(&self, series: &str, key: &str) -> Vec<String> {
        (1..=MAX_ROUNDS)
            .map(|r| format!("{series}{r}"))
            .filter(|label| self.num(&format!("{label}.{key}")).is_some())
            .collect()
    }

    /// `key` in each round of a series, in the order of the rounds.
    fn values(&self, series: &str, key: &str) -> Vec<f64> {
        self.rounds(series, key)
            .iter()
            .filter_map(|label| self.num(&format!("{label}.{key}")))
            .collect()
    }

    /// The median of `key` over the rounds of a series: the figure that
    /// every comparison and target uses. On 2 shared cores a round swings
    /// by 30%; the median neither rewards the luckiest window (as the best
    /// round does) nor follows one disturbed round (as the mean does).
    fn median(&self, series: &str, key: &str) -> Option<f64> {
        median(&self.values(series, key))
    }
}

fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// The alternated rounds the report looks for (scripts/bench.sh runs 3).
const MAX_ROUNDS: usize = 20;

fn thousands(v: f64) -> String {
    let n = v.round() as i64;
    let digits = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "—".into(), f)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn ms(us: f64) -> String {
    format!("{:.2}", us / 1000.0)
}

fn ms_pair(p50: Option<f64>, p99: Option<f64>) -> String {
    match (p50, p99) {
        (Some(a), Some(b)) => format!("{} / {} ms", ms(a), ms(b)),
        _ => "—".into(),
    }
}

fn mib(kb: f64) -> String {
    format!("{:.1} MiB", kb / 1024.0)
}

fn micros_text(v: f64) -> String {
    format!("{v:.1} µs")
}

fn one_decimal(v: f64) -> String {
    format!("{v:.1}")
}

fn verdict(pass: Option<bool>) -> String {
    match pass {
        Some(true) => "PASS".into(),
        Some(false) => "FAIL".into(),
        None => "n/a".into(),
    }
}

/// A markdown table; a row of one cell is a section heading.
fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .filter(|r| r.len() > 1)
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .chain(std::iter::once(header[i].chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let padded: Vec<String> = widths
            .iter()
            .enumerate()
            .map(|(i, w)| format!("{:<w$}", cells.get(i).map_or("", String::as_str)))
            .collect();
        println!("| {} |", padded.join(" | "));
    };
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    line(&header);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    println!("|-{}-|", rule.join("-|-"));
    for row in rows {
        if let [heading] = row.as_slice() {
            println!("| **{heading}** |{}", " |".repeat(widths.len() - 1));
        } else {
            line(row);
        }
    }
}

fn cells<const N: usize>(cells: [String; N]) -> Vec<String> {
    cells.into()
}

/// One side of the alternated rounds: the prefix of its labels in the
/// results (`{prefix}{series}{round}`: `rul2` is the Redis-backed floor's
/// uncontended lock in round 2) and its column heading.
struct Side {
    prefix: &'static str,
    heading: String,
}

/// The sides that ran `series` (this build always), in the order of the tables.
fn sides(f: &Figures, series: &str, key: &str) -> Vec<Side> {
    [
        ("", "this build".to_owned()),
        ("c", format!("compare ({})", f.text("meta.compare"))),
        ("v", format!("first version ({})", f.text("meta.baseline"))),
        ("r", "Redis-backed floor".to_owned()),
        ("f", "HTTP floor (in memory)".to_owned()),
        ("k", "classic recipe (no HTTP)".to_owned()),
    ]
    .into_iter()
    .filter(|(prefix, _)| {
        prefix.is_empty() || !f.rounds(&format!("{prefix}{series}"), key).is_empty()
    })
    .map(|(prefix, heading)| Side { prefix, heading })
    .collect()
}

/// The median of a figure and, after several rounds, each round's:
/// `10,842 (10,842 / 10,080 / 9,848)`.
fn per_round(f: &Figures, series: &str, key: &str, show: fn(f64) -> String) -> String {
    let values = f.values(series, key);
    match values.as_slice() {
        [] => "—".into(),
        [one] => show(*one),
        all => format!(
            "{} ({})",
            opt(median(all), show),
            all.iter().map(|v| show(*v)).collect::<Vec<_>>().join(" / ")
        ),
    }
}

/// A row of a workload's table: `cell` of each side's series.
fn side_row(
    sides: &[Side],
    series: &str,
    name: &str,
    cell: impl Fn(&str) -> String,
) -> Vec<String> {
    let mut row = vec![name.to_owned()];
    row.extend(sides.iter().map(|s| cell(&format!("{}{series}", s.prefix))));
    row
}

fn latency(f: &Figures, series: &str, what: &str) -> String {
    ms_pair(
        f.median(series, &format!("{what}_p50_us")),
        f.median(series, &format!("{what}_p99_us")),
    )
}

fn busy(f: &Figures, series: &str) -> String {
    let pct = |k: &str| opt(f.median(series, k), |v| format!("{v:.0}%"));
    format!(
        "{} / {} / {}",
        pct("baton_cpu_pct"),
        pct("redis_cpu_pct"),
        pct("loadgen_cpu_pct")
    )
}

/// The MONITOR count bench.sh took for a series (1 client, a fixed number of
/// cycles), per cycle.
fn monitored(f: &Figures, series: &str) -> Option<f64> {
    ratio(
        f.num(&format!("mon_{series}.monitor_commands")),
        f.num(&format!("mon_{series}.monitor_cycles")),
    )
}

/// The table of one workload: every side that ran it, medians of rounds.
fn workload_table(f: &Figures, series: &str, contended: bool) {
    let (rate, op) = if contended {
        ("handoffs_per_s", "hand-off")
    } else {
        ("cycles_per_s", "cycle")
    };
    let sides = sides(f, series, rate);
    let row = |name: &str, cell: &dyn Fn(&str) -> String| side_row(&sides, series, name, cell);
    let mut rows = Vec::new();
    rows.push(row(&format!("{op}s/s"), &|s| {
        per_round(f, s, rate, thousands)
    }));
    if contended {
        rows.push(row("hand-off: DELETE sent -> next 201, p50 / p99", &|s| {
            latency(f, s, "handoff")
        }));
    } else {
        rows.push(row("acquire p50 / p99", &|s| latency(f, s, "acquire")));
        rows.push(row("release p50 / p99", &|s| latency(f, s, "release")));
    }
    rows.push(row(
        &format!("server CPU per {op} (baton's or the floor's, /proc)"),
        &|s| per_round(f, s, "baton_cpu_us_per_op", micros_text),
    ));
    rows.push(row("of which in the kernel (stime)", &|s| {
        opt(f.median(s, "baton_sys_us_per_op"), micros_text)
    }));
    rows.push(row(&format!("Redis CPU per {op}"), &|s| {
        per_round(f, s, "redis_cpu_us_per_op", micros_text)
    }));
    rows.push(row(
        &format!("Redis commands per {op} (INFO commandstats, those inside scripts included)"),
        &|s| opt(f.median(s, "redis_commands_per_op"), one_decimal),
    ));
    if !contended {
        rows.push(row("Redis commands per cycle (MONITOR, 1 client)", &|s| {
            opt(monitored(f, s), one_decimal)
        }));
    }
    rows.push(row(&format!("script or function calls per {op}"), &|s| {
        opt(f.median(s, "redis_scripts_per_op"), |v| format!("{v:.2}"))
    }));
    rows.push(row("CPU busy: server / Redis / loadgen", &|s| busy(f, s)));
    // The classic recipe again, its clients sharing one connection that
    // redis-rs pipelines (as baton and the Redis-backed floor do with their
    // own calls): beside the table, not a baseline of a target.
    let shared = format!("p{series}");
    if f.median(&shared, rate).is_some() {
        rows.push(row(
            "classic recipe on one shared, pipelined connection: cycles/s; Redis CPU per cycle",
            &|s| {
                if s == format!("k{series}") {
                    format!(
                        "{}; {}",
                        opt(f.median(&shared, rate), thousands),
                        opt(f.median(&shared, "redis_cpu_us_per_op"), micros_text)
                    )
                } else {
                    String::new()
                }
            },
        ));
    }
    let mut header = vec!["figure: median of rounds (each round)"];
    header.extend(sides.iter().map(|s| s.heading.as_str()));
    print_table(&header, &rows);
}

/// A figure of a workload: series, key, what it is called, how it is shown.
type Figure = (&'static str, &'static str, &'static str, fn(f64) -> String);

/// This build beside the build of `BENCH_COMPARE`: [figure, this build, compare, ratio].
fn before_after_rows(f: &Figures) -> Vec<Vec<String>> {
    let figures: [Figure; 10] = [
        ("ul", "cycles_per_s", "uncontended lock cycles/s", thousands),
        (
            "ul",
            "baton_cpu_us_per_op",
            "baton CPU per uncontended lock cycle",
            micros_text,
        ),
        (
            "ul",
            "baton_sys_us_per_op",
            "of which in the kernel (stime)",
            micros_text,
        ),
        (
            "ul",
            "redis_cpu_us_per_op",
            "Redis CPU per uncontended lock cycle",
            micros_text,
        ),
        (
            "ul",
            "redis_commands_per_op",
            "Redis commands per uncontended lock cycle",
            one_decimal,
        ),
        (
            "us",
            "cycles_per_s",
            "uncontended semaphore cycles/s",
            thousands,
        ),
        (
            "us",
            "baton_cpu_us_per_op",
            "baton CPU per uncontended semaphore cycle",
            micros_text,
        ),
        (
            "cl",
            "handoffs_per_s",
            "contended lock hand-offs/s",
            thousands,
        ),
        (
            "cl",
            "baton_cpu_us_per_op",
            "baton CPU per contended hand-off",
            micros_text,
        ),
        (
            "cl",
            "redis_cpu_us_per_op",
            "Redis CPU per contended hand-off",
            micros_text,
        ),
    ];
    figures
        .iter()
        .map(|(series, key, name, show)| {
            let then = format!("c{series}");
            cells([
                (*name).to_owned(),
                per_round(f, series, key, *show),
                per_round(f, &then, key, *show),
                opt(ratio(f.median(series, key), f.median(&then, key)), |v| {
                    format!("{v:.2}")
                }),
            ])
        })
        .collect()
}

/// A target against a baseline: [target, this build, baseline, ratio, limit, result].
fn relative(
    name: &str,
    now: Option<f64>,
    base: Option<f64>,
    show: fn(f64) -> String,
    limit: &str,
    pass: impl Fn(f64) -> bool,
) -> Vec<String> {
    let r = ratio(now, base);
    cells([
        name.to_owned(),
        opt(now, show),
        opt(base, show),
        opt(r, |v| format!("{v:.2}")),
        limit.to_owned(),
        verdict(r.map(pass)),
    ])
}

/// A target on one figure of this build.
fn absolute(
    name: &str,
    value: Option<f64>,
    show: fn(f64) -> String,
    limit: &str,
    pass: impl Fn(f64) -> bool,
) -> Vec<String> {
    cells([
        name.to_owned(),
        opt(value, show),
        String::new(),
        String::new(),
        limit.to_owned(),
        verdict(value.map(pass)),
    ])
}

fn kib(bytes: f64) -> String {
    format!("{:.1} KiB", bytes / 1024.0)
}

fn target_rows(f: &Figures) -> Vec<Vec<String>> {
    let m = |series: &str, key: &str| f.median(series, key);
    let clients = f.text("meta.clients");
    let mut rows = vec![vec![
        "issue 37: baton against the thinnest service on its stack, and the first version"
            .to_owned(),
    ]];
    rows.push(relative(
        "baton CPU per uncontended lock cycle vs the Redis-backed floor",
        m("ul", "baton_cpu_us_per_op"),
        m("rul", "baton_cpu_us_per_op"),
        micros_text,
        "<= 1.15 x",
        |r| r <= 1.15,
    ));
    rows.push(relative(
        "uncontended lock cycles/s vs the Redis-backed floor",
        m("ul", "cycles_per_s"),
        m("rul", "cycles_per_s"),
        thousands,
        ">= 0.9 x",
        |r| r >= 0.9,
    ));
    rows.push(relative(
        "uncontended lock cycles/s vs the first version",
        m("ul", "cycles_per_s"),
        m("vul", "cycles_per_s"),
        thousands,
        ">= 1.0 x",
        |r| r >= 1.0,
    ));
    rows.push(relative(
        "Redis CPU per uncontended lock cycle vs the first version",
        m("ul", "redis_cpu_us_per_op"),
        m("vul", "redis_cpu_us_per_op"),
        micros_text,
        "<= 1.0 x",
        |r| r <= 1.0,
    ));
    rows.push(relative(
        &format!(
            "contended lock hand-offs/s ({clients} clients, closed loop) vs the first version"
        ),
        m("cl", "handoffs_per_s"),
        m("vcl", "handoffs_per_s"),
        thousands,
        ">= 1.0 x",
        |r| r >= 1.0,
    ));
    for (series, what) in [("ul", "lock"), ("us", "semaphore")] {
        rows.push(absolute(
            &format!("Redis commands per uncontended {what} acquire+release"),
            m(series, "redis_commands_per_op"),
            one_decimal,
            // 8, and one XADD for the history (issue 34; 8 with
            // BATON_HISTORY_MAX=0, which tests/api/history.rs checks).
            "<= 9",
            // As shown, to one decimal: the window also counts calls made
            // once a second whatever the load (the events listener count,
            // a key's TTL renewed once a minute), a few thousandths a cycle.
            |v| (v * 10.0).round() / 10.0 <= 9.0,
        ));
    }
    rows.push(vec!["standing targets of earlier issues".to_owned()]);
    rows.push(absolute(
        "hand-off p99 (DELETE sent -> next 201), contended lock",
        m("cl", "handoff_p99_us"),
        |v| format!("{} ms", ms(v)),
        "< 1 ms",
        |v| v < 1000.0,
    ));
    for label in ["idle", "i2a", "i2b", "i2c"] {
        let Some(waiters) = f.num(&format!("{label}.waiters")) else {
            continue;
        };
        let h2 = f.num(&format!("{label}.http")) == Some(2.0);
        let (carried, limit, max) = if h2 {
            (
                format!(
                    "HTTP/2, {} connection(s)",
                    f.text(&format!("{label}.connections"))
                ),
                "<= 4 KiB",
                4096.0,
            )
        } else {
            ("HTTP/1.1".to_owned(), "<= 24 KiB", 24.0 * 1024.0)
        };
        rows.push(absolute(
            &format!(
                "memory per waiting request, {carried}, {} waiting",
                thousands(waiters)
            ),
            f.num(&format!("{label}.bytes_per_waiter")),
            kib,
            limit,
            |v| v <= max,
        ));
    }
    for label in ["idle", "i2a", "i2b", "i2c"] {
        if f.num(&format!("{label}.waiters")).is_some() {
            rows.push(absolute(
                &format!("Redis calls/s while requests wait ({label}; a script counts once)"),
                f.num(&format!("{label}.redis_calls_per_s")),
                one_decimal,
                "<= 2",
                |v| v <= 2.0,
            ));
        }
    }
    if f.num("hm.cycles_per_s").is_some() {
        for op in ["acquire", "release"] {
            let key = format!("{op}_p99_us");
            rows.push(relative(
                &format!("{op} p99 with expensive reads next door vs alone"),
                f.num(&format!("hm.{key}")),
                alone(f, &key),
                |v| format!("{} ms", ms(v)),
                "<= 2 x",
                |r| r <= 2.0,
            ));
        }
    }
    rows
}

/// A figure of the uncontended lock alone on this build: the run just before
/// the hammered one on the same instance, else the median of the rounds.
fn alone(f: &Figures, key: &str) -> Option<f64> {
    f.num(&format!("hq.{key}")).or_else(|| f.median("ul", key))
}

/// [figure, value, note]
fn note(name: &str, value: String, note: String) -> Vec<String> {
    cells([name.to_owned(), value, note])
}

fn other_rows(f: &Figures) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let n = |k: &str| f.num(k);
    let clients = f.text("meta.clients").to_owned();
    if n("cs.handoffs_per_s").is_some() {
        rows.push(vec![format!(
            "Contended semaphore (limit {}): {clients} clients on one name, wait_ms {}",
            f.text("cs.limit"),
            f.text("cs.wait_ms")
        )]);
        rows.push(note(
            "hand-offs/s",
            opt(n("cs.handoffs_per_s"), thousands),
            String::new(),
        ));
        rows.push(note(
            "hand-off p50 / p99",
            ms_pair(n("cs.handoff_p50_us"), n("cs.handoff_p99_us")),
            String::new(),
        ));
        rows.push(note(
            "Redis CPU / commands per hand-off",
            match (n("cs.redis_cpu_us_per_op"), n("cs.redis_commands_per_op")) {
                (Some(c), Some(k)) => format!("{c:.1} µs / {k:.1}"),
                _ => "—".into(),
            },
            String::new(),
        ));
    }
    if n("u2.cycles_per_s").is_some() {
        rows.push(vec![format!(
            "HTTP/2: {clients} clients on {} connection(s)",
            f.text("u2.connections")
        )]);
        let h1 = f.median("ul", "cycles_per_s");
        rows.push(note(
            "uncontended lock cycles/s",
            opt(n("u2.cycles_per_s"), thousands),
            format!(
                "HTTP/1.1: {} ({} x)",
                opt(h1, thousands),
                opt(ratio(n("u2.cycles_per_s"), h1), |v| format!("{v:.2}"))
            ),
        ));
        rows.push(note(
            "baton CPU per uncontended cycle",
            opt(n("u2.baton_cpu_us_per_op"), micros_text),
            format!(
                "HTTP/1.1: {}",
                opt(f.median("ul", "baton_cpu_us_per_op"), micros_text)
            ),
        ));
    }
    if n("c2.handoffs_per_s").is_some() {
        rows.push(note(
            "contended lock hand-offs/s; p50 / p99",
            format!(
                "{}; {}",
                opt(n("c2.handoffs_per_s"), thousands),
                ms_pair(n("c2.handoff_p50_us"), n("c2.handoff_p99_us"))
            ),
            format!(
                "HTTP/1.1: {}",
                opt(f.median("cl", "handoffs_per_s"), thousands)
            ),
        ));
    }
    if n("hm.cycles_per_s").is_some() {
        rows.push(vec![format!(
            "Expensive reads next door: {} clients repeat GET /semaphores/{{name}} ({} holders) and GET /locks ({} held)",
            f.text("hm.hammer_clients"),
            opt(n("hm.hammer_holders"), thousands),
            opt(n("hm.hammer_locks"), thousands),
        )]);
        rows.push(note(
            "uncontended lock cycles/s while hammered",
            opt(n("hm.cycles_per_s"), thousands),
            format!("alone: {}", opt(alone(f, "cycles_per_s"), thousands)),
        ));
        rows.push(note(
            "acquire / release p99 while hammered",
            match (n("hm.acquire_p99_us"), n("hm.release_p99_us")) {
                (Some(a), Some(r)) => format!("{} / {} ms", ms(a), ms(r)),
                _ => "—".into(),
            },
            match (alone(f, "acquire_p99_us"), alone(f, "release_p99_us")) {
                (Some(a), Some(r)) => format!("alone: {} / {} ms", ms(a), ms(r)),
                _ => String::new(),
            },
        ));
        rows.push(note(
            "hammering reads/s; errors (theirs, the cycles')",
            format!(
                "{}; {} , {}",
                opt(n("hm.hammer_requests_per_s"), thousands),
                opt(n("hm.hammer_errors"), |v| format!("{v:.0}")),
                opt(n("hm.errors"), |v| format!("{v:.0}"))
            ),
            String::new(),
        ));
        for (what, k) in [("status", "status"), ("listing", "list")] {
            rows.push(note(
                &format!("{what} call p50 / p99; largest answer"),
                match (
                    n(&format!("hm.hammer_{k}_p50_us")),
                    n(&format!("hm.hammer_{k}_p99_us")),
                    n(&format!("hm.hammer_{k}_bytes")),
                ) {
                    (Some(a), Some(b), Some(size)) => {
                        format!("{} / {} ms; {:.0} KiB", ms(a), ms(b), size / 1024.0)
                    }
                    _ => "—".into(),
                },
                String::new(),
            ));
        }
    }
    for label in ["idle", "i2a", "i2b", "i2c"] {
        let key = |k: &str| format!("{label}.{k}");
        let Some(waiters) = n(&key("waiters")) else {
            continue;
        };
        let carried = if n(&key("http")) == Some(2.0) {
            format!(
                "over HTTP/2 on {} connection(s)",
                f.text(&key("connections"))
            )
        } else {
            "each its own HTTP/1.1 connection".into()
        };
        rows.push(vec![format!(
            "{} requests waiting on one held lock for {} s, {carried}",
            thousands(waiters),
            opt(n(&key("window_s")), |v| format!("{v:.0}"))
        )]);
        rows.push(note(
            "Redis calls/s; commands/s (inside scripts included)",
            match (
                n(&key("redis_calls_per_s")),
                n(&key("redis_commands_per_s")),
            ) {
                (Some(a), Some(b)) => format!("{a:.1}; {b:.1}"),
                _ => "—".into(),
            },
            "the line's keep-alive: one call a second per instance and name".into(),
        ));
        rows.push(note(
            "memory per waiting request; baton RSS before / with them",
            format!(
                "{}; {} / {}",
                opt(n(&key("bytes_per_waiter")), kib),
                opt(n(&key("baton_rss_rest_kb")), mib),
                opt(n(&key("baton_rss_waiting_kb")), mib)
            ),
            String::new(),
        ));
        rows.push(note(
            "baton CPU while they wait; time until all wait",
            format!(
                "{}; {}",
                opt(n(&key("baton_cpu_pct")), |v| format!("{v:.1}%")),
                opt(n(&key("ramp_s")), |v| format!("{v:.1} s"))
            ),
            String::new(),
        ));
    }
    if n("ulc.cycles_per_s").is_some() {
        rows.push(vec!["Redis Cluster: 3 masters on this machine".to_owned()]);
        let alone = f.median("ul", "cycles_per_s");
        rows.push(note(
            "uncontended lock cycles/s",
            opt(n("ulc.cycles_per_s"), thousands),
            format!(
                "standalone: {} ({} x); bound by the 2 shared CPUs, not by Redis",
                opt(alone, thousands),
                opt(ratio(n("ulc.cycles_per_s"), alone), |v| format!("{v:.2}"))
            ),
        ));
    }
    rows.push(vec!["baton memory".to_owned()]);
    rows.push(note(
        "RSS at rest; under the uncontended lock load",
        format!(
            "{}; {}",
            opt(n("rest.baton_rss_kb"), mib),
            opt(f.median("ul", "baton_rss_max_kb"), mib)
        ),
        String::new(),
    ));
    rows
}

fn report(path: &str) -> Result<()> {
    let f = Figures::load(path)?;
    let clients = f.text("meta.clients").to_owned();
    let ran = sides(&f, "ul", "cycles_per_s");
    let names: Vec<&str> = ran.iter().map(|s| s.heading.as_str()).collect();
    println!(
        "baton benchmark, {} — commit {}, {} CPUs ({}), Redis {}, {clients} clients in a closed loop. \
         Measured alternately on one Redis: {}; {} rounds of {} window(s) of {} s each. \
         Each figure is the median of the rounds (each round's in brackets); the targets are judged on medians.",
        f.text("meta.date"),
        f.text("meta.commit"),
        f.text("meta.cpus"),
        f.text("meta.cpu_model"),
        f.text("meta.redis_version"),
        names.join(", "),
        f.text("meta.rounds"),
        f.text("meta.windows"),
        f.text("meta.duration"),
    );
    println!(
        "Load average (1, 5, 15 min) before: {}; after: {}.",
        f.text("meta.load_before"),
        f.text("meta.load_after")
    );
    println!();
    println!("### Targets");
    println!();
    let targets = target_rows(&f);
    print_table(
        &[
            "target",
            "this build",
            "baseline",
            "ratio",
            "limit",
            "result",
        ],
        &targets,
    );
    let verdicts: Vec<&str> = targets
        .iter()
        .filter(|r| r.len() == 6)
        .map(|r| r[5].as_str())
        .collect();
    let passed = verdicts.iter().filter(|v| **v == "PASS").count();
    println!();
    println!("targets met: {passed} of {}", verdicts.len());
    if f.median("cul", "cycles_per_s").is_some() {
        println!();
        println!(
            "### Before and after: this build against {}",
            f.text("meta.compare")
        );
        println!();
        print_table(
            &[
                "figure: median of rounds (each round)",
                "this build",
                &format!("compare ({})", f.text("meta.compare")),
                "ratio",
            ],
            &before_after_rows(&f),
        );
    }
    println!();
    println!("### Uncontended lock: {clients} clients, each its own name");
    println!();
    workload_table(&f, "ul", false);
    println!();
    println!(
        "### Uncontended semaphore (limit {}): {clients} clients, each its own name",
        f.text("meta.sem_limit")
    );
    println!();
    workload_table(&f, "us", false);
    println!();
    println!(
        "### Contended lock: {clients} clients on one name, each acquire (wait_ms {}) -> release in a loop",
        f.text("meta.wait_ms")
    );
    println!();
    workload_table(&f, "cl", true);
    println!();
    println!("### Other figures of this build");
    println!();
    print_table(&["figure", "value", "beside"], &other_rows(&f));

    let errors: f64 =
        f.0.iter()
            .filter(|(k, _)| k.ends_with(".errors"))
            .filter_map(|(_, v)| v.parse::<f64>().ok())
            .sum();
    if errors > 0.0 {
        println!();
        println!("WARNING: {errors} requests failed during the runs (see the log above)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_response_head() {
        let head = parse_head(
            b"HTTP/1.1 201 Created\r\nlocation: /locks/a/b\r\ncontent-length: 12\r\nConnection: close",
        )
        .unwrap();
        assert_eq!(head.status, 201);
        assert_eq!(head.location.as_deref(), Some("/locks/a/b"));
        assert_eq!(head.content_length, 12);
        assert!(head.close);
    }

    #[test]
    fn reads_gauges_and_formats_numbers() {
        let text = "# TYPE baton_waiters gauge\nbaton_waiters 10000\nbaton_waiters_x 1\n";
        assert_eq!(gauge(text, "baton_waiters"), Some(10000.0));
        let labelled = "baton_waiters{kind=\"lock\"} 7\nbaton_waiters{kind=\"semaphore\"} 2\n";
        assert_eq!(gauge(labelled, "baton_waiters"), Some(9.0));
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(thousands(12.0), "12");
    }

    #[test]
    fn medians_of_rounds() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        let f = Figures(
            [
                ("rul1.x", "9"),
                ("rul2.x", "1"),
                ("rul3.x", "5"),
                ("ul1.x", "7"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        );
        assert_eq!(f.median("rul", "x"), Some(5.0));
        assert_eq!(
            per_round(&f, "rul", "x", one_decimal),
            "5.0 (9.0 / 1.0 / 5.0)"
        );
        assert_eq!(per_round(&f, "ul", "x", one_decimal), "7.0");
    }
}
