//! Real Redis deployments for the mode tests: a Redis Cluster (six
//! redis-servers on free ports, three masters with a replica each, formed by
//! `redis-cli --cluster create`), a Sentinel set (a master, a replica and
//! three sentinels) and a plain master with a replica. Every process dies
//! with the test process.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use baton::config::{RedisMode, Settings};

use crate::app::{settings_for, unique_prefix};
use crate::redis_server::{free_port, spawn_dying_with_parent};

/// One redis-server (data node or sentinel) of a deployment.
pub struct Node {
    pub port: u16,
    child: Option<Child>,
    dir: PathBuf,
    args: Vec<String>,
    config: Option<String>,
}

impl Node {
    /// Starts `redis-server` on a free port with `args` (and a config file
    /// first, for sentinels), and waits until it answers PING.
    fn start(dir: &std::path::Path, args: &[String], config: Option<String>) -> Self {
        let cluster = args.iter().any(|a| a == "--cluster-enabled");
        let port = if cluster {
            free_cluster_port()
        } else {
            free_port()
        };
        let dir = dir.join(port.to_string());
        std::fs::create_dir_all(&dir).expect("node dir");
        let mut node = Self {
            port,
            child: None,
            dir,
            args: args.to_vec(),
            config,
        };
        node.launch();
        node
    }

