//! What a claim asks for: several names at once, each at most once, taken
//! in one global order, and the id that names a claim once it is held.

use std::fmt;

use super::{Demand, Invalid, Kind, LeaseId, Name};

/// The fewest and the most names one claim may take.
pub const CLAIM_NAMES: std::ops::RangeInclusive<usize> = 1..=16;

/// One name of a claim: its kind, and what it takes of the name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimPart {
    pub kind: Kind,
    pub name: Name,
    pub demand: Demand,
}

impl ClaimPart {
    /// Its place in the one order every claim takes its names in: locks
    /// before semaphores, then by name (by bytes, the same on every
    /// instance and every version).
    fn order_key(&self) -> (u8, &str) {
        let kind = match self.kind {
            Kind::Lock => 0,
            Kind::Semaphore => 1,
        };
        (kind, self.name.as_str())
    }
}

/// The names of a claim, 1 to 16 of them (one, so that a pipeline template
/// that generates the list works at any length), each at most once, in the global
/// order in which every claim takes them.
///
/// Taking names one by one in one order shared by every claim is what rules
/// out a deadlock: a claim waits only for a name later in the order than
/// every name it holds, so no cycle of claims each waiting for another can
/// form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimParts(Vec<ClaimPart>);

impl ClaimParts {
    /// # Errors
    /// No name or more than 16, or a name twice (as the same kind).
    pub fn new(mut parts: Vec<ClaimPart>) -> Result<Self, Invalid> {
        if !CLAIM_NAMES.contains(&parts.len()) {
            return Err(Invalid(format!(
                "a claim takes {} to {} names in all (locks and semaphores together), not {}",
                CLAIM_NAMES.start(),
                CLAIM_NAMES.end(),
                parts.len()
            )));
        }
        parts.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
        if let Some(twice) = parts
            .windows(2)
            .find(|w| w[0].order_key() == w[1].order_key())
        {
            return Err(Invalid(format!(
                "{} '{}' is named twice; a claim takes each name at most once",
                twice[0].kind, twice[0].name
            )));
        }
        Ok(Self(parts))
    }

    /// In the order they are taken.
    pub fn iter(&self) -> std::slice::Iter<'_, ClaimPart> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never: a claim has at least one name.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `i`th name in the order they are taken.
    pub fn get(&self, i: usize) -> Option<&ClaimPart> {
        self.0.get(i)
    }
}

/// The id of a claim: a random UUID v4 that works as a capability, like a
/// lease id: shown only to its holder, never logged.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClaimId(LeaseId);

impl ClaimId {
    /// A fresh random id.
    pub fn new() -> Self {
        Self(LeaseId::new())
    }

    /// # Errors
    /// When the text is not a UUID.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        LeaseId::parse(raw)
            .map(Self)
            .map_err(|_| Invalid("must be a claim id (a UUID)".into()))
    }

    /// The full id, for the holder's response and for Redis only.
    pub fn expose(&self) -> String {
        self.0.expose()
    }
}

impl Default for ClaimId {
    fn default() -> Self {
        Self::new()
    }
}

/// Hides the id, as a lease id's does.
impl fmt::Debug for ClaimId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Claim{:?}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(kind: Kind, name: &str) -> ClaimPart {
        ClaimPart {
            kind,
            name: Name::parse(name).unwrap(),
            demand: Demand::EXCLUSIVE,
        }
    }

    #[test]
    fn parts_are_taken_locks_first_then_by_name() {
        let parts = ClaimParts::new(vec![
            part(Kind::Semaphore, "a"),
            part(Kind::Lock, "b"),
            part(Kind::Lock, "a"),
        ])
        .unwrap();
        let order: Vec<_> = parts
            .iter()
            .map(|p| (p.kind, p.name.as_str().to_owned()))
            .collect();
        assert_eq!(
            order,
            [
                (Kind::Lock, "a".to_owned()),
                (Kind::Lock, "b".to_owned()),
                (Kind::Semaphore, "a".to_owned())
            ]
        );
    }

    #[test]
    fn a_claim_takes_one_to_sixteen_names_each_once() {
        assert!(ClaimParts::new(Vec::new()).is_err());
        assert!(ClaimParts::new(vec![part(Kind::Lock, "a")]).is_ok());
        let twice = ClaimParts::new(vec![part(Kind::Lock, "a"), part(Kind::Lock, "a")]);
        assert!(twice.unwrap_err().0.contains("twice"));
        // The same name as a lock and as a semaphore are two resources.
        assert!(ClaimParts::new(vec![part(Kind::Lock, "a"), part(Kind::Semaphore, "a")]).is_ok());
        let many: Vec<_> = (0..17)
            .map(|i| part(Kind::Lock, &format!("n{i}")))
            .collect();
        assert!(ClaimParts::new(many[..16].to_vec()).is_ok());
        assert!(ClaimParts::new(many).is_err());
    }

    #[test]
    fn debug_hides_the_claim_id() {
        let id = ClaimId::new();
        assert!(!format!("{id:?}").contains(&id.expose()[..8]));
        assert_eq!(ClaimId::parse(&id.expose()).unwrap(), id);
    }
}
