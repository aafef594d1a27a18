//! The connection to Redis, in any of its three deployments (one server, a
//! Redis Cluster, a master found through Redis Sentinel), with every call
//! bounded in time so that an outage or a failover gives a prompt error
//! instead of a hang.
//!
//! Operations run as `FCALL` of baton's library wherever their keys live; the
//! library is loaded where it is missing (a fresh node, a restarted one), and
//! on a cluster the load goes to every master. All keys of one lock or
//! semaphore share a hash tag, so each call runs on one node.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterConfig;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, ResponsePolicy, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{Client, Cmd, RedisResult, Value};

use super::connect::{
    cluster_client, cluster_masters, connect_timeout, Conn, SentinelMaster, StoreConfig,
};
use super::pubsub::{PubSub, PubSubNotices, Source};
use crate::config::RedisMode;
use crate::engine::error::Error;

/// A Redis node that [`Store::scan`] walks: one per cluster master, one in
/// the other modes. Opaque; its order is stable while the topology is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Node(Option<(String, u16)>);

/// A cheap handle to the multiplexed connection(s) to Redis.
#[derive(Clone)]
pub struct Store(Arc<StoreState>);

/// What every clone of a [`Store`] shares.
struct StoreState {
    config: StoreConfig,
    backend: Backend,
    call_timeout: Duration,
    wait_replicas: u32,
    /// The code of baton's library, loaded where a call finds it missing.
    library: &'static str,
    /// Held while the library is being loaded.
    loading: tokio::sync::Mutex<()>,
}

enum Backend {
    Standalone {
        client: Box<Client>,
        conn: ConnectionManager,
    },
    Cluster {
        conn: ClusterConnection,
    },
    Sentinel(Arc<SentinelMaster>),
}

impl Store {
    /// Prepares the connection without making it, so that the service starts
    /// (and answers `/readyz` with 503) while Redis is down. `library` is the
    /// code of baton's library, which the store loads wherever a call finds
    /// it missing.
    ///
    /// # Errors
    /// When the URL (or a seed or sentinel in it) cannot be read.
    pub fn connect_lazy(
        config: &StoreConfig,
        library: &'static str,
    ) -> Result<Self, redis::RedisError> {
        let backend = match config.mode {
            RedisMode::Standalone => {
                let client = Client::open(config.url.trim())?;
                // A short reconnect cycle: an outage must answer 503 in about a
                // second, and recovery must be noticed as quickly.
                let manager_config = ConnectionManagerConfig::new()
                    .set_number_of_retries(2)
                    .set_min_delay(Duration::from_millis(50))
                    .set_max_delay(Duration::from_millis(300))
                    .set_connection_timeout(Some(connect_timeout(config.call_timeout)))
                    .set_response_timeout(Some(config.call_timeout));
                let conn = ConnectionManager::new_lazy_with_config(client.clone(), manager_config)?;
                Backend::Standalone {
                    client: Box::new(client),
                    conn,
                }
            }
            RedisMode::Cluster => {
                let client = cluster_client(config, None)?;
                let conn = client.get_pending_async_connection_with_config(
                    ClusterConfig::new()
                        .set_connection_timeout(connect_timeout(config.call_timeout))
                        .set_response_timeout(config.call_timeout),
                );
                Backend::Cluster { conn }
            }
            RedisMode::Sentinel => Backend::Sentinel(Arc::new(SentinelMaster::new(config)?)),
        };
        Ok(Self(Arc::new(StoreState {
            config: config.clone(),
            backend,
            call_timeout: config.call_timeout,
            wait_replicas: config.wait_replicas,
            library,
            loading: tokio::sync::Mutex::new(()),
        })))
    }

    /// Starts this instance's subscription connection, which lives until
    /// `stop`; see [`PubSub`].
    pub fn pubsub(&self, stop: tokio_util::sync::CancellationToken) -> (PubSub, PubSubNotices) {
        let source = match &self.0.backend {
            Backend::Standalone { client, .. } => Source::Server((**client).clone()),
            Backend::Cluster { .. } => Source::Cluster(self.0.config.clone()),
            Backend::Sentinel(master) => Source::Sentinel(master.clone()),
        };
        PubSub::start(source, self.0.call_timeout, stop)
    }

