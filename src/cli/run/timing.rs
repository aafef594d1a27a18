//! The times a `baton run` keeps to, from its ttl and grace: when SIGTERM
//! and SIGKILL must go out for COMMAND to have ended before the lease can
//! lapse (`supervisor.rs` says why that holds).

use std::time::Duration;

use crate::cli::duration::human;
use crate::cli::exit::Failure;

/// Between SIGTERM and SIGKILL, unless the ttl is too short for it.
const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// The times a run keeps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub ttl: Duration,
    pub grace: Duration,
    /// The longest a refresh may take: ttl/10, 0.5 s to 5 s.
    pub rtt: Duration,
}

impl Timing {
    /// The default grace shrinks to fit the ttl; a grace that is given must fit.
    ///
    /// # Errors
    /// A ttl or grace out of range, or a grace that does not fit the ttl (64).
    pub fn new(ttl: Duration, grace: Option<Duration>) -> Result<Self, Failure> {
        if ttl < Duration::from_secs(1) || ttl > Duration::from_secs(86_400) {
            return Err(Failure::usage("--ttl must be between 1s and 24h"));
        }
        let rtt = (ttl / 10).clamp(Duration::from_millis(500), Duration::from_secs(5));
        // The ttl must hold the grace and a round trip twice, so that a
        // refresh can still be tried after the first one is due (ttl/3).
        let room = (ttl / 2).saturating_sub(rtt);
        let grace = match grace {
            None => DEFAULT_GRACE.min(room),
            Some(grace) if grace > Duration::from_secs(3600) => {
                return Err(Failure::usage("--grace must be at most 1h"));
            }
            Some(grace) if grace > room => {
                return Err(Failure::usage(format!(
                    "--ttl ({}) must be at least twice --grace ({}) plus the refresh round trip ({}): \
                     lower --grace (at most {} here) or raise --ttl",
                    human(ttl),
                    human(grace),
                    human(rtt),
                    human(room)
                )));
            }
            Some(grace) => grace,
        };
        Ok(Self { ttl, grace, rtt })
    }

    /// When SIGTERM must go out if the lease was last known good at `ok`.
    pub(crate) fn stop_at(self, ok: Duration) -> Duration {
        ok + self.ttl - self.grace - self.rtt
    }

    /// When SIGKILL must have gone out if the lease was last known good at `ok`.
    pub(crate) fn kill_by(self, ok: Duration) -> Duration {
        self.stop_at(ok) + self.grace
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_grace_shrinks_to_fit_short_ttls() {
        let grace = |ttl: u64| Timing::new(Duration::from_secs(ttl), None).unwrap().grace;
        assert_eq!(grace(60), Duration::from_secs(5));
        assert_eq!(grace(10), Duration::from_secs(4));
        assert_eq!(grace(3), Duration::from_secs(1));
        assert_eq!(grace(1), Duration::ZERO);
    }

    #[test]
    fn a_given_grace_must_fit() {
        let timing = |ttl: u64, grace: u64| {
            Timing::new(Duration::from_secs(ttl), Some(Duration::from_secs(grace)))
        };
        assert_eq!(timing(3, 5).unwrap_err().status, crate::cli::exit::USAGE);
        assert_eq!(timing(6, 1).unwrap().grace, Duration::from_secs(1));
        assert!(Timing::new(Duration::from_millis(500), None).is_err());
    }

    #[test]
    fn sigterm_goes_out_grace_plus_a_round_trip_before_the_lease_can_lapse() {
        let t = Timing::new(Duration::from_secs(6), Some(Duration::from_secs(1))).unwrap();
        assert_eq!(t.rtt, Duration::from_millis(600));
        assert_eq!(
            t.stop_at(Duration::from_secs(100)),
            Duration::from_millis(104_400)
        );
    }
}
