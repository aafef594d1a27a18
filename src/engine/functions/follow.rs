//! `follow.lua`: a holder's stream opens on a lease (or is kept open on its
//! name), so that the calls that change a lease of the name tell it.

use std::time::Duration;

use redis::Cmd;

use super::cursor::Cursor;
use super::library::{Function, Op};
use crate::domain::{LeaseId, Owner, Ttl};
use crate::engine::error::Error;

/// The follow of one lease: as its stream opens (no token yet), or as it
/// asks again (with its fencing token, so that a lease gone is looked up in
/// the name's history).
pub(in crate::engine) struct Follow(pub LeaseId, pub Option<u64>);

/// A followed lease, as Redis holds it now, or how it ended.
#[derive(Debug, Clone)]
pub(in crate::engine) enum Following {
    Live(Followed),
    /// No live lease with that id; how it ended when the history says.
    Gone(Option<Ended>),
}

/// How a lease ended, as the name's history remembers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::engine) enum Ended {
    Released,
    Expired,
    /// Force-released, or (a ticket's) never collected.
    TakenAway,
}

/// The lease followed, as Redis holds it now.
#[derive(Debug, Clone)]
pub(in crate::engine) struct Followed {
    pub fencing_token: u64,
    /// Held until then (ms since the epoch, Redis's clock).
    pub expires_at_ms: u64,
    /// How long that is from now, by Redis's clock.
    pub expires_in: Duration,
    pub ttl: Ttl,
    pub owner: Option<Owner>,
}

impl Function for Follow {
    const OP: Op = Op::Follow;
    type Reply = Following;

    fn args(&self, call: &mut Cmd) {
        call.arg(self.0.expose());
        match self.1 {
            Some(token) => call.arg(token),
            None => call.arg(""),
        };
    }

    fn decode(reply: &mut Cursor) -> Result<Following, Error> {
        if !reply.flag()? {
            if reply.is_empty() {
                return Ok(Following::Gone(None));
            }
            let ended = match reply.text()?.as_str() {
                "released" => Some(Ended::Released),
                "expired" => Some(Ended::Expired),
                "force-released" | "not-collected" => Some(Ended::TakenAway),
                "" => None,
                other => return Err(Error::Protocol(format!("follow: ended {other:?}"))),
            };
            return Ok(Following::Gone(ended));
        }
        let fencing_token = reply.uint()?;
        let expires_at_ms = reply.uint()?;
        let expires_in = reply.time_left()?;
        let ttl = Ttl::from_ms(reply.uint()?).map_err(|e| Error::Protocol(e.0))?;
        Ok(Following::Live(Followed {
            fencing_token,
            expires_at_ms,
            expires_in,
            ttl,
            owner: reply.owner()?,
        }))
    }
}

/// The renewal of a followed name (its instance still has streams on it).
pub(in crate::engine) struct KeepFollowing;

impl Function for KeepFollowing {
    const OP: Op = Op::Follow;
    /// Whether the name is still held (and so followed).
    type Reply = bool;

    fn args(&self, call: &mut Cmd) {
        call.arg("");
    }

    fn decode(reply: &mut Cursor) -> Result<bool, Error> {
        reply.flag()
    }
}

#[cfg(test)]
mod tests {
    use redis::Value;

    use super::*;

    fn decode(fields: Vec<Value>) -> Result<Following, Error> {
        Follow::decode(&mut Cursor::new(Value::Array(fields))?)
    }

    fn text(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn a_lease_gone_reads_as_the_history_says_it_ended() {
        let gone = |how: &str| match decode(vec![Value::Int(0), text(how)]) {
            Ok(Following::Gone(ended)) => ended,
            other => panic!("{other:?}"),
        };
        assert_eq!(gone("released"), Some(Ended::Released));
        assert_eq!(gone("expired"), Some(Ended::Expired));
        assert_eq!(gone("force-released"), Some(Ended::TakenAway));
        assert_eq!(gone("not-collected"), Some(Ended::TakenAway));
        assert_eq!(gone(""), None);
        assert!(matches!(
            decode(vec![Value::Int(0)]),
            Ok(Following::Gone(None))
        ));
        assert!(decode(vec![Value::Int(0), text("vanished")]).is_err());
    }
}