    /// Runs one operation of baton's library (an `FCALL`, see
    /// [`crate::engine::functions`]), within the call timeout, on the node that holds
    /// its keys; where the library is missing (a fresh or restarted Redis, a
    /// new cluster node), loads it and calls again.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when Redis fails or does not answer in time.
    pub(crate) async fn fcall(&self, call: &Cmd) -> Result<Value, Error> {
        self.bounded(|mut conn| async move {
            match call.query_async::<Value>(&mut conn).await {
                Err(err) if is_missing_function(&err) => {
                    // One load at a time; a call that waited for another's
                    // finds the library there.
                    let _loading = self.0.loading.lock().await;
                    match call.query_async::<Value>(&mut conn).await {
                        Err(err) if is_missing_function(&err) => {
                            load_library(&mut conn, self.0.library).await?;
                            call.query_async(&mut conn).await
                        }
                        other => other,
                    }
                }
                other => other,
            }
        })
        .await
    }

    /// Loads baton's library (on every master of a cluster) unless it is there.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when Redis fails or does not answer in time.
    pub(crate) async fn load_library(&self) -> Result<(), Error> {
        self.bounded(|mut conn| async move {
            load_library(&mut conn, self.0.library).await?;
            Ok(Value::Okay)
        })
        .await
        .map(|_| ())
    }

    /// Runs one plain command, within the call timeout.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when Redis fails or does not answer in time.
    pub async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, Error> {
        let value = self
            .bounded(|mut conn| async move { cmd.query_async::<Value>(&mut conn).await })
            .await?;
        redis::from_redis_value(value).map_err(|e| Error::Protocol(e.to_string()))
    }

    /// Whether Redis answers a PING now (every master, on a cluster).
    ///
    /// # Errors
    /// [`Error::Unavailable`] when it does not.
    pub async fn ping(&self) -> Result<(), Error> {
        let cmd = redis::cmd("PING");
        self.bounded(|mut conn| {
            let cmd = &cmd;
            async move {
                match &mut conn {
                    Conn::Cluster(cluster) => {
                        let all_masters = RoutingInfo::MultiNode((
                            MultipleNodeRoutingInfo::AllMasters,
                            Some(ResponsePolicy::AllSucceeded),
                        ));
                        cluster.route_command(cmd.clone(), all_masters).await
                    }
                    _ => cmd.query_async(&mut conn).await,
                }
            }
        })
        .await
        .map(|_| ())
    }

    /// Waits until the configured number of replicas have every write this
    /// instance made on the node of `mark` so far, a grant made by another
    /// instance's script included (Redis `WAIT`). Nothing to do when
    /// `BATON_REDIS_WAIT_REPLICAS` is 0.
    ///
    /// `WAIT` counts the writes of the connection it is sent on, so it follows
    /// a small write of its own on that connection (`mark`, a key in the
    /// name's slot that expires in seconds), in one pipeline: whatever that
    /// node wrote before the mark (the grant) has reached the replicas when
    /// the mark has.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when fewer replicas acknowledged in time; the
    /// caller undoes what it took.
    pub async fn wait_for_replicas(&self, mark: &str) -> Result<(), Error> {
        let wanted = self.0.wait_replicas;
        if wanted == 0 {
            return Ok(());
        }
        // Half the call budget, so the answer (503 or 201) comes within it.
        let wait_ms =
            u64::try_from((self.0.call_timeout / 2).as_millis().max(1)).unwrap_or(u64::MAX);
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(mark)
            .arg(1)
            .arg("PX")
            .arg(5000)
            .ignore();
        pipe.cmd("WAIT").arg(wanted).arg(wait_ms);
        let acked = self
            .bounded(|mut conn| {
                let pipe = &pipe;
                async move {
                    let replies = match &mut conn {
                        Conn::Cluster(cluster) => {
                            let node = SingleNodeRoutingInfo::SpecificNode(Route::with_key(
                                mark,
                                SlotAddr::Master,
                            ));
                            cluster.route_pipeline(pipe.clone(), 0, 2, node).await?
                        }
                        _ => pipe.query_async::<Vec<Value>>(&mut conn).await?,
                    };
                    Ok(replies.into_iter().last().unwrap_or(Value::Nil))
                }
            })
            .await?;
        let acked: u32 =
            redis::from_redis_value(acked).map_err(|e| Error::Protocol(e.to_string()))?;
        if acked >= wanted {
            Ok(())
        } else {
            crate::telemetry::record_replica_wait_failure();
            Err(Error::Unavailable(
                format!("{acked} of {wanted} replicas acknowledged in {wait_ms} ms").into(),
            ))
        }
    }

