//! This instance's subscriptions to Redis pub/sub, the same over one server, a
//! Redis Cluster and Sentinel: channels come and go while the connection
//! lives, messages arrive as [`PubSubNotice::Message`], and [`PubSubNotice::Lost`] and
//! [`PubSubNotice::Subscribed`] say that messages may have been missed (a
//! disconnection, a reconnection, a failover), so whoever waits on one must
//! check Redis again.
//!
//! - One server: a dedicated RESP2 pub/sub connection, made again after a
//!   failure, every channel subscribed again.
//! - Sentinel: the same, to the master the sentinels name at each connection,
//!   so it follows a failover by itself.
//! - Cluster: a RESP3 cluster connection whose push messages carry the
//!   events. Shard channels use `SSUBSCRIBE` on the channel's slot (an event
//!   travels to one shard, not to every node); redis-rs subscribes them again
//!   after a reconnect or a slot move. Broadcast channels use `SUBSCRIBE`.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use redis::cluster::ClusterConfig;
use redis::cluster_async::ClusterConnection;
use redis::{Client, PushKind, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::connect::{cluster_client, SentinelMaster, StoreConfig};

/// What the subscription connection reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PubSubNotice {
    /// A message published on a subscribed channel.
    Message { channel: String, payload: Vec<u8> },
    /// The connection (or, on a cluster, a node's) is lost: messages may be
    /// missed until [`PubSubNotice::Subscribed`]. Re-check everything that waits.
    Lost,
    /// Every tracked channel is subscribed (again), on a new connection:
    /// messages may have been missed before. Re-check everything that waits.
    Subscribed,
}

/// The stream of [`PubSubNotice`]s of one [`PubSub`].
pub type PubSubNotices = mpsc::UnboundedReceiver<PubSubNotice>;

/// Which pub/sub a channel uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ChannelKind {
    /// Classic `SUBSCRIBE`/`PUBLISH`: on a cluster, heard on every node.
    Broadcast,
    /// `SSUBSCRIBE`/`SPUBLISH` on a cluster (the channel's shard only), classic
    /// elsewhere; see [`super::store::Store::shard_publish_command`].
    Shard,
}

struct Control {
    subscribe: bool,
    kind: ChannelKind,
    channel: String,
    /// Whether Redis confirmed the change.
    done: oneshot::Sender<bool>,
}

/// A handle to the instance's subscription connection; cheap to clone. The
/// connection's task stops when the token given to
/// [`super::store::Store::pubsub`] is cancelled.
#[derive(Clone)]
pub struct PubSub {
    control: mpsc::UnboundedSender<Control>,
}

/// Where the subscription connection goes.
pub(super) enum Source {
    Server(Client),
    Cluster(StoreConfig),
    Sentinel(Arc<SentinelMaster>),
}

impl PubSub {
    pub(super) fn start(
        source: Source,
        call_timeout: Duration,
        stop: CancellationToken,
    ) -> (Self, PubSubNotices) {
        let (control, commands) = mpsc::unbounded_channel();
        let (notices, receiver) = mpsc::unbounded_channel();
        let task = Task {
            commands,
            notices,
            tracked: HashSet::new(),
            call_timeout,
            stop,
        };
        match source {
            Source::Cluster(config) => tokio::spawn(task.run_cluster(config)),
            other => tokio::spawn(task.run_server(other)),
        };
        (Self { control }, receiver)
    }

    /// Subscribes to a broadcast channel (classic pub/sub). `true` once Redis
    /// confirmed it; `false` at once while disconnected (or when it failed):
    /// the channel stays tracked, is subscribed on reconnecting, and a
    /// [`PubSubNotice::Subscribed`] follows.
    pub async fn subscribe(&self, channel: &str) -> bool {
        self.send(true, ChannelKind::Broadcast, channel).await
    }

    pub async fn unsubscribe(&self, channel: &str) -> bool {
        self.send(false, ChannelKind::Broadcast, channel).await
    }

    /// Asks for a per-name channel (sharded on a cluster) to be subscribed
    /// (`subscribe`) or let go of, at once and in the order asked; the answer says whether Redis
    /// confirmed it, as [`Self::subscribe`] does (an error: the task stopped).
    pub fn ask_shard(&self, subscribe: bool, channel: &str) -> oneshot::Receiver<bool> {
        self.ask(subscribe, ChannelKind::Shard, channel)
    }

