//! The messages the library sends an instance about its waiters
//! (`core/messages.lua` writes them; this is their one decoder): in a serving function's reply for
//! the caller's own waiters, on the name's channel for another instance's.

use std::time::Duration;

use crate::domain::Owner;

/// One message about a name's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::engine) enum LineMessage {
    /// `G TAG TOKEN EXPIRES_AT_MS EXPIRES_IN_MS` (held until its expiry) or
    /// `g ...` (provisional: Redis lets it go in `expires_in` unless the
    /// waiter's instance confirms it first, which it must before answering).
    Granted {
        tag: u64,
        token: u64,
        expires_at_ms: u64,
        /// Until the enforced expiry: the full one, or the provisional one.
        expires_in: Duration,
        /// `G`: the lease is held until `expires_at_ms` already.
        held: bool,
    },
    /// `s TAG OWNER`: a newer `newest_wins` request (of OWNER, "" none) took
    /// the place of waiter TAG.
    Superseded { tag: u64, owner: Option<Owner> },
    /// `x EXPIRES_IN_MS`: a lease of the name now ends sooner.
    EndsSooner { expires_in: Duration },
    /// `d 1` (in the caller's reply only): a ticket's turn notice is due on
    /// the name.
    NoticeDue,
}

impl LineMessage {
    /// The message `text` says, or `None` when it is none of ours.
    pub(in crate::engine) fn decode(text: &str) -> Option<Self> {
        let (kind, rest) = text.split_once(' ')?;
        let number = |s: &str| s.parse::<u64>().ok();
        match kind {
            "G" | "g" => {
                let mut fields = rest.split(' ');
                let mut next = || fields.next().and_then(number);
                let message = Self::Granted {
                    tag: next()?,
                    token: next()?,
                    expires_at_ms: next()?,
                    expires_in: Duration::from_millis(next()?),
                    held: kind == "G",
                };
                fields.next().is_none().then_some(message)
            }
            "s" => {
                let (tag, owner) = rest.split_once(' ')?;
                Some(Self::Superseded {
                    tag: number(tag)?,
                    owner: Owner::from_stored(owner.to_owned()),
                })
            }
            "x" => Some(Self::EndsSooner {
                expires_in: Duration::from_millis(number(rest)?),
            }),
            "d" => (rest == "1").then_some(Self::NoticeDue),
            _ => None,
        }
    }

    /// The waiter it is about, if one.
    pub(in crate::engine) fn tag(&self) -> Option<u64> {
        match self {
            Self::Granted { tag, .. } | Self::Superseded { tag, .. } => Some(*tag),
            Self::EndsSooner { .. } | Self::NoticeDue => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_say_whether_the_lease_is_held_already() {
        assert_eq!(
            LineMessage::decode("G 7 120 1700000060000 60000"),
            Some(LineMessage::Granted {
                tag: 7,
                token: 120,
                expires_at_ms: 1_700_000_060_000,
                expires_in: Duration::from_secs(60),
                held: true,
            })
        );
        let provisional = LineMessage::decode("g 7 120 1700000060000 3000");
        assert!(matches!(
            provisional,
            Some(LineMessage::Granted { held: false, expires_in, .. }) if expires_in == Duration::from_secs(3)
        ));
    }

    #[test]
    fn a_superseding_carries_the_newer_owner_spaces_included() {
        assert_eq!(
            LineMessage::decode("s 9 deploy run 42"),
            Some(LineMessage::Superseded {
                tag: 9,
                owner: Owner::from_stored("deploy run 42".to_owned()),
            })
        );
        assert_eq!(
            LineMessage::decode("s 9 "),
            Some(LineMessage::Superseded {
                tag: 9,
                owner: None
            })
        );
    }

    #[test]
    fn anything_else_is_not_a_message() {
        for text in [
            "",
            "x",
            "x soon",
            "G 1 2 3",
            "G 1 2 3 4 5",
            "q 1",
            "g a 2 3 4",
            "d",
            "d 2",
        ] {
            assert_eq!(LineMessage::decode(text), None, "{text:?}");
        }
        assert_eq!(LineMessage::decode("d 1"), Some(LineMessage::NoticeDue));
        assert_eq!(
            LineMessage::decode("x 250"),
            Some(LineMessage::EndsSooner {
                expires_in: Duration::from_millis(250)
            })
        );
    }
}