    /// The nodes to [`scan`](Self::scan) to see every key: every master of a
    /// cluster, sorted by address; the one server otherwise.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when Redis does not answer.
    pub async fn nodes(&self) -> Result<Vec<Node>, Error> {
        if !matches!(self.0.backend, Backend::Cluster { .. }) {
            return Ok(vec![Node(None)]);
        }
        let text: String = self.query(redis::cmd("CLUSTER").arg("NODES")).await?;
        let mut masters = cluster_masters(&text);
        masters.sort();
        masters.dedup();
        if masters.is_empty() {
            return Err(Error::Unavailable("the cluster names no master".into()));
        }
        Ok(masters.into_iter().map(|m| Node(Some(m))).collect())
    }

    /// One SCAN step on `node`: keys matching `pattern` of type `key_type`,
    /// about `count` examined, and the cursor to continue with (0: done).
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the node does not answer.
    pub async fn scan(
        &self,
        node: &Node,
        cursor: u64,
        pattern: &str,
        count: usize,
        key_type: &str,
    ) -> Result<(u64, Vec<String>), Error> {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count)
            .arg("TYPE")
            .arg(key_type);
        let reply = self
            .bounded(|mut conn| {
                let cmd = &cmd;
                async move {
                    match (&mut conn, &node.0) {
                        (Conn::Cluster(cluster), Some((host, port))) => {
                            let at = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                                host: host.clone(),
                                port: *port,
                            });
                            cluster.route_command(cmd.clone(), at).await
                        }
                        _ => cmd.query_async(&mut conn).await,
                    }
                }
            })
            .await?;
        redis::from_redis_value(reply).map_err(|e| Error::Protocol(e.to_string()))
    }

    /// The command a script uses to announce an event on a per-name channel:
    /// `SPUBLISH` on a cluster (only the channel's shard hears it), `PUBLISH`
    /// elsewhere; [`PubSub::ask_shard`] listens with the matching one.
    pub fn shard_publish_command(&self) -> &'static str {
        match self.0.backend {
            Backend::Cluster { .. } => "SPUBLISH",
            _ => "PUBLISH",
        }
    }

    /// Runs `call` on a connection to the right node(s) within the call
    /// timeout; a failed call makes the Sentinel mode ask for the master again.
    async fn bounded<'a, F, Fut>(&'a self, call: F) -> Result<Value, Error>
    where
        F: FnOnce(Conn) -> Fut + 'a,
        Fut: std::future::Future<Output = RedisResult<Value>> + 'a,
    {
        let attempt = async {
            let conn = match &self.0.backend {
                Backend::Standalone { conn, .. } => Conn::Manager(conn.clone()),
                Backend::Cluster { conn, .. } => Conn::Cluster(conn.clone()),
                Backend::Sentinel(master) => Conn::Plain(master.connection().await?),
            };
            call(conn).await
        };
        // Boxed: a redis-rs call is a future of about 3.5 KiB, which every
        // future that awaits it would otherwise carry (a waiter's for its
        // whole wait); on the heap it lives only while the call runs.
        let attempt = Box::pin(tokio::time::timeout(self.0.call_timeout, attempt));
        // Counted and watched for outages (logged once each way).
        let outcome = match attempt.await {
            Ok(Ok(value)) => {
                crate::telemetry::redis_answered();
                return Ok(value);
            }
            Ok(Err(err)) => {
                crate::telemetry::redis_failed(&err);
                err.into()
            }
            Err(_) => {
                crate::telemetry::redis_timed_out();
                Error::Unavailable("redis did not answer in time".into())
            }
        };
        if let (Backend::Sentinel(master), Error::Unavailable(_)) = (&self.0.backend, &outcome) {
            master.forget();
        }
        Err(outcome)
    }
}

/// Whether `err` says that an `FCALL`'s function is not loaded on the node.
fn is_missing_function(err: &redis::RedisError) -> bool {
    err.detail()
        .is_some_and(|detail| detail.contains("Function not found"))
}

/// `FUNCTION LOAD REPLACE` of the library: its name carries its version, so
/// replacing it replaces it with itself (and on a cluster, every master gets it).
async fn load_library(conn: &mut Conn, code: &str) -> RedisResult<()> {
    redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(code)
        .query_async::<Value>(conn)
        .await
        .map(|_| ())
}
