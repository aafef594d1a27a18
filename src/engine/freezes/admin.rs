//! Making, reading and deleting freezes: one call of `freezes.lua` each;
//! this instance applies its own change at once, the others when they hear
//! of it.

use std::sync::Arc;
use std::time::Instant;

use super::book::FreezeBook;
use super::clock::wall_clock_ms;
use super::function::{read_stored, ChangeFreezes, Changed, FreezesVersion, ListFreezes};
use super::timeline::{Read, Timeline};
use crate::domain::{Freeze, FreezeId};
use crate::engine::error::Error;
use crate::engine::functions::invoker::Invoker;

/// How many freezes in force one token name may keep, so that no team can
/// fill the list all share.
pub const MAX_FREEZES_PER_NAME: usize = 100;

/// The freezes in Redis, and this instance's copy of them; cheap to clone.
#[derive(Clone)]
pub struct Freezes {
    pub(in crate::engine) invoker: Arc<Invoker>,
    /// This instance's copy of the list.
    pub(in crate::engine) book: Arc<FreezeBook>,
}

/// What making a freeze came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    Made,
    /// Its window is over already, by Redis's clock.
    Over,
    /// The list holds as many freezes as it may (1,000), and its maker may
    /// not go past that.
    Full,
    /// Its maker keeps [`MAX_FREEZES_PER_NAME`] freezes in force already.
    FullForName,
}

impl Freezes {
    /// This instance's copy of the list.
    pub fn book(&self) -> &Arc<FreezeBook> {
        &self.book
    }

    /// Every freeze `shown` lets through, as Redis has them now (this
    /// instance's copy, once Redis confirmed it is its list), each with its
    /// windows now: one small call to Redis, and a lookup per freeze.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn list(
        &self,
        shown: impl FnMut(&Freeze) -> bool,
    ) -> Result<Vec<(Freeze, Timeline)>, Error> {
        self.check().await?;
        Ok(self.book().listing(wall_clock_ms(), shown))
    }

    /// The freeze `id`, as Redis has it now, with its windows now.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn get(&self, id: FreezeId) -> Result<Option<(Freeze, Timeline)>, Error> {
        self.check().await?;
        Ok(self.book().get(id, wall_clock_ms()))
    }

    /// The windows of `freeze` now (one just made: this instance holds it
    /// already, unless reading the list after making it failed).
    pub fn timeline(&self, freeze: &Freeze) -> Timeline {
        self.book().timeline_of(freeze, wall_clock_ms())
    }

    /// Reads the list into this instance's copy, fresh from when the read
    /// was sent.
    ///
    /// # Errors
    /// Redis unavailable (the copy stays as it was).
    pub async fn reload(&self) -> Result<(), Error> {
        let index = self.invoker.keys().freeze_index();
        let sent = Instant::now();
        let listed = self.invoker.run_on(&index, &ListFreezes).await?;
        let read = Read {
            version: listed.version,
            sent,
            redis_ms: listed.read_ms,
        };
        self.book().replace(listed.stored, &read, read_stored);
        Ok(())
    }

    /// Checks that this instance's copy is still Redis's list (its version
    /// unchanged): then it is fresh from when the check was sent; if not,
    /// reads it again.
    ///
    /// # Errors
    /// Redis unavailable (the copy stays as it was, and ages).
    pub async fn check(&self) -> Result<(), Error> {
        let index = self.invoker.keys().freeze_index();
        let sent = Instant::now();
        let (version, redis_ms) = self.invoker.run_on(&index, &FreezesVersion).await?;
        let read = Read {
            version,
            sent,
            redis_ms,
        };
        if self.book().confirm(&read) {
            return Ok(());
        }
        self.reload().await
    }

    /// Makes `freeze`, counted against its maker's name (`freeze.by`: at
    /// most [`MAX_FREEZES_PER_NAME`] in force), and against the list's
    /// maximum unless `beyond_max` (an admin of every name, whose incident
    /// freeze no one else's freezes may keep out); every instance hears of
    /// it.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn put(&self, freeze: &Freeze, beyond_max: bool) -> Result<Put, Error> {
        let keys = self.invoker.keys();
        let change = ChangeFreezes::Put {
            key: keys.freeze(&freeze.id),
            freeze,
            channel: keys.freezes_channel(),
            by: freeze.by.as_ref().map(|by| keys.freezes_by(by)),
            per_name: MAX_FREEZES_PER_NAME,
            beyond_max,
        };
        let put = match self.invoker.run_on(&keys.freeze_index(), &change).await? {
            Changed::Done => Put::Made,
            Changed::Nothing => Put::Over,
            Changed::Full => Put::Full,
            Changed::FullForName => Put::FullForName,
        };
        if put == Put::Made {
            self.apply_here().await;
        }
        Ok(put)
    }

    /// Deletes the freeze `id`: `false` when there is none.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn delete(&self, id: FreezeId) -> Result<bool, Error> {
        let keys = self.invoker.keys();
        let change = ChangeFreezes::Delete {
            key: keys.freeze(&id),
            channel: keys.freezes_channel(),
        };
        let deleted = self.invoker.run_on(&keys.freeze_index(), &change).await? == Changed::Done;
        if deleted {
            self.apply_here().await;
        }
        Ok(deleted)
    }

    /// This instance applies a change it made at once (its message may come
    /// later); when Redis does not answer now, the next reload does it.
    async fn apply_here(&self) {
        if let Err(err) = self.reload().await {
            tracing::debug!(%err, "reading the freezes after a change failed");
        }
    }
}