    fn launch(&mut self) {
        let port = self.port.to_string();
        let mut cmd = Command::new("redis-server");
        if let Some(config) = &self.config {
            let file = self.dir.join("node.conf");
            if !file.exists() {
                std::fs::write(&file, config.replace("{port}", &port)).expect("config");
            }
            cmd.arg(&file);
        }
        cmd.args(["--port", &port, "--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.child = Some(spawn_dying_with_parent(&mut cmd));
        self.wait_until(Duration::from_secs(10), |conn| {
            redis::cmd("PING").query::<String>(conn).is_ok()
        });
    }

    /// Starts a killed node again on its port, with its files (a cluster node
    /// rejoins as a replica of whoever took its slots).
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    /// Whether this node is a replica whose link to its master is up.
    fn replica_in_sync(&self) -> bool {
        self.conn()
            .and_then(|mut c| {
                redis::cmd("INFO")
                    .arg("replication")
                    .query::<String>(&mut c)
            })
            .is_ok_and(|info| info.contains("master_link_status:up"))
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn conn(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        client.get_connection_with_timeout(Duration::from_secs(1))
    }

    /// Polls until `check` holds on a connection to this node; panics after `within`.
    pub fn wait_until(&self, within: Duration, check: impl Fn(&mut redis::Connection) -> bool) {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(mut conn) = self.conn() {
                if check(&mut conn) {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("node {} did not get ready in {within:?}", self.port);
    }

    /// SIGSTOP: the process is frozen, as in a VM freeze; its connections
    /// stay open and unanswered until [`Self::resume`].
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// SIGCONT after [`Self::pause`].
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    fn signal(&self, signal: libc::c_int) {
        let child = self.child.as_ref().expect("a running node");
        let pid = i32::try_from(child.id()).expect("pid");
        // SAFETY: kill(2) on the pid of our own child, which has not been reaped.
        let sent = unsafe { libc::kill(pid, signal) };
        assert_eq!(sent, 0, "signal {signal} to node {}", self.port);
    }

    /// A field of `INFO` (e.g. `blocked_clients`), when the node answers.
    pub fn info_field(&self, field: &str) -> Option<i64> {
        let info: String = redis::cmd("INFO").query(&mut self.conn().ok()?).ok()?;
        info.lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse().ok())
    }

    /// kill -9, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A free port for a cluster node: its bus listens 10000 higher, so the port
/// must be at most 55535, and the bus port free too.
fn free_cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port <= 55535 && std::net::TcpListener::bind(("127.0.0.1", port + 10000)).is_ok() {
            return port;
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn deployment_dir(kind: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "baton-test-{kind}-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).expect("deployment dir");
    dir
}

/// A local Redis Cluster: three masters, a replica each.
pub struct RedisCluster {
    pub nodes: Vec<Node>,
    dir: PathBuf,
}

impl RedisCluster {
    /// Starts six cluster-enabled servers and forms the cluster; waits until
    /// every node reports `cluster_state:ok`. A failed node is noticed after
    /// one second (`cluster-node-timeout`), so failovers take a few seconds.
    pub fn start() -> Self {
        let dir = deployment_dir("cluster");
        let args: Vec<String> = [
            "--cluster-enabled",
            "yes",
            "--cluster-node-timeout",
            "1000",
            "--cluster-replica-validity-factor",
            "0",
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        let nodes: Vec<Node> = (0..6)
            .map(|i| {
                let mut node_args = args.clone();
                node_args.push("--cluster-config-file".into());
                node_args.push(format!("nodes-{i}.conf"));
                Node::start(&dir, &node_args, None)
            })
            .collect();
        let status = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)))
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-cli is installed");
        assert!(status.success(), "redis-cli --cluster create failed");
        let cluster = Self { nodes, dir };
        for node in &cluster.nodes {
            node.wait_until(Duration::from_secs(20), |conn| {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(conn)
                    .unwrap_or_default();
                info.contains("cluster_state:ok")
            });
        }
        // Replicas attach a moment after the cluster says ok: wait for them,
        // so a failover has someone to promote.
        cluster.wait_for_replicas(Duration::from_secs(20));
        cluster
    }

    /// The seed list for `BATON_REDIS_URL`.
    pub fn seeds(&self) -> String {
        urls(&self.nodes)
    }

    /// A connection to any live node.
    pub fn any_conn(&self) -> redis::Connection {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .find_map(|n| n.conn().ok())
            .expect("a live cluster node")
    }

    /// `CLUSTER NODES` as (port, is_master, master's port if a replica, failed).
    fn topology(&self) -> Vec<(u16, bool, Option<u16>, bool)> {
        let text: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut self.any_conn())
            .expect("CLUSTER NODES");
        let ids: Vec<(String, u16)> = text
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let port = f
                    .get(1)?
                    .split('@')
                    .next()?
                    .rsplit_once(':')?
                    .1
                    .parse()
                    .ok()?;
                Some((f[0].to_owned(), port))
            })
            .collect();
        text.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let port: u16 = f
                    .get(1)?
                    .split('@')
                    .next()?
                    .rsplit_once(':')?
                    .1
                    .parse()
                    .ok()?;
                let flags = f.get(2)?;
                let master = flags.contains("master");
                let failed = flags.contains("fail");
                let of = ids
                    .iter()
                    .find(|(id, _)| id == f.get(3).unwrap_or(&"-"))
                    .map(|(_, p)| *p);
                Some((port, master, of, failed))
            })
            .collect()
    }

    /// Waits until every master has a replica in sync.
    pub fn wait_for_replicas(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let topology = self.topology();
            let masters: Vec<u16> = topology
                .iter()
                .filter(|n| n.1 && !n.3)
                .map(|n| n.0)
                .collect();
            let covered = masters.len() == 3
                && masters.iter().all(|m| {
                    topology
                        .iter()
                        .any(|n| n.2 == Some(*m) && !n.3 && self.replica_in_sync(n.0))
                });
            if covered {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "replicas did not attach: {topology:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn replica_in_sync(&self, port: u16) -> bool {
        self.nodes
            .iter()
            .find(|n| n.port == port)
            .is_some_and(Node::replica_in_sync)
    }

    /// The port of the master that serves `key`'s slot now.
    pub fn master_of(&self, key: &str) -> u16 {
        self.serving_master(key)
            .unwrap_or_else(|| panic!("no master serves {key}'s slot"))
    }

    /// The port of the master that serves `key`'s slot, if the node asked
    /// lists one: in the middle of a failover, a node may list the slot
    /// under nobody for a moment.
    fn serving_master(&self, key: &str) -> Option<u16> {
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.any_conn())
            .expect("CLUSTER KEYSLOT");
        let slots: Vec<redis::Value> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut self.any_conn())
            .expect("CLUSTER SLOTS");
        for range in slots {
            let redis::Value::Array(items) = range else {
                continue;
            };
            let (Some(redis::Value::Int(from)), Some(redis::Value::Int(to))) =
                (items.first(), items.get(1))
            else {
                continue;
            };
            if (*from..=*to).contains(&i64::from(slot)) {
                if let Some(redis::Value::Array(master)) = items.get(2) {
                    if let Some(redis::Value::Int(port)) = master.get(1) {
                        return Some(u16::try_from(*port).expect("port"));
                    }
                }
            }
        }
        None
    }

    /// The port of a live replica of the master on `master`.
    pub fn replica_of(&self, master: u16) -> Option<u16> {
        self.topology()
            .into_iter()
            .find(|n| n.2 == Some(master) && !n.3)
            .map(|n| n.0)
    }

    /// kill -9 of the node on `port`.
    pub fn kill(&mut self, port: u16) {
        self.node(port).kill();
    }

    /// The node on `port`.
    pub fn node(&mut self, port: u16) -> &mut Node {
        self.nodes
            .iter_mut()
            .find(|n| n.port == port)
            .expect("a node on that port")
    }

    /// Waits until another node serves `key`'s slot (its replica was promoted);
    /// returns how long that took.
    pub fn wait_for_failover(&self, key: &str, old_master: u16, within: Duration) -> Duration {
        let started = Instant::now();
        loop {
            if self
                .serving_master(key)
                .is_some_and(|now| now != old_master)
            {
                return started.elapsed();
            }
            assert!(started.elapsed() < within, "no failover after {within:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        self.nodes.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Sentinel set: a master, a replica, three sentinels (quorum 2) that
/// notice a dead master after one second.
pub struct SentinelSet {
    pub master: Node,
    pub replica: Node,
    pub sentinels: Vec<Node>,
    pub name: String,
    dir: PathBuf,
}

/// A master and its replica in `dir`, the replica's link up.
fn master_and_replica(dir: &std::path::Path) -> (Node, Node) {
    let master = Node::start(dir, &[], None);
    let replica = Node::start(
        dir,
        &[
            "--replicaof".into(),
            "127.0.0.1".into(),
            master.port.to_string(),
        ],
        None,
    );
    replica.wait_until(Duration::from_secs(10), |conn| {
        redis::cmd("INFO")
            .arg("replication")
            .query::<String>(conn)
            .is_ok_and(|info| info.contains("master_link_status:up"))
    });
    (master, replica)
}

/// A standalone master with one replica and no sentinel, for the tests of
/// `BATON_REDIS_WAIT_REPLICAS` that stop the replica.
pub struct ReplicatedPair {
    pub master: Node,
    pub replica: Node,
    dir: PathBuf,
}

impl ReplicatedPair {
    pub fn start() -> Self {
        let dir = deployment_dir("replicated");
        let (master, replica) = master_and_replica(&dir);
        Self {
            master,
            replica,
            dir,
        }
    }
}

impl Drop for ReplicatedPair {
    fn drop(&mut self) {
        // SIGKILL ends a stopped process too.
        self.replica.kill();
        self.master.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl SentinelSet {
    pub fn start() -> Self {
        let dir = deployment_dir("sentinel");
        let (master, replica) = master_and_replica(&dir);
        let name = "mymaster".to_owned();
        let config = format!(
            "port {{port}}\nsentinel monitor {name} 127.0.0.1 {} 2\n\
             sentinel down-after-milliseconds {name} 1000\n\
             sentinel failover-timeout {name} 5000\n\
             sentinel parallel-syncs {name} 1\n",
            master.port
        );
        let sentinels: Vec<Node> = (0..3)
            .map(|_| Node::start(&dir, &["--sentinel".into()], Some(config.clone())))
            .collect();
        let set = Self {
            master,
            replica,
            sentinels,
            name,
            dir,
        };
        // Every sentinel must know the replica and the other sentinels before
        // a failover can be agreed.
        for sentinel in &set.sentinels {
            sentinel.wait_until(Duration::from_secs(20), |conn| {
                let info: Vec<String> = redis::cmd("SENTINEL")
                    .arg("MASTER")
                    .arg(&set.name)
                    .query(conn)
                    .unwrap_or_default();
                let field = |k: &str| {
                    info.iter()
                        .position(|f| f == k)
                        .and_then(|i| info.get(i + 1))
                        .and_then(|v| v.parse::<u32>().ok())
                        .unwrap_or(0)
                };
                field("num-slaves") >= 1 && field("num-other-sentinels") >= 2
            });
        }
        set
    }

    /// The sentinel list for `BATON_REDIS_URL`.
    pub fn sentinel_urls(&self) -> String {
        urls(&self.sentinels)
    }

    /// The master's port as the sentinels name it now.
    pub fn master_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|s| {
            let mut conn = s.conn().ok()?;
            let addr: Option<(String, String)> = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(&self.name)
                .query(&mut conn)
                .ok()?;
            addr?.1.parse().ok()
        })
    }
}

impl Drop for SentinelSet {
    fn drop(&mut self) {
        self.sentinels.clear();
        self.replica.kill();
        self.master.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts `make` once per test process, from a thread that lives as long as
/// the process (so its servers die with it).
fn shared<T: Send + Sync + 'static>(cell: &'static OnceLock<T>, make: fn() -> T) -> &'static T {
    cell.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(make());
            loop {
                std::thread::park();
            }
        });
        rx.recv().expect("deployment started")
    })
}

