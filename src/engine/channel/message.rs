//! The messages the library writes on a name's channel and in a serving
//! function's reply (`core/messages.lua` writes them; this is their one
//! decoder): about an instance's waiters ([`LineMessage`]: in the caller's
//! reply for its own waiters, on the name's channel for another instance's)
//! and about followed leases ([`HolderMessage`], on the channel only).

use std::time::Duration;

use crate::domain::{Owner, Reason};

/// One message of a name's channel, decoded once for every listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::engine) enum NameMessage {
    /// About an instance's waiters on the name.
    Line(LineMessage),
    /// About a followed lease of the name.
    Holder(HolderMessage),
}

impl NameMessage {
    /// The message `text` says, or `None` when it is none of the library's.
    pub(in crate::engine) fn decode(text: &str) -> Option<Self> {
        let (kind, rest) = text.split_once(' ')?;
        match kind {
            "G" | "g" | "s" | "x" | "d" => LineMessage::parse(kind, rest).map(Self::Line),
            "r" | "l" | "f" | "y" => HolderMessage::parse(kind, rest).map(Self::Holder),
            _ => None,
        }
    }
}

fn number(s: &str) -> Option<u64> {
    s.parse::<u64>().ok()
}

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
    /// The message of `kind` whose fields are `rest`, or `None` when it is
    /// not one.
    fn parse(kind: &str, rest: &str) -> Option<Self> {
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

/// One word about a followed name's leases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::engine) enum HolderMessage {
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
    /// The message of `kind` whose fields are `rest`, or `None` when it is
    /// not one.
    fn parse(kind: &str, rest: &str) -> Option<Self> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Option<LineMessage> {
        match NameMessage::decode(text)? {
            NameMessage::Line(message) => Some(message),
            NameMessage::Holder(_) => None,
        }
    }

    fn holder(text: &str) -> Option<HolderMessage> {
        match NameMessage::decode(text)? {
            NameMessage::Holder(message) => Some(message),
            NameMessage::Line(_) => None,
        }
    }

    #[test]
    fn grants_say_whether_the_lease_is_held_already() {
        assert_eq!(
            line("G 7 120 1700000060000 60000"),
            Some(LineMessage::Granted {
                tag: 7,
                token: 120,
                expires_at_ms: 1_700_000_060_000,
                expires_in: Duration::from_secs(60),
                held: true,
            })
        );
        let provisional = line("g 7 120 1700000060000 3000");
        assert!(matches!(
            provisional,
            Some(LineMessage::Granted { held: false, expires_in, .. }) if expires_in == Duration::from_secs(3)
        ));
    }

    #[test]
    fn a_superseding_carries_the_newer_owner_spaces_included() {
        assert_eq!(
            line("s 9 deploy run 42"),
            Some(LineMessage::Superseded {
                tag: 9,
                owner: Owner::from_stored("deploy run 42".to_owned()),
            })
        );
        assert_eq!(
            line("s 9 "),
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
            assert_eq!(line(text), None, "{text:?}");
        }
        assert_eq!(line("d 1"), Some(LineMessage::NoticeDue));
        assert_eq!(
            line("x 250"),
            Some(LineMessage::EndsSooner {
                expires_in: Duration::from_millis(250)
            })
        );
    }

    #[test]
    fn decodes_each_word_and_nothing_else() {
        assert_eq!(
            holder("r 12 1700000060000 30000"),
            Some(HolderMessage::Refreshed {
                token: 12,
                expires_at_ms: 1_700_000_060_000,
                ttl_ms: 30_000
            })
        );
        assert_eq!(
            holder("l 12 released"),
            Some(HolderMessage::Released { token: 12 })
        );
        assert_eq!(
            holder("f 40"),
            Some(HolderMessage::ForceReleased { fence: 40 })
        );
        assert_eq!(
            holder("y 2\nci job 7\nrelease at 5"),
            Some(HolderMessage::YieldRequested {
                waiting: 2,
                by: Owner::from_stored("ci job 7".into()),
                reason: Reason::from_stored("release at 5".into()),
            })
        );
        assert_eq!(
            holder("y 0\n\n"),
            Some(HolderMessage::YieldRequested {
                waiting: 0,
                by: None,
                reason: None
            })
        );
        for text in ["G 1 2 3 4", "x 250", "r 1 2", "l 1 gone", "f", "y 1", ""] {
            assert_eq!(holder(text), None, "{text:?}");
        }
    }
}
