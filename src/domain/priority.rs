//! A request's priority in the waiting line: 0 to 9, higher first.

use std::fmt;

use super::Invalid;

/// 0 (the default) to 9: a waiter is placed ahead of every waiter of a
/// lower priority and behind those of its own that joined before it. It
/// never takes a lease from a holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Priority(u8);

impl Priority {
    /// The highest priority.
    pub const MAX: u8 = 9;

    /// # Errors
    /// When `n` is over 9.
    pub fn new(n: u64) -> Result<Self, Invalid> {
        match u8::try_from(n) {
            Ok(p) if p <= Self::MAX => Ok(Self(p)),
            _ => Err(Invalid(format!(
                "must be an integer between 0 and {}",
                Self::MAX
            ))),
        }
    }

    pub fn get(self) -> u8 {
        self.0
    }

    /// The default, 0: what a request that says nothing of priority has.
    pub fn is_default(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_run_from_0_to_9() {
        assert_eq!(Priority::default().get(), 0);
        assert!(Priority::default().is_default());
        assert_eq!(Priority::new(9).unwrap().get(), 9);
        assert!(!Priority::new(1).unwrap().is_default());
        for bad in [10, 255, 256, u64::MAX] {
            assert!(Priority::new(bad).is_err(), "{bad}");
        }
        assert!(Priority::new(5).unwrap() > Priority::new(4).unwrap());
    }
}
