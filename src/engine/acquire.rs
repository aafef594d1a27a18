//! The waiting loop shared by locks and semaphores, and the guard that undoes
//! an acquisition nobody will hear about.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::{Engine, Error};

/// The outcome of one acquisition attempt (one script call).
pub(crate) enum Attempt<T, B> {
    Acquired(T),
    Busy {
        busy: B,
        /// When trying again may succeed without any release: the next expiry.
        retry_in: Option<Duration>,
        /// The place in line Redis gave this waiter, if it queues there.
        ticket: Option<u64>,
    },
}

/// Tries once, then, while `wait` lasts, sleeps until a release event or the
/// next expiry and tries again. Between attempts it sends Redis nothing.
///
/// # Errors
/// Whatever an attempt returns, [`Error::ShuttingDown`] when the service
/// stops, and [`Error::TooManyWaiters`] when it cannot wait.
pub(crate) async fn acquire_with_wait<T, B, F, Fut>(
    engine: &Engine,
    resource: String,
    wait: Duration,
    mut attempt: F,
) -> Result<Result<T, B>, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T, B>, Error>>,
{
    if wait.is_zero() {
        return Ok(match attempt().await? {
            Attempt::Acquired(lease) => Ok(lease),
            Attempt::Busy { busy, .. } => Err(busy),
        });
    }
    let deadline = Instant::now() + wait;
    // Registered before the first attempt, so a release right after it is not missed.
    let mut registration = engine.waiters.register(resource)?;
    loop {
        let (busy, retry_in) = match attempt().await? {
            Attempt::Acquired(lease) => return Ok(Ok(lease)),
            Attempt::Busy {
                busy,
                retry_in,
                ticket,
            } => {
                if let Some(ticket) = ticket {
                    registration.reorder(ticket);
                }
                (busy, retry_in)
            }
        };
        let now = Instant::now();
        if now >= deadline {
            return Ok(Err(busy));
        }
        // One millisecond past the expiry, so Redis has let the lease go.
        let wake_at = retry_in
            .map(|d| now + d + Duration::from_millis(1))
            .unwrap_or(deadline)
            .min(deadline);
        tokio::select! {
            biased;
            () = engine.shutdown.cancelled() => return Err(Error::ShuttingDown),
            () = registration.woken() => {}
            () = tokio::time::sleep_until(wake_at) => {}
        }
    }
}

/// Undoes an acquisition unless disarmed: dropped mid-call (the client went
/// away) or failed with the outcome unknown, the lease (or queue place) might
/// exist in Redis with nobody to release it, so it is released in the
/// background, retrying while Redis is unreachable for up to `give_up_after`.
pub(crate) struct Abandon<F, Fut>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = Result<bool, Error>> + Send + 'static,
{
    undo: Option<F>,
    give_up_after: Duration,
}

impl<F, Fut> Abandon<F, Fut>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = Result<bool, Error>> + Send + 'static,
{
    pub(crate) fn new(undo: F, give_up_after: Duration) -> Self {
        Self {
            undo: Some(undo),
            give_up_after,
        }
    }

    /// The caller was told the outcome: nothing to undo.
    pub(crate) fn disarm(mut self) {
        self.undo = None;
    }
}

impl<F, Fut> Drop for Abandon<F, Fut>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = Result<bool, Error>> + Send + 'static,
{
    fn drop(&mut self) {
        let Some(undo) = self.undo.take() else {
            return;
        };
        let give_up_at = Instant::now() + self.give_up_after;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let mut backoff = Duration::from_millis(100);
            loop {
                match undo().await {
                    Ok(released) => {
                        if released {
                            tracing::info!("released a lease whose requester was gone");
                        }
                        return;
                    }
                    Err(err) if Instant::now() + backoff < give_up_at => {
                        tracing::debug!(%err, "undo of an abandoned acquisition failed; retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                    }
                    Err(err) => {
                        tracing::warn!(%err, "gave up undoing an abandoned acquisition; its ttl will end it");
                        return;
                    }
                }
            }
        });
    }
}
