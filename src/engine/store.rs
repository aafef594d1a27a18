//! The connection to Redis, with every call bounded in time so that an outage
//! gives a prompt error instead of a hang.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, ScriptInvocation, Value};

use super::Error;

/// How the service talks to Redis.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// `redis://`, `rediss://`, with password and db as redis-rs reads them.
    pub url: String,
    /// The longest any one call may take, reconnects included.
    pub call_timeout: Duration,
}

/// A cheap handle to the multiplexed Redis connection.
#[derive(Clone)]
pub struct Store {
    client: Arc<Client>,
    conn: ConnectionManager,
    call_timeout: Duration,
}

impl Store {
    /// Prepares the connection without making it, so that the service starts
    /// (and answers `/readyz` with 503) while Redis is down.
    ///
    /// # Errors
    /// When the URL cannot be read.
    pub fn connect_lazy(config: &StoreConfig) -> Result<Self, redis::RedisError> {
        let client = Client::open(config.url.as_str())?;
        // A short reconnect cycle: an outage must answer 503 in about a second,
        // and recovery must be noticed as quickly.
        let manager_config = ConnectionManagerConfig::new()
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(300))
            .set_connection_timeout(Some(Duration::from_millis(800)))
            .set_response_timeout(Some(config.call_timeout));
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), manager_config)?;
        Ok(Self {
            client: Arc::new(client),
            conn,
            call_timeout: config.call_timeout,
        })
    }

    /// The client, for the pub/sub connection of the waiters.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Runs one script, within the call timeout.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when Redis fails or does not answer in time.
    pub async fn eval(&self, invocation: &ScriptInvocation<'_>) -> Result<Value, Error> {
        let mut conn = self.conn.clone();
        match tokio::time::timeout(self.call_timeout, invocation.invoke_async(&mut conn)).await {
            Ok(reply) => Ok(reply?),
            Err(_) => Err(Error::Unavailable("redis did not answer in time".into())),
        }
    }

    /// Runs one plain command, within the call timeout.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when Redis fails or does not answer in time.
    pub async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, Error> {
        let mut conn = self.conn.clone();
        match tokio::time::timeout(self.call_timeout, cmd.query_async(&mut conn)).await {
            Ok(reply) => Ok(reply?),
            Err(_) => Err(Error::Unavailable("redis did not answer in time".into())),
        }
    }

    /// Whether Redis answers a PING now.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when it does not.
    pub async fn ping(&self) -> Result<(), Error> {
        self.query::<String>(&redis::cmd("PING")).await.map(|_| ())
    }
}
