//! This instance's deliverer of turn notices: a round on a name claims the
//! notices due there (`notice.lua`) and delivers each in a task of its own,
//! retried with backoff until its lease's `pickup_by`. A round starts when a
//! call of this instance made a notice due (the word `d` in its reply), when
//! a retry is due, and when the index of names with notices says a name is
//! due a look (a notice whose instance died, or one claimed there and
//! never told sent).
//!
//! The index (`prefix{notices}:index`, a zset: "kind\nname" -> when to look
//! next, ms) lists every name with a ticket that asked a notice: an
//! acquisition with `notify` adds its name before its ticket exists, a look
//! sets the next one, and a look that finds nothing left drops the name
//! unless someone added it again meanwhile (its score changed).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::body::{signature, NoticeBody};
use super::post::{client, post, ANSWER_TIMEOUT};
use crate::domain::{Kind, LeaseId, Name};
use crate::engine::error::Error;
use crate::engine::freezes::wall_clock_ms;
use crate::engine::functions::invoker::Invoker;
use crate::engine::functions::notice::{Claimed, NoticeCall, NoticeReply};

/// How long a claim keeps other instances off a notice: past the longest a
/// delivery takes, so only a dead instance's claim lapses.
const CLAIM: Duration = Duration::from_secs(15);
/// A name whose tickets still wait is looked at this often (at most), so a
/// notice whose instance died is delivered within about this.
const LOOK: Duration = Duration::from_secs(30);
/// How often this instance reads the index for names due a look.
const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// Names looked at per sweep, at most.
const SWEEP_BATCH: usize = 100;
/// The first retry's wait, doubled on each failure up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The deliverer (one per instance, while `BATON_WEBHOOK_HOSTS` is set).
pub(in crate::engine) struct Notices {
    invoker: Arc<Invoker>,
    client: reqwest::Client,
    /// `BATON_WEBHOOK_SECRET`: signs every notice.
    secret: Vec<u8>,
    index: String,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

/// The index's member for a name.
fn member(kind: Kind, name: &Name) -> String {
    format!("{}\n{}", kind.as_str(), name.as_str())
}

/// The name an index member names; `None` for none of ours.
fn named(member: &str) -> Option<(Kind, Name)> {
    let (kind, name) = member.split_once('\n')?;
    let kind = Kind::ALL.into_iter().find(|k| k.as_str() == kind)?;
    Some((kind, Name::parse(name).ok()?))
}

/// How long to wait before try `tries + 1` (after `tries` failures).
fn backoff(tries: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(1u32 << tries.min(16))
        .min(MAX_BACKOFF)
}

fn now_ms() -> u64 {
    u64::try_from(wall_clock_ms()).unwrap_or(0)
}

impl Notices {
    /// Starts the deliverer: it hears `due` (names a call of this instance
    /// made a notice due on) and sweeps the index until `shutdown`.
    ///
    /// # Errors
    /// When no HTTP client can be made.
    pub(in crate::engine) fn start(
        invoker: Arc<Invoker>,
        secret: &str,
        due: UnboundedReceiver<(Kind, Name)>,
        shutdown: CancellationToken,
        tasks: &TaskTracker,
    ) -> Result<Arc<Self>, reqwest::Error> {
        let index = invoker.keys().notice_index();
        let notices = Arc::new(Self {
            invoker,
            client: client()?,
            secret: secret.as_bytes().to_vec(),
            index,
            shutdown,
            tasks: tasks.clone(),
        });
        tasks.spawn(notices.clone().hear(due));
        tasks.spawn(notices.clone().sweep());
        Ok(notices)
    }

    /// Lists `name` in the index before a ticket there asks a notice, so
    /// that some instance looks at it within [`LOOK`] even if the one that
    /// grants it dies before delivering.
    ///
    /// # Errors
    /// Redis unavailable.
    pub(in crate::engine) async fn watch(&self, kind: Kind, name: &Name) -> Result<(), Error> {
        let at = now_ms() + LOOK.as_millis() as u64;
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(&self.index).arg(at).arg(member(kind, name));
        self.invoker.store().query::<i64>(&zadd).await.map(|_| ())
    }

    /// Rounds on the names this instance's calls made a notice due on.
    async fn hear(self: Arc<Self>, mut due: UnboundedReceiver<(Kind, Name)>) {
        loop {
            let (kind, name) = tokio::select! {
                () = self.shutdown.cancelled() => return,
                next = due.recv() => match next {
                    Some(next) => next,
                    None => return,
                },
            };
            let round = self.clone();
            self.tasks.spawn(async move {
                if let Err(err) = round.round(kind, &name, None).await {
                    tracing::debug!(%err, %kind, name = %name, "claiming turn notices failed");
                }
            });
        }
    }

