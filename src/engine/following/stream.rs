//! One holder's stream: its lease as it stands, what the name's channel
//! says about it, and the timers of its expiry (said `expiring` once, and
//! `lost` only once Redis confirms that the lease is gone).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::event::{HolderEvent, LostReason};
use super::followers::{Followers, Heard, Slot};
use crate::domain::{Kind, LeaseId, Name};
use crate::engine::channel::HolderMessage;
use crate::engine::error::Error;
use crate::engine::functions::follow::{Ended, Follow, Followed, Following};

/// How long a new stream waits for its name's channel to be subscribed
/// before it reads the lease (a resync follows when it took longer).
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(2);
/// How soon a check that Redis did not answer is tried again.
const RETRY: Duration = Duration::from_millis(500);
/// The most `expiring` comes before the expiry (else a third of the ttl).
const EXPIRING_BEFORE: Duration = Duration::from_secs(10);

/// Now, ms since the epoch, as `expires_at` is given (Redis's clock, which
/// is this host's or close to it).
fn wall_clock_ms() -> u64 {
    u64::try_from(crate::engine::freezes::wall_clock_ms()).unwrap_or(0)
}

/// What woke a stream.
enum Due {
    Heard(Heard),
    Expiring,
    Check,
}

/// One holder's stream on its lease, as [`HolderStream::next`] tells it.
pub struct HolderStream {
    slot: Slot,
    kind: Kind,
    name: Name,
    /// The lease's id: used only to ask Redis about it, never shown.
    id: LeaseId,
    token: u64,
    expires_at_ms: u64,
    ttl: Duration,
    /// When Redis's expiry has passed, by this instance's clock.
    expires: Instant,
    /// When to ask Redis whether the lease is still held.
    check_at: Instant,
    /// When `expiring` is due; `None` once said (until the next refresh).
    expiring_at: Option<Instant>,
    /// The first event, not yet told.
    held: Option<HolderEvent>,
    ended: bool,
}

impl HolderStream {
    /// Opens a stream on lease `id` of `name`: subscribed to the name's
    /// channel first, then the lease read and the name marked followed in
    /// one call, so no change made after that call goes unheard. `None`
    /// when no live lease has that id.
    ///
    /// # Errors
    /// Redis unavailable.
    pub(in crate::engine) async fn open(
        followers: &Arc<Followers>,
        kind: Kind,
        name: &Name,
        id: LeaseId,
    ) -> Result<Option<Self>, Error> {
        let mut slot = followers.register(kind, name);
        slot.subscribed(SUBSCRIBE_WAIT).await;
        let Following::Live(lease) = followers.invoker.run(kind, name, &Follow(id, None)).await?
        else {
            return Ok(None);
        };
        let now = Instant::now();
        let mut stream = Self {
            slot,
            kind,
            name: name.clone(),
            id,
            token: lease.fencing_token,
            expires_at_ms: 0,
            ttl: lease.ttl.as_duration(),
            expires: now,
            check_at: now,
            expiring_at: None,
            held: Some(HolderEvent::Held {
                fencing_token: lease.fencing_token,
                expires_at_ms: lease.expires_at_ms,
                owner: lease.owner.clone(),
            }),
            ended: false,
        };
        stream.moved(&lease, now);
        Ok(Some(stream))
    }

    /// The lease's expiry moved to what `lease` says, as Redis answered at
    /// about `at`.
    fn moved(&mut self, lease: &Followed, at: Instant) {
        self.expires_at_ms = lease.expires_at_ms;
        self.ttl = lease.ttl.as_duration();
        // One millisecond past, so that Redis has let it go by then.
        self.expires = at + lease.expires_in + Duration::from_millis(1);
        self.check_at = self.expires;
        let before = EXPIRING_BEFORE.min(self.ttl / 3);
        self.expiring_at = Some(self.expires.checked_sub(before).unwrap_or(at));
    }

    fn end(&mut self, event: HolderEvent) -> Option<HolderEvent> {
        self.ended = true;
        Some(event)
    }

    /// The next event of the stream; `None` after the last one, or once the
    /// service stops.
    pub async fn next(&mut self) -> Option<HolderEvent> {
        if let Some(held) = self.held.take() {
            return Some(held);
        }
        let shutdown = self.slot.followers().shutdown.clone();
        let mailbox = self.slot.mailbox.clone();
        while !self.ended {
            let expiring_at = self.expiring_at;
            let due = tokio::select! {
                biased;
                () = shutdown.cancelled() => return None,
                heard = mailbox.next() => Due::Heard(heard),
                () = tokio::time::sleep_until(expiring_at.unwrap_or_else(Instant::now)), if expiring_at.is_some() => Due::Expiring,
                () = tokio::time::sleep_until(self.check_at) => Due::Check,
            };
            let event = match due {
                Due::Heard(Heard::Message(message)) => self.heard(message),
                Due::Heard(Heard::Resync) | Due::Check => self.confirm().await,
                Due::Expiring => self.expiring().await,
            };
            if event.is_some() {
                return event;
            }
        }
        None
    }

