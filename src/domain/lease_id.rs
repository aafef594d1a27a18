//! The id of a lease: a random UUID v4 that works as a capability, so it is
//! shown only to its holder and never logged in full.

use std::fmt;

use uuid::Uuid;

use super::Invalid;

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseId(Uuid);

impl LeaseId {
    /// A fresh random id (122 random bits), from uuid's `fast-rng`: the
    /// `rand` crate's thread-local generator, a cryptographically secure
    /// ChaCha stream seeded from the operating system (and reseeded), so an
    /// id is as unguessable as one read from `getrandom`, without a system
    /// call per id.
    pub fn new() -> Self {
        Self(Uuid::new_v4())
    }

    /// # Errors
    /// When the text is not a UUID.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        Uuid::try_parse(raw)
            .map(Self)
            .map_err(|_| Invalid("must be a lease id (a UUID)".into()))
    }

    /// The full id, for the holder's response and for Redis only.
    pub fn expose(&self) -> String {
        self.0.hyphenated().to_string()
    }
}

impl Default for LeaseId {
    fn default() -> Self {
        Self::new()
    }
}

/// Shows only the last four hex digits, enough to tell leases apart in a log.
impl fmt::Debug for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let full = self.0.simple().to_string();
        write!(f, "LeaseId(…{})", &full[full.len() - 4..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_id() {
        let id = LeaseId::new();
        let shown = format!("{id:?}");
        assert!(!shown.contains(&id.expose()));
        assert!(!shown.contains(&id.expose()[..8]));
    }

    #[test]
    fn parses_what_it_exposes() {
        let id = LeaseId::new();
        assert_eq!(LeaseId::parse(&id.expose()).unwrap(), id);
    }

    #[test]
    fn refuses_what_is_not_a_uuid() {
        for bad in ["", "abc", "not-a-uuid-at-all-0000000000000000", "123"] {
            assert!(LeaseId::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
