//! SIGINT, SIGTERM and SIGHUP to a client command, as a stream: caught from
//! the start, so that one that comes while a request is on its way is not
//! lost, and answered where the command can stop cleanly.

use tokio::signal::unix::{signal, Signal, SignalKind};

pub struct Signals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl Signals {
    /// # Errors
    /// When a handler cannot be installed (no signal driver).
    pub fn catch() -> std::io::Result<Self> {
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// The number of the next signal that comes.
    pub async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.interrupt.recv() => libc::SIGINT,
            _ = self.terminate.recv() => libc::SIGTERM,
            _ = self.hangup.recv() => libc::SIGHUP,
        }
    }
}
