//! Bounded numbers of the API: lease ttl, wait time and semaphore limit.

use std::time::Duration;

use super::Invalid;

/// How long a lease lives without a refresh: 1 ms to 24 h, default 30 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ttl(Duration);

impl Ttl {
    pub const MAX_MS: u64 = 86_400_000;
    pub const DEFAULT_MS: u64 = 30_000;

    /// # Errors
    /// When `ms` is 0 or over a day.
    pub fn from_ms(ms: u64) -> Result<Self, Invalid> {
        if (1..=Self::MAX_MS).contains(&ms) {
            Ok(Self(Duration::from_millis(ms)))
        } else {
            Err(Invalid(format!("must be between 1 and {}", Self::MAX_MS)))
        }
    }

    pub fn as_ms(self) -> u64 {
        self.0.as_millis() as u64
    }

    pub fn as_duration(self) -> Duration {
        self.0
    }
}

impl Default for Ttl {
    fn default() -> Self {
        Self(Duration::from_millis(Self::DEFAULT_MS))
    }
}

/// How long an acquisition may wait: 0 up to the server's maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WaitTime(Duration);

impl WaitTime {
    /// # Errors
    /// When `ms` is over `max_ms`.
    pub fn from_ms(ms: u64, max_ms: u64) -> Result<Self, Invalid> {
        if ms <= max_ms {
            Ok(Self(Duration::from_millis(ms)))
        } else {
            Err(Invalid(format!(
                "must be between 0 and {max_ms} (the server's maximum)"
            )))
        }
    }

    pub fn as_duration(self) -> Duration {
        self.0
    }

    pub fn as_ms(self) -> u64 {
        self.0.as_millis() as u64
    }
}

/// How many leases of one semaphore may be held at once: 1 to 100,000.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit(u32);

impl Limit {
    pub const MAX: u32 = 100_000;
    /// A lock's limit.
    pub const ONE: Self = Self(1);

    /// # Errors
    /// When `n` is 0 or over 100,000.
    pub fn new(n: u64) -> Result<Self, Invalid> {
        if (1..=u64::from(Self::MAX)).contains(&n) {
            Ok(Self(n as u32))
        } else {
            Err(Invalid(format!("must be between 1 and {}", Self::MAX)))
        }
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_bounds() {
        assert!(Ttl::from_ms(0).is_err());
        assert_eq!(Ttl::from_ms(1).unwrap().as_ms(), 1);
        assert_eq!(Ttl::from_ms(86_400_000).unwrap().as_ms(), 86_400_000);
        assert!(Ttl::from_ms(86_400_001).is_err());
        assert_eq!(Ttl::default().as_ms(), 30_000);
    }

    #[test]
    fn wait_bounds_follow_the_server_maximum() {
        assert_eq!(WaitTime::from_ms(0, 10).unwrap().as_ms(), 0);
        assert_eq!(WaitTime::from_ms(10, 10).unwrap().as_ms(), 10);
        let err = WaitTime::from_ms(11, 10).unwrap_err();
        assert!(err.0.contains("the server's maximum"));
    }

    #[test]
    fn limit_bounds() {
        assert!(Limit::new(0).is_err());
        assert_eq!(Limit::new(1).unwrap().get(), 1);
        assert_eq!(Limit::new(100_000).unwrap().get(), 100_000);
        assert!(Limit::new(100_001).is_err());
    }
}
