//! The accept loop: one listener, HTTP/1.1 and HTTP/2 on it (the settings
//! every connection gets), at most [`Limits::max_connections`] connections at
//! once (one past the cap is closed unanswered), each served by a task of its
//! own ([`Connection`]), and on shutdown, the wait until all have closed.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::connection::{App, Connection};
use super::limits::Limits;
use super::open_files::raise_open_files_limit;

/// How many requests one HTTP/2 connection may have in flight: as many waits
/// as the default connection cap has connections.
pub const H2_MAX_CONCURRENT_STREAMS: u32 = 10_000;
/// Flow-control window of one HTTP/2 stream: a whole default-sized body (an
/// acquire body is under 300 bytes), without letting a client park more than
/// that in baton's buffers per stream.
pub const H2_STREAM_WINDOW: u32 = 16 * 1024;
/// Flow-control window of one HTTP/2 connection, over all its streams.
pub const H2_CONNECTION_WINDOW: u32 = 1024 * 1024;
/// Ping an HTTP/2 peer this often...
pub const H2_PING_INTERVAL: Duration = Duration::from_secs(10);
/// ...and drop the connection (and its waits) when a ping is not answered in this time.
pub const H2_PING_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `stop` is cancelled, then closes idle
/// connections at once, lets the others finish, and returns when all are
/// closed.
///
/// # Errors
/// None today: accept errors are logged and retried.
pub async fn serve(
    listener: TcpListener,
    app: App,
    limits: Limits,
    stop: CancellationToken,
) -> io::Result<()> {
    match raise_open_files_limit() {
        Ok(files) if files < limits.max_connections as u64 + 64 => tracing::warn!(
            open_files = files,
            max_connections = limits.max_connections,
            "the open-files limit is below BATON_MAX_CONNECTIONS; clients past it are refused by the system"
        ),
        Ok(files) => tracing::debug!(open_files = files, "open-files limit"),
        Err(err) => tracing::warn!(%err, "cannot raise the open-files limit"),
    }
    let builder = Arc::new(builder());
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    // Every connection task holds a receiver; `closed()` resolves when all are gone.
    let (all_closed, open) = watch::channel(());
    let mut warned_full: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(err) if is_connection_error(&err) => continue,
            Err(err) => {
                // E.g. out of open files: wait for some to close, as hyper
                // and axum do, but stop waiting at shutdown.
                tracing::error!(%err, "accept failed; retrying in a second");
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                }
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Closed unanswered: the cheapest thing baton can do with it.
            drop(tcp);
            if warned_full.is_none_or(|at| at.elapsed() >= Duration::from_secs(10)) {
                warned_full = Some(Instant::now());
                tracing::warn!(
                    max_connections = limits.max_connections,
                    "connection limit reached; closing new connections until others close"
                );
            }
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let open = open.clone();
        let connection = Connection {
            builder: builder.clone(),
            app: app.clone(),
            limits,
            stop: stop.clone(),
        };
        tokio::spawn(async move {
            connection.serve(tcp).await;
            drop(slot);
            drop(open);
        });
    }
    drop(listener);
    drop(open);
    all_closed.closed().await;
    Ok(())
}

/// HTTP/1.1 and HTTP/2 with the limits above.
fn builder() -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        // The connection's own timer does this (see the module docs).
        .header_read_timeout(None)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(H2_MAX_CONCURRENT_STREAMS)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW)
        .keep_alive_interval(H2_PING_INTERVAL)
        .keep_alive_timeout(H2_PING_TIMEOUT);
    builder
}

fn is_connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}