    fn ask(&self, subscribe: bool, kind: ChannelKind, channel: &str) -> oneshot::Receiver<bool> {
        let (done, confirmed) = oneshot::channel();
        let control = Control {
            subscribe,
            kind,
            channel: channel.to_owned(),
            done,
        };
        // An error means the task stopped: nothing will be heard anyway, and
        // the dropped sender answers the receiver with an error.
        let _ = self.control.send(control);
        confirmed
    }

    async fn send(&self, subscribe: bool, kind: ChannelKind, channel: &str) -> bool {
        self.ask(subscribe, kind, channel).await.unwrap_or(false)
    }
}

/// The task that owns the subscription connection.
struct Task {
    commands: mpsc::UnboundedReceiver<Control>,
    notices: mpsc::UnboundedSender<PubSubNotice>,
    /// Every channel subscribed, to subscribe again after a reconnect.
    tracked: HashSet<(ChannelKind, String)>,
    call_timeout: Duration,
    stop: CancellationToken,
}

impl Task {
    fn track(&mut self, control: &Control) {
        let entry = (control.kind, control.channel.clone());
        if control.subscribe {
            self.tracked.insert(entry);
        } else {
            self.tracked.remove(&entry);
        }
    }

    fn notify(&self, notice: PubSubNotice) {
        let _ = self.notices.send(notice);
    }

    /// One server or the Sentinel master: a dedicated pub/sub connection.
    async fn run_server(mut self, source: Source) {
        let mut backoff = Duration::from_millis(50);
        let mut retry_at = Instant::now();
        loop {
            // Disconnected: keep track of channels until it is time to connect.
            tokio::select! {
                () = self.stop.cancelled() => return,
                control = self.commands.recv() => {
                    let Some(control) = control else { return };
                    self.track(&control);
                    let _ = control.done.send(false);
                    continue;
                }
                () = tokio::time::sleep_until(retry_at) => {}
            }
            let connected =
                tokio::time::timeout(self.call_timeout * 2, self.connect(&source)).await;
            let (mut sink, mut stream) = match connected {
                Ok(Ok(halves)) => halves,
                // An outage is logged once, where it starts and ends, not at
                // every attempt to subscribe again.
                failed => {
                    let why = match failed {
                        Ok(Err(err)) => err.to_string(),
                        _ => "no answer in time".to_owned(),
                    };
                    tracing::debug!(%why, "cannot subscribe to events; retrying");
                    crate::telemetry::redis_unreachable(&why);
                    retry_at = Instant::now() + backoff;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    continue;
                }
            };
            backoff = Duration::from_millis(50);
            tracing::debug!(channels = self.tracked.len(), "subscribed to events");
            crate::telemetry::redis_answered();
            // Events may have been missed while not subscribed.
            self.notify(PubSubNotice::Subscribed);
            loop {
                tokio::select! {
                    () = self.stop.cancelled() => return,
                    control = self.commands.recv() => {
                        let Some(control) = control else { return };
                        self.track(&control);
                        let call = async {
                            if control.subscribe {
                                sink.subscribe(&control.channel).await
                            } else {
                                sink.unsubscribe(&control.channel).await
                            }
                        };
                        let ok = matches!(tokio::time::timeout(self.call_timeout, call).await, Ok(Ok(())));
                        let _ = control.done.send(ok);
                        if !ok {
                            break;
                        }
                    }
                    msg = stream.next() => match msg {
                        Some(msg) => self.notify(PubSubNotice::Message {
                            channel: msg.get_channel_name().to_owned(),
                            payload: msg.get_payload_bytes().to_vec(),
                        }),
                        None => break,
                    },
                }
            }
            tracing::debug!("lost the subscription to events; reconnecting");
            // Waiters check again now: they get Redis's answer (or 503)
            // instead of sleeping through an outage.
            self.notify(PubSubNotice::Lost);
            retry_at = Instant::now();
        }
    }

