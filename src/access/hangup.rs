//! Reading the token file again without a restart: on SIGHUP, and whenever
//! its content changes. A Kubernetes Secret mounted as a volume changes by
//! an atomic swap of a symlink (`..data`) and sends no signal, so the file
//! is also read every second and compared with what was read last.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest as _, Sha256};

use super::tokens::Tokens;

/// How often the token file is looked at for a change.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// What started a reload, as its log line says it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cause {
    Hangup,
    Changed,
    /// A token's `expires` passed: nothing to read, but what requests
    /// opened must look their tokens up again.
    Expired,
}

/// From now on, reads the token file again on every SIGHUP and whenever
/// its content differs from what was read last (checked every
/// [`WATCH_INTERVAL`], through symlinks): the new set is in force at once;
/// a bad file is logged as one line (naming the entry, never a token) and
/// the set in force stays, and a file that stays bad is not logged again
/// until it changes. Must be called inside the runtime; SIGHUP is caught
/// from the moment it returns.
///
/// Only done when a token file is configured: otherwise SIGHUP keeps its
/// default meaning (the process ends), as before.
///
/// `reloaded` hears each reload's outcome: the count of tokens now in force,
/// or `None` when the file was refused (for the metrics, a layer above).
pub fn follow_token_file(tokens: Arc<Tokens>, reloaded: impl Fn(Option<usize>) + Send + 'static) {
    if let Some(warning) = tokens.file_warning() {
        tracing::warn!("{warning}");
    }
    let Some(path) = tokens.file().map(Path::to_path_buf) else {
        return;
    };
    let mut hangups = Hangups::listen();
    // What was read at start (a change since then is seen at the first look).
    let mut seen = fingerprint_now(&path);
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(WATCH_INTERVAL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let expiry = tokens.next_expiry();
            let cause = tokio::select! {
                () = hangups.next() => Cause::Hangup,
                _ = ticks.tick() => Cause::Changed,
                () = until(expiry) => Cause::Expired,
            };
            if cause == Cause::Expired {
                tracing::info!(
                    "a token of the token file reached its expires: it is refused from now on"
                );
                tokens.changed();
                continue;
            }
            let now = fingerprint(&path).await;
            if cause == Cause::Changed && now == seen {
                continue;
            }
            seen = now;
            reloaded(reload(&tokens, cause));
        }
    });
}

/// Sleeps until `at` (wall clock), forever when `None`.
async fn until(at: Option<std::time::SystemTime>) {
    match at {
        Some(at) => {
            let left = at
                .duration_since(std::time::SystemTime::now())
                .unwrap_or_default();
            // A few milliseconds past it, so the lookup then refuses it.
            tokio::time::sleep(left + Duration::from_millis(5)).await;
        }
        None => std::future::pending().await,
    }
}

/// Reads the file again; the count of tokens now in force, `None` when the
/// file was refused.
fn reload(tokens: &Tokens, cause: Cause) -> Option<usize> {
    let why = match cause {
        Cause::Hangup => "SIGHUP",
        Cause::Changed => "the token file changed",
        Cause::Expired => "a token expired",
    };
    match tokens.reload() {
        Ok(count) => {
            tracing::info!(
                tokens = count,
                "{why}: the token file was read again; {count} tokens in force"
            );
            if let Some(warning) = tokens.file_warning() {
                tracing::warn!("{warning}");
            }
            Some(count)
        }
        Err(err) => {
            tracing::error!("{why}: the tokens in force are kept: {err}");
            None
        }
    }
}

/// The SHA-256 of the file's content, `None` when it cannot be read.
type Fingerprint = Option<[u8; 32]>;

async fn fingerprint(path: &Path) -> Fingerprint {
    let bytes = tokio::fs::read(path).await.ok()?;
    Some(Sha256::digest(bytes).into())
}

fn fingerprint_now(path: &Path) -> Fingerprint {
    let bytes = std::fs::read(path).ok()?;
    Some(Sha256::digest(bytes).into())
}

/// SIGHUP as a stream; one that never comes where it cannot be caught.
struct Hangups {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Hangups {
    /// Registered at once, not in the task: a SIGHUP that comes before the
    /// task first runs must not end the process.
    fn listen() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let signal = signal(SignalKind::hangup())
                .map_err(|err| {
                    tracing::error!(%err, "cannot listen for SIGHUP; the token file is read again when it changes");
                })
                .ok();
            Self { signal }
        }
        #[cfg(not(unix))]
        Self {}
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        if let Some(signal) = self.signal.as_mut() {
            if signal.recv().await.is_some() {
                return;
            }
            self.signal = None;
        }
        std::future::pending::<()>().await;
    }
}
