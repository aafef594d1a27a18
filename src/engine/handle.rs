//! The engine itself: what one instance's core holds (the caller of the
//! library with its connection, this instance's waiters, the change events,
//! the turns that keep costly reads and a flood of joins in check), how it
//! starts and stops, and its background tasks. The operations are the
//! leases' (`leases/`).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::channel::{Listener, NameChannels};
use super::connection::{Store, StoreConfig};
use super::error::Error;
use super::events::{Audience, Events};
use super::following::Followers;
use super::freezes::{follow, FreezeBook, Freezes};
use super::functions::invoker::Invoker;
use super::functions::library::{history_terms, LIBRARY};
use super::keys::Keys;
use super::notices::Notices;
use super::waiters::Registry;
use crate::config::{RedisMode, Settings};

/// The core: the Redis connection, the key layout, this instance's waiters
/// and the background tasks that serve them. Cheap to clone; every clone is
/// the same engine.
#[derive(Clone)]
pub struct Engine(Arc<EngineState>);

/// What every clone of an [`Engine`] shares.
struct EngineState {
    /// How this instance calls the library (the connection and the key
    /// layout among it).
    invoker: Arc<Invoker>,
    /// The freezes, as this instance holds them (its calls carry them
    /// through the invoker).
    book: Arc<FreezeBook>,
    /// This instance's waiters.
    waiters: Arc<Registry>,
    /// Cancelled by [`Engine::shutdown`]: every waiter gives up at once and
    /// the background tasks stop.
    shutdown: CancellationToken,
    tasks: TaskTracker,
    /// Every change on any instance, for watchers (`GET /events`).
    events: Arc<Events>,
    /// This instance's holders' streams.
    followers: Arc<Followers>,
    /// The deliverer of turn notices; `None` while they are off.
    notices: Option<Arc<Notices>>,
    /// Why Redis may evict baton's keys, if it may (checked at start).
    eviction: Arc<std::sync::Mutex<Option<String>>>,
    /// Turns for the reads whose cost grows with the data (a status call, a
    /// listing page): at most [`READS_AT_ONCE`] run at once, so that a flood
    /// of them queues here instead of crowding acquisitions out of Redis.
    reads: tokio::sync::Semaphore,
    /// Turns for an acquisition's first call (see [`JOINS_AT_ONCE`]).
    joins: tokio::sync::Semaphore,
}

/// Reads whose cost grows with the data (a status call, or a listing page
/// with its status calls) that run against Redis at once, per instance. Each
/// is bounded (100 leases and 100 waiters a status, 100 names a page), so this
/// bounds the Redis time they take from other work at any moment.
pub const READS_AT_ONCE: usize = 1;

/// Acquisitions whose first call runs against Redis at once, per instance;
/// a flood of them (a CI fleet starting together, 10,000 waits opened over
/// one HTTP/2 connection) queues here, each holding a few hundred bytes,
/// rather than as thousands of Redis calls in flight, each holding a few
/// kilobytes. Redis runs one script at a time anyway: this many keep it busy.
pub const JOINS_AT_ONCE: usize = 64;

impl Engine {
    /// Connects to Redis lazily and starts the background tasks (the
    /// subscription to the lines' channels, the keep-alives), waiting up to
    /// two seconds for the first subscription so that a service that starts
    /// with Redis up is ready at once.
    ///
    /// # Errors
    /// When the Redis URL cannot be read.
    pub async fn start(settings: &Settings) -> Result<Self, redis::RedisError> {
        let store = Store::connect_lazy(
            &StoreConfig {
                mode: settings.redis_mode,
                url: settings.redis_url.clone(),
                sentinel_master: settings.redis_sentinel_master.clone(),
                call_timeout: settings.redis_timeout,
                wait_replicas: settings.redis_wait_replicas,
            },
            LIBRARY.code(),
        )?;
        let keys = Keys::new(settings.key_prefix.clone());
        let shutdown = CancellationToken::new();
        let tasks = TaskTracker::new();
        let audience = Arc::new(Audience::new(settings.redis_mode == RedisMode::Cluster));
        let events = Events::start(
            &store,
            audience.clone(),
            keys.events_channel().to_owned(),
            settings.max_event_streams,
            shutdown.clone(),
            &tasks,
        );
        let book = Arc::new(FreezeBook::default());
        let (freeze_pubsub, freeze_notices) = store.pubsub(shutdown.clone());
        let invoker = Arc::new(Invoker::new(
            store,
            keys,
            audience,
            history_terms(settings.history_max, settings.history_days),
            book.clone(),
        ));
        tasks.spawn(follow(
            Freezes {
                invoker: invoker.clone(),
                book: book.clone(),
            },
            freeze_pubsub,
            freeze_notices,
            shutdown.clone(),
        ));
        // Turn notices, while BATON_WEBHOOK_HOSTS names where they may go.
        let (notices, notices_due) = if settings.webhook_hosts.is_empty() {
            (None, None)
        } else {
            let (due, hear) = tokio::sync::mpsc::unbounded_channel();
            let notices = Notices::start(
                invoker.clone(),
                &settings.webhook_secret,
                hear,
                shutdown.clone(),
                &tasks,
            )
            .map_err(|err| {
                redis::RedisError::from((
                    redis::ErrorKind::Client,
                    "no HTTP client for turn notices",
                    err.to_string(),
                ))
            })?;
            (Some(notices), Some(due))
        };
        let (channels, channel_notices) =
            NameChannels::open(invoker.store(), shutdown.clone(), tasks.clone());
        let waiters = Registry::start(
            invoker.clone(),
            book.clone(),
            channels.clone(),
            settings.max_waiters,
            shutdown.clone(),
            tasks.clone(),
            notices_due,
        );
        let followers =
            Followers::start(invoker.clone(), channels.clone(), shutdown.clone(), &tasks);
        let listeners: Vec<Arc<dyn Listener>> = vec![waiters.clone(), followers.clone()];
        tasks.spawn(channels.hear(channel_notices, listeners, shutdown.clone()));
        let engine = Self(Arc::new(EngineState {
            invoker,
            book,
            followers,
            waiters,
            shutdown,
            tasks,
            events,
            notices,
            eviction: Arc::default(),
            reads: tokio::sync::Semaphore::new(READS_AT_ONCE),
            joins: tokio::sync::Semaphore::new(JOINS_AT_ONCE),
        }));
        let mut connected = engine.0.waiters.connected();
        if tokio::time::timeout(Duration::from_secs(2), connected.wait_for(|g| *g > 0))
            .await
            .is_err()
        {
            tracing::warn!("Redis does not answer yet; serving anyway (readyz says 503)");
        }
        engine.0.tasks.spawn(check_eviction(engine.clone()));
        engine.0.tasks.spawn(load_library(engine.clone()));
        Ok(engine)
    }

