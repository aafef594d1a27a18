//! What the core can report besides its normal outcomes.

/// # Errors
/// Every core operation returns these; normal outcomes (busy, not found)
/// are values, not errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Redis did not answer in time or the connection failed; the operation may or
    /// may not have happened, and callers undo what they can.
    #[error("redis is unavailable: {0}")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Redis answered something no script of ours replies.
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
    /// The service is stopping and no longer waits.
    #[error("the service is shutting down")]
    ShuttingDown,
    /// The cap on concurrent waiters is reached.
    #[error("too many requests are waiting already")]
    TooManyWaiters,
    /// The ticket a request waited on ended while it waited (not collected
    /// in time while this instance was paused, left, expired): it is gone.
    #[error("the ticket is gone")]
    TicketGone,
}

impl From<redis::RedisError> for Error {
    fn from(err: redis::RedisError) -> Self {
        // A Lua runtime error in one of our functions (`ERR user_function:12:
        // attempt to ...`) is a bug of ours, not an outage: it is answered as
        // an internal error and logged, never hidden behind a 503.
        let script_bug = err.code() == Some("ERR")
            && err
                .detail()
                .is_some_and(|d| d.starts_with("user_function:"));
        if script_bug || err.kind() == redis::ErrorKind::Parse || err.code() == Some("BATON") {
            Self::Protocol(err.to_string())
        } else {
            Self::Unavailable(Box::new(err))
        }
    }
}