/// The cluster shared by the core tests of this process.
pub fn shared_cluster() -> &'static RedisCluster {
    static SHARED: OnceLock<RedisCluster> = OnceLock::new();
    shared(&SHARED, RedisCluster::start)
}

/// The Sentinel set shared by the core tests of this process.
pub fn shared_sentinels() -> &'static SentinelSet {
    static SHARED: OnceLock<SentinelSet> = OnceLock::new();
    shared(&SHARED, SentinelSet::start)
}

/// Settings for a baton on `cluster`, with a fresh key prefix.
pub fn cluster_settings(cluster: &RedisCluster) -> Settings {
    let mut settings = settings_for(&cluster.seeds(), &unique_prefix());
    settings.redis_mode = RedisMode::Cluster;
    settings
}

/// Settings for a baton on `set`, with a fresh key prefix.
pub fn sentinel_settings(set: &SentinelSet) -> Settings {
    let mut settings = settings_for(&set.sentinel_urls(), &unique_prefix());
    settings.redis_mode = RedisMode::Sentinel;
    settings.redis_sentinel_master = set.name.clone();
    settings
}

/// The nodes' URLs, comma-separated, as `BATON_REDIS_URL` takes a list.
fn urls(nodes: &[Node]) -> String {
    nodes.iter().map(Node::url).collect::<Vec<_>>().join(",")
}
