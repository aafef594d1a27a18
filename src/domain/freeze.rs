//! Freezes: a window of time in which nothing is granted on the names a
//! freeze matches (deploys stopped over a weekend, a holiday, an incident):
//! what it matches, why, and when ([`Schedule`]).

use std::fmt;

use uuid::Uuid;

use super::{Invalid, Kind, NamePattern, Reason, Schedule, TokenName, Window};

/// A freeze's id: a UUID, shown to anyone who may list freezes (it is no
/// capability: deleting one takes an admin token).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FreezeId(Uuid);

impl FreezeId {
    pub fn new() -> Self {
        Self(Uuid::new_v4())
    }

    /// # Errors
    /// When the text is not a UUID.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        Uuid::try_parse(raw)
            .map(Self)
            .map_err(|_| Invalid("must be a freeze id (a UUID)".into()))
    }
}

impl Default for FreezeId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for FreezeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

/// A freeze: nothing is granted on the names `pattern` matches (of `kind`,
/// or of both kinds) while one of its windows holds, except to a request
/// that overrides it.
#[derive(Debug, Clone)]
pub struct Freeze {
    pub id: FreezeId,
    /// A name, or every name under a prefix (`deploy-*`).
    pub pattern: NamePattern,
    /// Locks or semaphores only; `None`: both.
    pub kind: Option<Kind>,
    pub reason: Option<Reason>,
    pub schedule: Schedule,
    /// When it was made (ms since the Unix epoch).
    pub created_ms: i64,
    /// The name of the token that made it.
    pub by: Option<TokenName>,
}

impl Freeze {
    /// Whether it applies to the `kind` named `name`.
    pub fn matches(&self, kind: Kind, name: &str) -> bool {
        self.kind.is_none_or(|own| own == kind) && self.pattern.matches(name)
    }

    /// Its window that holds `now_ms`, else its next one.
    pub fn window_at(&self, now_ms: i64) -> Option<Window> {
        self.schedule.window_at(now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freeze_matches_its_names_of_its_kind() {
        let freeze = Freeze {
            id: FreezeId::new(),
            pattern: NamePattern::parse("deploy-*").unwrap(),
            kind: Some(Kind::Lock),
            reason: None,
            schedule: Schedule::OneOff(Window {
                start_ms: 0,
                end_ms: 10,
            }),
            created_ms: 0,
            by: None,
        };
        assert!(freeze.matches(Kind::Lock, "deploy-prod"));
        assert!(!freeze.matches(Kind::Semaphore, "deploy-prod"));
        assert!(!freeze.matches(Kind::Lock, "build"));
        let id = freeze.id.to_string();
        assert_eq!(FreezeId::parse(&id).unwrap(), freeze.id);
        assert!(FreezeId::parse("nope").is_err());
    }
}
