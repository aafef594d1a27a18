//! The operations on the leases of both kinds: acquiring (at once, or by
//! joining the line and waiting: `acquire.rs`, with the acquisition under
//! way in `acquisition.rs` and the wait in `waiting.rs`), the plain
//! operations (`operations.rs`: refresh, check, release, force-release,
//! status), the holders' own (`holders.rs`: following a lease, asking
//! its holders to yield), listing (`listing.rs`), a name's history
//! (`history.rs`), a waiter's place (`progress.rs`) and its expected wait
//! (`eta.rs`).

mod acquire;
mod acquisition;
mod eta;
mod history;
mod holders;
mod listing;
mod operations;
mod progress;
mod run_to_end;
mod tickets;
mod waiting;

pub use acquire::Acquiring;
pub use listing::{PageCursor, PageLimit, Shown};
pub use operations::Leases;
pub use progress::InLine;
pub use tickets::TicketWait;
pub use waiting::Waiting;
