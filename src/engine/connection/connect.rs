//! How a connection to Redis is made in each deployment (one server, a Redis
//! Cluster, a master found through Redis Sentinel): the settings, the
//! cluster client, the sentinel-named master and a cluster's masters, shared
//! by the call connection ([`super::store`]) and the subscription
//! ([`super::pubsub`]); and the connection one call runs on, whichever the
//! deployment.

use std::sync::Mutex;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Client, Cmd, IntoConnectionInfo, Pipeline, RedisFuture, RedisResult,
    Value,
};

use crate::config::RedisMode;

/// How the service talks to Redis.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub mode: RedisMode,
    /// Standalone: one `redis://` or `rediss://` URL, with password and db.
    /// Cluster: comma-separated seed nodes. Sentinel: comma-separated sentinels
    /// (their password, if any, is also the master's).
    pub url: String,
    /// The master name to ask the sentinels for.
    pub sentinel_master: String,
    /// The longest any one call may take, reconnects and redirects included.
    pub call_timeout: Duration,
    /// How many replicas must acknowledge an acquisition (`WAIT`); 0: none.
    pub wait_replicas: u32,
}

/// The shortest of a second and the call budget: a connection attempt must
/// leave time to answer.
pub(crate) fn connect_timeout(call_timeout: Duration) -> Duration {
    call_timeout.min(Duration::from_secs(1))
}

/// `a:1, redis://b:2` -> `["redis://a:1", "redis://b:2"]`.
pub(crate) fn seed_urls(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            if s.contains("://") {
                s.to_owned()
            } else {
                format!("redis://{s}")
            }
        })
        .collect()
}

pub(crate) fn cluster_client(
    config: &StoreConfig,
    push: Option<tokio::sync::mpsc::UnboundedSender<redis::PushInfo>>,
) -> RedisResult<ClusterClient> {
    let mut builder = ClusterClient::builder(seed_urls(&config.url))
        // Retries (MOVED, a failed node) happen inside the call budget.
        .retries(3)
        .min_retry_wait(50)
        .max_retry_wait(300)
        .connection_timeout(connect_timeout(config.call_timeout))
        .response_timeout(config.call_timeout);
    if let Some(push) = push {
        builder = builder
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(push);
    }
    builder.build()
}

/// The master that the sentinels name, followed across failovers: a call
/// that fails drops the connection, and the next call asks the sentinels again,
/// so after a failover baton serves from the promoted replica without a restart.
pub(crate) struct SentinelMaster {
    /// Asks the sentinels; one lookup at a time.
    lookup: tokio::sync::Mutex<SentinelClient>,
    /// The connection to the current master, while it works.
    current: Mutex<Option<MultiplexedConnection>>,
    config: AsyncConnectionConfig,
}

impl SentinelMaster {
    pub(crate) fn new(config: &StoreConfig) -> RedisResult<Self> {
        let sentinels = seed_urls(&config.url);
        let first = sentinels
            .first()
            .ok_or_else(|| {
                redis::RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "no sentinel in BATON_REDIS_URL",
                ))
            })?
            .as_str()
            .into_connection_info()?;
        // The master is reached with the sentinels' credentials and db.
        let mut node = SentinelNodeConnectionInfo::default()
            .set_redis_connection_info(first.redis_settings().clone());
        if matches!(first.addr(), redis::ConnectionAddr::TcpTls { .. }) {
            node = node.set_tls_mode(redis::TlsMode::Secure);
        }
        let lookup = SentinelClient::build(
            sentinels,
            config.sentinel_master.clone(),
            Some(node),
            SentinelServerType::Master,
        )?;
        Ok(Self {
            lookup: tokio::sync::Mutex::new(lookup),
            current: Mutex::default(),
            config: AsyncConnectionConfig::new()
                .set_connection_timeout(Some(connect_timeout(config.call_timeout)))
                .set_response_timeout(Some(config.call_timeout)),
        })
    }

    /// The connection to the master, asking the sentinels for it if there is none.
    pub(crate) async fn connection(&self) -> RedisResult<MultiplexedConnection> {
        if let Some(conn) = self.lock().clone() {
            return Ok(conn);
        }
        let mut lookup = self.lookup.lock().await;
        if let Some(conn) = self.lock().clone() {
            return Ok(conn);
        }
        let conn = self.connect_with(&mut lookup, &self.config).await?;
        *self.lock() = Some(conn.clone());
        Ok(conn)
    }

    /// A new connection of its own to the current master, e.g. for pub/sub.
    pub(crate) async fn client(&self) -> RedisResult<Client> {
        self.lookup.lock().await.async_get_client().await
    }

    async fn connect_with(
        &self,
        lookup: &mut SentinelClient,
        config: &AsyncConnectionConfig,
    ) -> RedisResult<MultiplexedConnection> {
        let client = lookup.async_get_client().await?;
        let conn = client
            .get_multiplexed_async_connection_with_config(config)
            .await?;
        tracing::info!(master = %client.get_connection_info().addr(), "connected to the master named by the sentinels");
        Ok(conn)
    }

    /// Drops the connection after a failure: the next call asks the sentinels.
    pub(crate) fn forget(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<MultiplexedConnection>> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The masters with slots in `CLUSTER NODES` output, as (host, port).
pub(super) fn cluster_masters(nodes: &str) -> Vec<(String, u16)> {
    nodes
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let flags = fields.get(2)?;
            let serving = flags.split(',').any(|f| f == "master")
                && !flags.split(',').any(|f| f == "fail" || f == "noaddr")
                && fields.len() > 8;
            if !serving {
                return None;
            }
            // ip:port@cport[,hostname]
            let address = fields.get(1)?.split(['@', ',']).next()?;
            let (host, port) = address.rsplit_once(':')?;
            Some((host.to_owned(), port.parse().ok()?))
        })
        .collect()
}

/// A connection for one call, whichever the deployment.
#[derive(Clone)]
pub(super) enum Conn {
    Manager(ConnectionManager),
    Cluster(ClusterConnection),
    Plain(MultiplexedConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Manager(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
            Self::Plain(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Manager(c) => c.req_packed_commands(cmd, offset, count),
            Self::Cluster(c) => c.req_packed_commands(cmd, offset, count),
            Self::Plain(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Manager(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
            Self::Plain(c) => c.get_db(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_comma_separated_with_or_without_scheme() {
        assert_eq!(
            seed_urls(" 127.0.0.1:7000, redis://h:7001 ,,rediss://:pw@h:7002"),
            [
                "redis://127.0.0.1:7000",
                "redis://h:7001",
                "rediss://:pw@h:7002"
            ]
        );
    }

    #[test]
    fn cluster_masters_are_the_live_masters_with_slots() {
        let nodes = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b2 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922
c3 127.0.0.1:7002@17002,host.example master,fail - 0 0 3 connected
d4 127.0.0.1:7003@17003 slave a1 0 0 1 connected
e5 127.0.0.1:7004@17004 master - 0 0 5 connected 10923-16383
f6 127.0.0.1:7005@17005 master - 0 0 6 connected
";
        assert_eq!(
            cluster_masters(nodes),
            [
                ("127.0.0.1".to_owned(), 7000),
                ("127.0.0.1".to_owned(), 7001),
                ("127.0.0.1".to_owned(), 7004),
            ]
        );
    }
}