    /// Reads the index every [`SWEEP_EVERY`] for names due a look.
    async fn sweep(self: Arc<Self>) {
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => return,
                () = tokio::time::sleep(SWEEP_EVERY) => {}
            }
            if let Err(err) = self.sweep_once().await {
                tracing::debug!(%err, "looking for turn notices failed");
            }
        }
    }

    async fn sweep_once(self: &Arc<Self>) -> Result<(), Error> {
        let mut range = redis::cmd("ZRANGEBYSCORE");
        range
            .arg(&self.index)
            .arg("-inf")
            .arg(now_ms())
            .arg("WITHSCORES")
            .arg("LIMIT")
            .arg(0)
            .arg(SWEEP_BATCH);
        let due: Vec<(String, u64)> = self.invoker.store().query(&range).await?;
        for (entry, score) in due {
            let Some((kind, name)) = named(&entry) else {
                continue;
            };
            match self.round(kind, &name, None).await? {
                Some(next_ms) => {
                    let mut zadd = redis::cmd("ZADD");
                    zadd.arg(&self.index).arg(next_ms).arg(&entry);
                    self.invoker.store().query::<i64>(&zadd).await?;
                }
                None => {
                    let forget = NoticeCall::Forget {
                        member: &entry,
                        score,
                    };
                    self.invoker.run_on(&self.index, &forget).await?;
                }
            }
        }
        Ok(())
    }

    /// Claims the notices due on `name` and delivers each in a task of its
    /// own (`retrying`: the ticket whose retry this round is, and its
    /// failures so far). Returns when the name is due its next look.
    ///
    /// Boxed: a retry's delivery starts a round, which spawns deliveries.
    fn round<'a>(
        self: &'a Arc<Self>,
        kind: Kind,
        name: &'a Name,
        retrying: Option<(LeaseId, u32)>,
    ) -> Pin<Box<dyn Future<Output = Result<Option<u64>, Error>> + Send + 'a>> {
        Box::pin(async move { self.claim_and_deliver(kind, name, retrying).await })
    }

    async fn claim_and_deliver(
        self: &Arc<Self>,
        kind: Kind,
        name: &Name,
        retrying: Option<(LeaseId, u32)>,
    ) -> Result<Option<u64>, Error> {
        let claim = NoticeCall::Claim {
            claim: CLAIM,
            look: LOOK,
        };
        let NoticeReply::Claimed { notices, next_ms } =
            self.invoker.run(kind, name, &claim).await?
        else {
            return Err(Error::Protocol(
                "a claim of notices replied no claim".into(),
            ));
        };
        for notice in notices {
            let tries = match retrying {
                Some((ticket, tries)) if ticket == notice.ticket => tries,
                _ => 0,
            };
            let deliverer = self.clone();
            let name = name.clone();
            self.tasks
                .spawn(async move { deliverer.deliver(kind, name, notice, tries).await });
        }
        Ok(next_ms)
    }

    /// Delivers one claimed notice (after `tries` failures); on failure,
    /// tells Redis why and when to try again, and tries again then.
    async fn deliver(self: Arc<Self>, kind: Kind, name: Name, notice: Claimed, tries: u32) {
        let body = NoticeBody {
            event: "granted".to_owned(),
            kind: kind.as_str().to_owned(),
            name: name.as_str().to_owned(),
            ticket: notice.ticket.expose(),
            fencing_token: notice.fencing_token,
            pickup_by: chrono::DateTime::from_timestamp_millis(
                i64::try_from(notice.pickup_by_ms).unwrap_or(i64::MAX),
            )
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        };
        let Ok(bytes) = serde_json::to_vec(&body) else {
            return;
        };
        let signed = signature(&self.secret, &bytes);
        let outcome = tokio::select! {
            () = self.shutdown.cancelled() => return,
            outcome = post(&self.client, &notice.url, bytes, &signed) => outcome,
        };
        let ticket = notice.ticket;
        let retry = backoff(tries);
        let told = match &outcome {
            Ok(()) => {
                tracing::info!(%kind, name = %name, token = notice.fencing_token, "turn notice delivered");
                self.invoker
                    .run(kind, &name, &NoticeCall::Sent(ticket))
                    .await
            }
            Err(why) => {
                tracing::info!(%kind, name = %name, token = notice.fencing_token, why = %why, "turn notice not delivered; trying again");
                let failed = NoticeCall::Failed { ticket, retry, why };
                self.invoker.run(kind, &name, &failed).await
            }
        };
        match told {
            // Failed, and its grant still waits: try again after the backoff.
            Ok(NoticeReply::Done(Some(_))) if outcome.is_err() => {}
            Ok(_) => return,
            // Redis away: the claim lapses and a look takes it up again.
            Err(err) => {
                tracing::debug!(%err, "recording a turn notice failed");
                tokio::select! {
                    () = self.shutdown.cancelled() => return,
                    () = tokio::time::sleep(CLAIM + ANSWER_TIMEOUT) => {}
                }
            }
        }
        tokio::select! {
            () = self.shutdown.cancelled() => return,
            () = tokio::time::sleep(retry) => {}
        }
        if let Err(err) = self.round(kind, &name, Some((ticket, tries + 1))).await {
            tracing::debug!(%err, "claiming a turn notice again failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        assert_eq!(backoff(0), Duration::from_secs(1));
        assert_eq!(backoff(1), Duration::from_secs(2));
        assert_eq!(backoff(3), Duration::from_secs(8));
        assert_eq!(backoff(10), MAX_BACKOFF);
        assert_eq!(backoff(40), MAX_BACKOFF);
    }

    #[test]
    fn an_index_member_names_its_kind_and_name() {
        let name = Name::parse("deploy/prod line").unwrap();
        let entry = member(Kind::Semaphore, &name);
        assert_eq!(named(&entry), Some((Kind::Semaphore, name)));
        assert_eq!(named("queue\nx"), None);
    }
}
