//! The connection server: HTTP/1.1 and cleartext HTTP/2 (prior knowledge, as
//! `curl --http2-prior-knowledge` sends it) on one listener, with the
//! connection limits of the contract and a graceful shutdown.
//!
//! - At most [`Limits::max_connections`] connections at once; one past the cap
//!   is closed at once, unanswered, so a flood of slow sockets degrades the
//!   service instead of exhausting its open files, and it recovers as soon as
//!   they close.
//! - A connection that has not sent a whole request head within
//!   [`Limits::header_timeout`] of opening (or, on a keep-alive connection, of
//!   the first byte of its next request) is closed, and so is a connection
//!   with no request in flight for [`Limits::idle_timeout`]: each connection
//!   has a timer of its own, which sleeps while requests are in flight
//!   (`activity.rs` says why hyper's own header timer cannot do this).
//! - HTTP/2 connections may carry many waits each; keep-alive pings drop a
//!   peer that vanished without closing, and with it its waits. A stream
//!   reset by the client drops its request's future, as a closed HTTP/1.1
//!   connection does: the waiter leaves the line.
//! - On shutdown: stop accepting, close at once every connection with no
//!   request in flight (an idle or half-sent one does not hold up SIGTERM),
//!   let the others finish (waiters are answered 503 by the engine), then
//!   return.
//!
//! Its rooms: `accept.rs`, the accept loop and the HTTP/1.1 and HTTP/2
//! settings; `connection.rs`, one connection, with the socket and the service
//! that report what it does; `activity.rs`, what a connection is doing and its
//! timer; `limits.rs`, the limits as the settings give them; `open_files.rs`,
//! the process's open-files limit.

mod accept;
mod activity;
mod connection;
mod limits;
mod open_files;

pub use accept::{
    serve, H2_CONNECTION_WINDOW, H2_MAX_CONCURRENT_STREAMS, H2_PING_INTERVAL, H2_PING_TIMEOUT,
    H2_STREAM_WINDOW,
};
pub use connection::App;
pub use limits::Limits;
pub use open_files::raise_open_files_limit;
