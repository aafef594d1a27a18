//! What every serving function's reply ends with (`finish()` in
//! `core/messages.lua`),
//! decoded in this one place: the expired leases the call noticed, and the
//! messages for the caller's own waiters.

use super::cursor::Cursor;
use crate::domain::{Kind, Name, Owner};
use crate::engine::channel::{LineMessage, NameMessage};
use crate::engine::error::Error;
use crate::telemetry::{audit, record_expired};

/// A lease that a call found expired and removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::engine) struct Expired {
    pub owner: Option<Owner>,
    pub fencing_token: u64,
}

/// The end of a serving function's reply.
#[derive(Debug, Default)]
pub(in crate::engine) struct Tail {
    pub expired: Vec<Expired>,
    /// For this instance's waiters: delivered as the name's channel would.
    pub messages: Vec<LineMessage>,
}

impl Expired {
    /// `n` leases as `(owner, token) x n`.
    ///
    /// # Errors
    /// [`Error::Protocol`] when the fields are not that.
    pub(in crate::engine) fn decode_list(reply: &mut Cursor, n: usize) -> Result<Vec<Self>, Error> {
        let mut leases = Vec::with_capacity(n);
        for _ in 0..n {
            leases.push(Self {
                owner: reply.owner()?,
                fencing_token: reply.uint()?,
            });
        }
        Ok(leases)
    }
}

impl Tail {
    /// `n, (owner, token) x n, m, message x m`.
    ///
    /// # Errors
    /// [`Error::Protocol`] when the fields are not that, or a message is none
    /// of the library's.
    pub(in crate::engine) fn decode(reply: &mut Cursor) -> Result<Self, Error> {
        let n = reply.count()?;
        let expired = Expired::decode_list(reply, n)?;
        let m = reply.count()?;
        let mut messages = Vec::with_capacity(m);
        for _ in 0..m {
            let text = reply.text()?;
            let Some(NameMessage::Line(message)) = NameMessage::decode(&text) else {
                return Err(Error::Protocol(format!("not a line message: {text:?}")));
            };
            messages.push(message);
        }
        Ok(Self { expired, messages })
    }

    /// Counts and audits the expired leases of `name`.
    pub(in crate::engine) fn note_expired(&self, kind: Kind, name: &Name) {
        if self.expired.is_empty() {
            return;
        }
        record_expired(kind.as_str(), self.expired.len() as u64);
        for lease in &self.expired {
            audit(
                "expired",
                kind,
                name,
                lease.owner.as_ref(),
                lease.fencing_token,
                None,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use redis::Value;

    use super::*;

    #[test]
    fn expiries_then_messages() {
        let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let mut reply = Cursor::new(Value::Array(vec![
            Value::Int(1),
            text("ci"),
            Value::Int(41),
            Value::Int(1),
            text("x 20"),
        ]))
        .unwrap();
        let tail = Tail::decode(&mut reply).unwrap();
        reply.finish().unwrap();
        assert_eq!(tail.expired.len(), 1);
        assert_eq!(tail.expired[0].fencing_token, 41);
        assert_eq!(tail.messages.len(), 1);
    }

    #[test]
    fn an_unknown_message_is_an_error() {
        let mut reply = Cursor::new(Value::Array(vec![
            Value::Int(0),
            Value::Int(1),
            Value::BulkString(b"? 1".to_vec()),
        ]))
        .unwrap();
        assert!(Tail::decode(&mut reply).is_err());
    }
}