    /// `expiring` is due: said only of a lease Redis holds with the expiry
    /// this stream knows. The word of a refresh that moved it may not have
    /// been heard yet (this instance was paused, the word is still on its
    /// way), and a lease already gone is told as Redis tells it (`lost`).
    /// One call per `expiring`, which a holder that refreshes in time never
    /// hears.
    async fn expiring(&mut self) -> Option<HolderEvent> {
        self.expiring_at = None;
        let known = self.expires_at_ms;
        let told = self.confirm().await;
        if told.is_some() || self.ended {
            return told;
        }
        if self.expiring_at.is_none() {
            // Redis did not answer: asked again soon, nothing told yet.
            self.expiring_at = Some(Instant::now() + RETRY);
            return None;
        }
        // Redis holds it, expiring when this stream thought.
        self.expiring_at = None;
        (self.expires_at_ms == known).then_some(HolderEvent::Expiring {
            fencing_token: self.token,
            expires_at_ms: self.expires_at_ms,
        })
    }

    /// What a word of the name's channel means for this lease.
    fn heard(&mut self, message: HolderMessage) -> Option<HolderEvent> {
        let token = self.token;
        match message {
            HolderMessage::Refreshed {
                token: t,
                expires_at_ms,
                ttl_ms,
            } if t == token => {
                // The new expiry is Redis's `expires_at`, not a ttl from when
                // the word was heard: heard late (this instance was paused),
                // it may already have passed. Then nothing is said but what
                // Redis confirms (the lease gone: `lost`).
                let left = expires_at_ms.saturating_sub(wall_clock_ms());
                if left == 0 {
                    self.expiring_at = None;
                    self.check_at = Instant::now();
                    return None;
                }
                let lease = Followed {
                    fencing_token: token,
                    expires_at_ms,
                    expires_in: Duration::from_millis(left.min(ttl_ms)),
                    ttl: crate::domain::Ttl::from_ms(ttl_ms).ok()?,
                    owner: None,
                };
                self.moved(&lease, Instant::now());
                Some(HolderEvent::Refreshed {
                    fencing_token: token,
                    expires_at_ms,
                })
            }
            HolderMessage::Released { token: t } if t == token => self.end(HolderEvent::Released {
                fencing_token: token,
            }),
            HolderMessage::ForceReleased { fence } if fence >= token => {
                self.end(HolderEvent::Lost {
                    fencing_token: token,
                    reason: LostReason::ForceReleased,
                })
            }
            HolderMessage::YieldRequested {
                waiting,
                by,
                reason,
            } => Some(HolderEvent::YieldRequested {
                fencing_token: token,
                by,
                reason,
                waiting,
            }),
            _ => None,
        }
    }

    /// Asks Redis about the lease (its expiry is due, or words may have been
    /// missed): a new expiry is told as `refreshed`; a lease gone is `lost`,
    /// `expired` once its expiry passed. Redis not answering: asked again
    /// soon, nothing told.
    async fn confirm(&mut self) -> Option<HolderEvent> {
        let asked = Instant::now();
        let followers = self.slot.followers().clone();
        match followers
            .invoker
            .run(self.kind, &self.name, &Follow(self.id, Some(self.token)))
            .await
        {
            Ok(Following::Live(lease)) if lease.fencing_token == self.token => {
                let before = self.expires_at_ms;
                self.moved(&lease, asked);
                (lease.expires_at_ms != before).then_some(HolderEvent::Refreshed {
                    fencing_token: self.token,
                    expires_at_ms: lease.expires_at_ms,
                })
            }
            Ok(Following::Gone(Some(ended))) => {
                // The name's history says how it ended (the words were
                // missed: this instance paused, or Redis restarted).
                self.end(match ended {
                    Ended::Released => HolderEvent::Released {
                        fencing_token: self.token,
                    },
                    Ended::Expired => HolderEvent::Lost {
                        fencing_token: self.token,
                        reason: LostReason::Expired,
                    },
                    Ended::TakenAway => HolderEvent::Lost {
                        fencing_token: self.token,
                        reason: LostReason::ForceReleased,
                    },
                })
            }
            Ok(_) => {
                // Gone, and the history does not say how: past its expiry,
                // or lost with Redis's data (or the name keeps no history).
                // Nobody is named as having taken it: it ended as if it
                // expired. (A force-release is said by its word on the
                // name's channel, or by the history.)
                self.end(HolderEvent::Lost {
                    fencing_token: self.token,
                    reason: LostReason::Expired,
                })
            }
            Err(err) => {
                tracing::debug!(%err, "checking a followed lease failed; retrying");
                self.check_at = Instant::now() + RETRY;
                None
            }
        }
    }
}
