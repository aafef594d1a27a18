//! What one lease takes of its name: one model for every kind.
//!
//! A name has a capacity and a lease takes some of it: its weight, judged
//! against the limit its acquisition carries (`fits()` in the library's
//! `functions/core/admission.lua`).
//! The HTTP layer names the cases: an exclusive lock takes all of a lock's
//! capacity, a shared lock one unit of it, a semaphore lease its permits of
//! its limit.

use super::{Invalid, Limit};

/// How many of a semaphore's `limit` one lease counts as: 1 to 100,000.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permits(u32);

impl Permits {
    pub const ONE: Self = Self(1);

    /// # Errors
    /// When `n` is 0 or over 100,000 (the largest limit).
    pub fn new(n: u64) -> Result<Self, Invalid> {
        if (1..=u64::from(Limit::MAX)).contains(&n) {
            Ok(Self(n as u32))
        } else {
            Err(Invalid(format!(
                "must be between 1 and the limit (at most {})",
                Limit::MAX
            )))
        }
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

impl Default for Permits {
    fn default() -> Self {
        Self::ONE
    }
}

/// A lease's weight and the limit it is judged against (see the module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Demand {
    weight: u64,
    limit: u64,
}

impl Demand {
    /// A lock's capacity, and an exclusive lease's weight: more than any
    /// number of shared leases held at once. The library has it as `FULL`
    /// (`functions/core/state.lua`).
    pub const LOCK_CAPACITY: u64 = 1_000_000_000;
    /// An exclusive (write) lock: held alone.
    pub const EXCLUSIVE: Self = Self {
        weight: Self::LOCK_CAPACITY,
        limit: Self::LOCK_CAPACITY,
    };
    /// A shared (read) lock: held beside any number of shared ones.
    pub const SHARED: Self = Self {
        weight: 1,
        limit: Self::LOCK_CAPACITY,
    };

    /// A lock lease, shared or exclusive.
    pub const fn lock(shared: bool) -> Self {
        if shared {
            Self::SHARED
        } else {
            Self::EXCLUSIVE
        }
    }

    /// A semaphore lease of `permits` of `limit`.
    ///
    /// # Errors
    /// When `permits` is more than `limit`.
    pub fn semaphore(permits: Permits, limit: Limit) -> Result<Self, Invalid> {
        if permits.get() > limit.get() {
            return Err(Invalid(format!(
                "must be at most the limit ({}): {} permits can never be held at once",
                limit.get(),
                permits.get()
            )));
        }
        Ok(Self {
            weight: u64::from(permits.get()),
            limit: u64::from(limit.get()),
        })
    }

    /// A demand as Redis keeps it.
    ///
    /// # Errors
    /// When it is none of the three cases.
    pub fn from_stored(weight: u64, limit: u64) -> Result<Self, Invalid> {
        if limit == Self::LOCK_CAPACITY && (weight == 1 || weight == Self::LOCK_CAPACITY) {
            return Ok(Self { weight, limit });
        }
        let permits = Permits::new(weight)?;
        let limit = Limit::new(limit)?;
        Self::semaphore(permits, limit)
    }

    pub fn weight(self) -> u64 {
        self.weight
    }

    pub fn limit(self) -> u64 {
        self.limit
    }

    /// A lock's lease that others may hold beside it (a reader).
    pub fn is_shared(self) -> bool {
        !Self::is_exclusive_weight(self.weight)
    }

    /// Whether `weight` (one lock lease's, or all of a lock's leases'
    /// together) is the lock's whole capacity: an exclusive lease's. Less is
    /// shared.
    pub const fn is_exclusive_weight(weight: u64) -> bool {
        weight >= Self::LOCK_CAPACITY
    }

    /// A semaphore lease's permits (its weight).
    pub fn permits(self) -> u64 {
        self.weight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_fit_their_limit() {
        let limit = Limit::new(3).unwrap();
        assert_eq!(
            Demand::semaphore(Permits::new(3).unwrap(), limit)
                .unwrap()
                .weight(),
            3
        );
        assert!(Demand::semaphore(Permits::new(4).unwrap(), limit).is_err());
        assert!(Permits::new(0).is_err());
        assert!(Permits::new(100_001).is_err());
    }

    #[test]
    fn a_stored_demand_is_one_of_the_three_cases() {
        assert_eq!(
            Demand::from_stored(Demand::LOCK_CAPACITY, Demand::LOCK_CAPACITY),
            Ok(Demand::EXCLUSIVE)
        );
        assert_eq!(
            Demand::from_stored(1, Demand::LOCK_CAPACITY),
            Ok(Demand::SHARED)
        );
        assert!(Demand::SHARED.is_shared() && !Demand::EXCLUSIVE.is_shared());
        assert_eq!(Demand::from_stored(2, 5).map(Demand::permits), Ok(2));
        assert!(Demand::from_stored(6, 5).is_err());
        assert!(Demand::from_stored(2, Demand::LOCK_CAPACITY).is_err());
    }

    #[test]
    fn only_a_whole_lock_s_weight_is_exclusive() {
        assert!(Demand::is_exclusive_weight(Demand::EXCLUSIVE.weight()));
        assert!(!Demand::is_exclusive_weight(Demand::SHARED.weight()));
        // Shared leases together never take a whole lock.
        assert!(!Demand::is_exclusive_weight(Demand::LOCK_CAPACITY - 1));
    }

    #[test]
    fn the_lock_capacity_is_the_one_the_library_uses() {
        let state = include_str!("../engine/functions/core/state.lua");
        assert!(state.contains(&format!("local FULL = {}", Demand::LOCK_CAPACITY)));
    }
}
