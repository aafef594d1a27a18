//! SIGHUP: read the token file again, without a restart.

use std::sync::Arc;

use super::Tokens;

/// From now on, reads the token file again on every SIGHUP: the new set is
/// in force at once; a bad file is logged as one line (naming the entry,
/// never a token) and the set in force stays. Must be called inside the
/// runtime; the signal is caught from the moment it returns.
///
/// Only listened for when a token file is configured: otherwise SIGHUP
/// keeps its default meaning (the process ends), as before.
pub fn reload_on_hangup(tokens: Arc<Tokens>) {
    if !tokens.has_file() {
        return;
    }
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        // Registered here, not in the task: a SIGHUP that comes before the
        // task first runs must not end the process.
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(hangups) => hangups,
            Err(err) => {
                tracing::error!(%err, "cannot listen for SIGHUP; the token file is read at start only");
                return;
            }
        };
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                match tokens.reload() {
                    Ok(count) => tracing::info!(
                        tokens = count,
                        "SIGHUP: the token file was read again; {count} tokens in force"
                    ),
                    Err(err) => tracing::error!("SIGHUP: the tokens in force are kept: {err}"),
                }
            }
        });
    }
}