    /// The freezes: in Redis, and as this instance holds them.
    pub fn freezes(&self) -> Freezes {
        Freezes {
            invoker: self.0.invoker.clone(),
            book: self.0.book.clone(),
        }
    }

    /// The change events of every instance, for watchers.
    pub fn events(&self) -> &Arc<Events> {
        &self.0.events
    }

    /// Whether Redis answers a PING now.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when it does not.
    pub async fn ping(&self) -> Result<(), Error> {
        self.store().ping().await
    }

    /// A sentence for `/readyz` when Redis's `maxmemory-policy` could evict
    /// baton's keys (every one has a TTL, so any policy but `noeviction` may).
    pub fn eviction_warning(&self) -> Option<String> {
        self.0
            .eviction
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many requests wait on this instance now.
    pub fn waiting(&self) -> usize {
        self.0.waiters.len()
    }

    /// Makes every waiter give up at once (503 `shutting-down`); the
    /// background tasks stop once the waiters have left.
    pub fn stop_waiting(&self) {
        self.0.shutdown.cancel();
    }

    /// Stops waiting and waits (up to two seconds) for the background tasks.
    pub async fn shutdown(&self) {
        self.0.shutdown.cancel();
        self.0.tasks.close();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.0.tasks.wait()).await;
    }

    pub(in crate::engine) fn invoker(&self) -> &Invoker {
        &self.0.invoker
    }

    /// The freezes, as this instance holds them.
    pub(in crate::engine) fn book(&self) -> &Arc<FreezeBook> {
        &self.0.book
    }

    pub(in crate::engine) fn store(&self) -> &Store {
        self.0.invoker.store()
    }

    pub(in crate::engine) fn keys(&self) -> &Keys {
        self.0.invoker.keys()
    }

    /// Waits for a turn to run a read whose cost grows with the data; the
    /// turn lasts as long as the permit.
    pub(in crate::engine) async fn read_turn(&self) -> tokio::sync::SemaphorePermit<'_> {
        // The semaphore is never closed.
        self.0
            .reads
            .acquire()
            .await
            .expect("the read semaphore stays open")
    }

    /// Sleeps for `pause`: `false` when the service began shutting down meanwhile.
    pub(in crate::engine) async fn pause(&self, pause: Duration) -> bool {
        tokio::select! {
            () = self.0.shutdown.cancelled() => false,
            () = tokio::time::sleep(pause) => true,
        }
    }

    /// Waits for a turn to make an acquisition's first call.
    pub(in crate::engine) async fn join_turn(&self) -> tokio::sync::SemaphorePermit<'_> {
        // The semaphore is never closed.
        self.0
            .joins
            .acquire()
            .await
            .expect("the join semaphore stays open")
    }

    pub(in crate::engine) fn followers(&self) -> &Arc<Followers> {
        &self.0.followers
    }

    /// The deliverer of turn notices, while they are on.
    pub(in crate::engine) fn notices(&self) -> Option<&Arc<Notices>> {
        self.0.notices.as_ref()
    }

    pub(in crate::engine) fn waiters(&self) -> &Arc<Registry> {
        &self.0.waiters
    }
}

/// Loads the library of operations at start, before the first request needs
/// it (a call that finds it missing loads it too); retried until Redis answers.
async fn load_library(engine: Engine) {
    while let Err(err) = engine.store().load_library().await {
        tracing::debug!(%err, "loading the library failed; retrying");
        tokio::select! {
            () = engine.0.shutdown.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Warns once at start when Redis could evict baton's keys; retried until
/// Redis answers.
async fn check_eviction(engine: Engine) {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg("maxmemory-policy");
    loop {
        match engine.store().query::<Vec<String>>(&cmd).await {
            Ok(reply) => {
                if let Some(policy) = reply.get(1).filter(|p| p.as_str() != "noeviction") {
                    let warning = format!(
                        "Redis maxmemory-policy is {policy}: under memory pressure Redis may evict baton's keys (live leases among them); set it to noeviction"
                    );
                    tracing::warn!("{warning}");
                    *engine.0.eviction.lock().unwrap_or_else(|e| e.into_inner()) = Some(warning);
                }
                return;
            }
            // CONFIG may be disabled (managed Redis): nothing to check.
            Err(Error::Protocol(_)) => return,
            Err(_) => {
                tokio::select! {
                    () = engine.0.shutdown.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
}
