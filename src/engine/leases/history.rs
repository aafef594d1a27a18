//! A name's history: the leases it had and how each ended, newest first, a
//! page at a time (what Redis keeps: `functions/core/history.lua`).

use super::operations::Leases;
use crate::domain::Name;
use crate::engine::error::Error;
use crate::engine::functions::history::ReadHistory;
use crate::engine::model::{History, HistoryCursor, HistoryLimit};

impl Leases {
    /// A page of `name`'s history, newest first: at most `limit` entries,
    /// before `before` (the first page without), in its turn among the
    /// reads whose cost grows with the data.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn history(
        &self,
        name: &Name,
        limit: HistoryLimit,
        before: Option<&HistoryCursor>,
    ) -> Result<History, Error> {
        let _turn = self.engine.read_turn().await;
        let read = ReadHistory {
            limit: limit.get(),
            before: before.map(HistoryCursor::as_str),
        };
        let reply = self.run(name, &read).await?;
        Ok(History {
            entries: reply.entries,
            next_cursor: reply
                .next
                .and_then(|next| HistoryCursor::parse(next.as_str()).ok()),
        })
    }
}
