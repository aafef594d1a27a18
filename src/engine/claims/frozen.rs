//! A claim and the freezes: a waiting claim holds none of its names while a
//! freeze holds any one of them, so that no other job waits behind a frozen
//! claim on the names it could take. It gives back what it took, waits
//! (holding nothing, in no line) for the window to end, and then takes its
//! names as any claim does; while it takes them, a freeze that starts
//! holding one of them makes it give everything back the same way. A claim
//! that overrides freezes (an administrator's `override`) is never held back.
//!
//! Which names a freeze holds is judged by this instance's list
//! ([`FreezeBook`](crate::engine::FreezeBook)), as the window every call
//! carries is chosen; Redis still judges each grant on its own clock, so a
//! name taken just as a window opens is never granted inside it.

use std::time::Duration;

use tokio::time::Instant;

use super::Claims;
use crate::domain::{ClaimParts, Kind, Name};
use crate::engine::freezes::wall_clock_ms;
use crate::engine::model::FrozenBy;

/// A name of a claim that a freeze holds, and the freeze.
pub(super) type FrozenPart = (Kind, Name, FrozenBy);

impl Claims {
    /// The first name of `parts` that a freeze holds now, as this instance
    /// knows it.
    pub(super) fn frozen_part(&self, parts: &ClaimParts) -> Option<FrozenPart> {
        let book = self.engine.book();
        let now = wall_clock_ms();
        parts.iter().find_map(|part| {
            let freeze = book
                .for_name(part.kind, part.name.as_str(), now)
                .filter(|f| f.holds(now))?;
            Some((
                part.kind,
                part.name.clone(),
                FrozenBy {
                    freeze_id: Some(freeze.freeze_id),
                    reason: freeze.reason,
                    until_ms: freeze.window.end_ms,
                },
            ))
        })
    }

    /// Resolves once a freeze holds one of the names of `parts`: looked at
    /// whenever the list of freezes changes and when the next window of any
    /// of them opens.
    pub(super) async fn until_frozen(&self, parts: &ClaimParts) -> FrozenPart {
        let book = self.engine.book();
        let mut changes = book.changes();
        loop {
            changes.mark_unchanged();
            if let Some(frozen) = self.frozen_part(parts) {
                return frozen;
            }
            let now = wall_clock_ms();
            let next_start = parts
                .iter()
                .filter_map(|part| book.for_name(part.kind, part.name.as_str(), now))
                .map(|freeze| freeze.window.start_ms)
                .filter(|start| *start > now)
                .min();
            let opens = async {
                match next_start {
                    Some(start) => tokio::time::sleep(millis_after(now, start)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(opens);
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        // No more changes can come: only windows opening.
                        (&mut opens).await;
                    }
                }
                () = &mut opens => {}
            }
        }
    }

    /// Waits, holding nothing, until the window ending at `until_ms` (this
    /// instance's clock) is over, the list of freezes changes, or
    /// `deadline`, whichever comes first; `false` when the service began
    /// shutting down meanwhile.
    pub(super) async fn thaw(&self, until_ms: i64, deadline: Instant) -> bool {
        let mut changes = self.engine.book().changes();
        changes.mark_unchanged();
        // A little after the end: Redis judges the window on its own clock.
        let ends = millis_after(wall_clock_ms(), until_ms) + Duration::from_millis(20);
        let until = (Instant::now() + ends).min(deadline);
        tokio::select! {
            going_on = self.engine.pause(until.saturating_duration_since(Instant::now())) => going_on,
            _ = changes.changed() => true,
        }
    }
}

/// The time from `now_ms` to `at_ms` (both ms since the Unix epoch); zero
/// when it has passed.
fn millis_after(now_ms: i64, at_ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(at_ms.saturating_sub(now_ms)).unwrap_or(0))
}
