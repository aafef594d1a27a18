//! The words the library publishes about a followed name's leases on the
//! name's channel (`core/messages.lua` writes them; this is their one
//! decoder), and what a stream's mailbox holds.

use crate::domain::{Owner, Reason};

/// One word about a followed name's leases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HolderMessage {
    /// `r TOKEN EXPIRES_AT_MS TTL_MS`: lease TOKEN was refreshed.
    Refreshed {
        token: u64,
        expires_at_ms: u64,
        ttl_ms: u64,
    },
    /// `l TOKEN released`: lease TOKEN was released by its holder.
    Released { token: u64 },
    /// `f FENCE`: every lease up to FENCE was force-released.
    ForceReleased { fence: u64 },
    /// `y WAITING\nBY\nREASON`: someone asks the holders to finish early.
    YieldRequested {
        waiting: u64,
        by: Option<Owner>,
        reason: Option<Reason>,
    },
}

impl HolderMessage {
    /// The message `text` says, or `None` when it is none of these (the
    /// waiters' messages share the channel).
    pub(super) fn decode(text: &str) -> Option<Self> {
        let (kind, rest) = text.split_once(' ')?;
        let number = |s: &str| s.parse::<u64>().ok();
        match kind {
            "r" => {
                let mut fields = rest.split(' ');
                let mut next = || fields.next().and_then(number);
                let message = Self::Refreshed {
                    token: next()?,
                    expires_at_ms: next()?,
                    ttl_ms: next()?,
                };
                fields.next().is_none().then_some(message)
            }
            "l" => match rest.split_once(' ')? {
                (token, "released") => Some(Self::Released {
                    token: number(token)?,
                }),
                _ => None,
            },
            "f" => Some(Self::ForceReleased {
                fence: number(rest)?,
            }),
            "y" => {
                let mut lines = rest.splitn(3, '\n');
                let waiting = number(lines.next()?)?;
                let by = Owner::from_stored(lines.next()?.to_owned());
                let reason = Reason::from_stored(lines.next()?.to_owned());
                Some(Self::YieldRequested {
                    waiting,
                    by,
                    reason,
                })
            }
            _ => None,
        }
    }
}

/// What a stream's mailbox holds.
#[derive(Debug, Clone)]
pub(super) enum Heard {
    Message(HolderMessage),
    /// Messages may have been missed: ask Redis.
    Resync,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_each_word_and_nothing_else() {
        assert_eq!(
            HolderMessage::decode("r 12 1700000060000 30000"),
            Some(HolderMessage::Refreshed {
                token: 12,
                expires_at_ms: 1_700_000_060_000,
                ttl_ms: 30_000
            })
        );
        assert_eq!(
            HolderMessage::decode("l 12 released"),
            Some(HolderMessage::Released { token: 12 })
        );
        assert_eq!(
            HolderMessage::decode("f 40"),
            Some(HolderMessage::ForceReleased { fence: 40 })
        );
        assert_eq!(
            HolderMessage::decode("y 2\nci job 7\nrelease at 5"),
            Some(HolderMessage::YieldRequested {
                waiting: 2,
                by: Owner::from_stored("ci job 7".into()),
                reason: Reason::from_stored("release at 5".into()),
            })
        );
        assert_eq!(
            HolderMessage::decode("y 0\n\n"),
            Some(HolderMessage::YieldRequested {
                waiting: 0,
                by: None,
                reason: None
            })
        );
        for text in ["G 1 2 3 4", "x 250", "r 1 2", "l 1 gone", "f", "y 1", ""] {
            assert_eq!(HolderMessage::decode(text), None, "{text:?}");
        }
    }
}