    async fn connect(&self, source: &Source) -> redis::RedisResult<(PubSubSink, PubSubStream)> {
        let client = match source {
            Source::Server(client) => client.clone(),
            Source::Sentinel(master) => master.client().await?,
            Source::Cluster(_) => unreachable!("clusters use run_cluster"),
        };
        let (mut sink, stream) = client.get_async_pubsub().await?.split();
        for (_, channel) in &self.tracked {
            sink.subscribe(channel).await?;
        }
        Ok((sink, stream))
    }

    /// A cluster: RESP3 push messages on a cluster connection of its own.
    async fn run_cluster(mut self, config: StoreConfig) {
        let (push, mut pushes) = mpsc::unbounded_channel();
        let client = match cluster_client(&config, Some(push)) {
            Ok(client) => client,
            Err(err) => {
                tracing::error!(%err, "cannot build the cluster subscription client");
                return;
            }
        };
        let mut conn = client.get_pending_async_connection_with_config(
            ClusterConfig::new()
                .set_connection_timeout(self.call_timeout.min(Duration::from_secs(1)))
                .set_response_timeout(self.call_timeout),
        );
        // Channels whose subscription failed, tried again every so often.
        let mut failed: HashSet<(ChannelKind, String)> = HashSet::new();
        let mut retry = tokio::time::interval(Duration::from_millis(500));
        retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut missed = false;
        // The cluster connection connects (and reconnects) by itself:
        // subscriptions can be asked for from now on.
        self.notify(PubSubNotice::Subscribed);
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return,
                control = self.commands.recv() => {
                    let Some(control) = control else { return };
                    self.track(&control);
                    let entry = (control.kind, control.channel.clone());
                    failed.remove(&entry);
                    let ok = cluster_call(&mut conn, control.subscribe, control.kind, &control.channel, self.call_timeout).await;
                    if !ok && control.subscribe {
                        failed.insert(entry);
                    }
                    let _ = control.done.send(ok);
                }
                _ = retry.tick(), if !failed.is_empty() => {
                    let mut recovered = false;
                    for (kind, channel) in std::mem::take(&mut failed) {
                        if cluster_call(&mut conn, true, kind, &channel, self.call_timeout).await {
                            recovered = true;
                        } else {
                            failed.insert((kind, channel));
                        }
                    }
                    if recovered {
                        self.notify(PubSubNotice::Subscribed);
                    }
                }
                push = pushes.recv() => {
                    let Some(push) = push else { return };
                    match push.kind {
                        PushKind::Message | PushKind::SMessage => {
                            if let Some(notice) = message_of(push.data) {
                                self.notify(notice);
                            }
                        }
                        PushKind::Disconnection => {
                            tracing::warn!("a cluster node dropped the subscription connection");
                            missed = true;
                            self.notify(PubSubNotice::Lost);
                        }
                        // redis-rs subscribed again after a reconnect or a
                        // slot move: check what was missed meanwhile.
                        PushKind::Subscribe | PushKind::SSubscribe if missed => {
                            missed = false;
                            self.notify(PubSubNotice::Subscribed);
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}

async fn cluster_call(
    conn: &mut ClusterConnection,
    subscribe: bool,
    kind: ChannelKind,
    channel: &str,
    timeout: Duration,
) -> bool {
    let call = async {
        match (subscribe, kind) {
            (true, ChannelKind::Shard) => conn.ssubscribe(channel).await,
            (false, ChannelKind::Shard) => conn.sunsubscribe(channel).await,
            (true, ChannelKind::Broadcast) => conn.subscribe(channel).await,
            (false, ChannelKind::Broadcast) => conn.unsubscribe(channel).await,
        }
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(())) => true,
        Ok(Err(err)) => {
            tracing::warn!(%err, "cluster subscription change failed; retrying");
            false
        }
        Err(_) => {
            tracing::warn!("cluster subscription change timed out; retrying");
            false
        }
    }
}

/// `[channel, payload]` of a message push.
fn message_of(data: Vec<Value>) -> Option<PubSubNotice> {
    let mut data = data.into_iter();
    let text = |value: Option<Value>| match value {
        Some(Value::BulkString(bytes)) => Some(bytes),
        Some(Value::SimpleString(s)) => Some(s.into_bytes()),
        _ => None,
    };
    let channel = String::from_utf8(text(data.next())?).ok()?;
    let payload = text(data.next())?;
    Some(PubSubNotice::Message { channel, payload })
}
