//! The kind of a resource: a lock or a semaphore. One value, passed from the
//! route to the engine, the metrics, the audit trail and the change events;
//! they differ in the limit an acquisition carries (a lock's is 1), their
//! keys' hash tag, and what the service shows of them, not in how they flow.

use serde::{Deserialize, Serialize};

/// A lock (one holder at a time) or a semaphore (up to `limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Lock,
    Semaphore,
}

impl Kind {
    /// Every kind, in the order the API documents them.
    pub const ALL: [Self; 2] = [Self::Lock, Self::Semaphore];

    /// The singular noun, as events, audit lines, metrics and docs name it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::Semaphore => "semaphore",
        }
    }

    /// The plural: its collection's path (`/locks`) and its listing's key.
    pub const fn plural(self) -> &'static str {
        match self {
            Self::Lock => "locks",
            Self::Semaphore => "semaphores",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Kind;

    #[test]
    fn a_kind_is_named_on_the_wire_as_in_paths() {
        for kind in Kind::ALL {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
            assert_eq!(serde_json::from_str::<Kind>(&json).unwrap(), kind);
            assert_eq!(kind.plural(), format!("{kind}s"));
        }
    }
}
