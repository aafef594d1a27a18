//! Whether anyone listens to change events, as this instance knows it: the
//! functions publish an event only then (`ARGV[1]`,
//! `functions/core/state.lua`), so that a call costs no `PUBSUB NUMSUB`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How long a new listener counts as one before the next count includes it.
const TOLD_FOR: Duration = Duration::from_secs(3);

/// Whether anyone listens on the events channel: counted about every
/// second (`PUBSUB NUMSUB`, by the events' subscription), and true at once
/// for a few seconds when an instance says it starts listening. On a
/// cluster a node counts only its own subscribers: always true there.
pub(in crate::engine) struct Audience {
    /// A cluster's: nothing to count, always true.
    always: bool,
    /// The latest count said someone listens.
    counted: AtomicBool,
    /// When an instance last said it starts listening: ms since `epoch`, 0 never.
    told_at_ms: AtomicU64,
    epoch: std::time::Instant,
}

impl Audience {
    /// Nobody known to listen yet; on a cluster (`always`), everyone.
    pub(in crate::engine) fn new(always: bool) -> Self {
        Self {
            always,
            counted: AtomicBool::new(false),
            told_at_ms: AtomicU64::new(0),
            epoch: std::time::Instant::now(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    /// Whether a change event should be published: someone listens, as far
    /// as this instance knows.
    pub(in crate::engine) fn listening(&self) -> bool {
        if self.always || self.counted.load(Ordering::Relaxed) {
            return true;
        }
        let told = self.told_at_ms.load(Ordering::Relaxed);
        told != 0 && self.now_ms() < told + TOLD_FOR.as_millis() as u64
    }

    /// Whether the events channel's listeners need counting: not on a cluster.
    pub(in crate::engine) fn needs_counting(&self) -> bool {
        !self.always
    }

    /// The count of the events channel's listeners, just taken.
    pub(in crate::engine) fn counted(&self, listening: bool) {
        self.counted.store(listening, Ordering::Relaxed);
    }

    /// An instance (this one or another) says it starts listening.
    pub(in crate::engine) fn told(&self) {
        self.told_at_ms.store(self.now_ms(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_counts_once_told_of_and_a_cluster_always_listens() {
        let audience = Audience::new(false);
        assert!(!audience.listening());
        audience.told();
        assert!(audience.listening());
        let counted = Audience::new(false);
        counted.counted(true);
        assert!(counted.listening());
        counted.counted(false);
        assert!(!counted.listening());
        assert!(Audience::new(true).listening());
        assert!(!Audience::new(true).needs_counting());
    }
}
