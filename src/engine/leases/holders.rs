//! What a holder and those who wait for it say to each other: a holder
//! follows its own lease (its stream), and anyone may ask the holders of a
//! name to finish early (a yield request, which takes nothing from them).

use super::operations::Leases;
use crate::domain::{LeaseId, Name, Owner, Reason};
use crate::engine::error::Error;
use crate::engine::following::HolderStream;
use crate::engine::functions::ask_yield::AskYield;

impl Leases {
    /// Opens the holder's stream on lease `id` of `name`; `None` when no
    /// live lease has that id.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn follow(&self, name: &Name, id: LeaseId) -> Result<Option<HolderStream>, Error> {
        HolderStream::open(self.engine.followers(), self.kind, name, id).await
    }

    /// Asks every holder of `name` to finish early, `by` the asking
    /// request's owner, for `reason`: how many leases were asked (0 when
    /// none is held).
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn ask_yield(
        &self,
        name: &Name,
        by: Option<&Owner>,
        reason: Option<&Reason>,
    ) -> Result<u64, Error> {
        self.engine
            .invoker()
            .run(self.kind, name, &AskYield { by, reason })
            .await
    }
}
