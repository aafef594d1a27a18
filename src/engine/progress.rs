//! Progress of a waiting acquisition: the query of its place in line.

use std::time::Duration;

use super::reply::Reply;
use super::{scripts, Engine, Error, Holder, Kind};
use crate::domain::{Name, Owner};

/// Where a waiter stands.
#[derive(Debug, Clone)]
pub struct Place {
    /// 1 for the next to be served.
    pub position: u64,
    /// Requests in line in all.
    pub waiting: u64,
    /// The live leases it waits behind (at most 100), those that expire first.
    pub holders: Vec<Holder>,
}

impl Engine {
    /// The place in `name`'s line of `waiter` (as [`super::Queued::waiter`]
    /// names it); `None` when it is not in line (granted meanwhile, or gone).
    ///
    /// # Errors
    /// [`Error::Unavailable`] when Redis does not answer.
    pub async fn place(
        &self,
        kind: Kind,
        name: &Name,
        waiter: &str,
    ) -> Result<Option<Place>, Error> {
        let mut call = scripts::invocation(
            scripts::Op::Place,
            self.keys(),
            kind,
            name,
            self.store().shard_publish_command(),
            self.line().instance(),
        );
        call.arg(waiter);
        let reply = Reply::new(self.store().fcall(&call).await?)?;
        let position = reply.uint(0)?;
        if position == 0 {
            return Ok(None);
        }
        let n = reply.uint(2)? as usize;
        let holders = (0..n)
            .map(|i| {
                let at = 3 + 3 * i;
                Ok(Holder {
                    fencing_token: reply.uint(at)?,
                    expires_in: Duration::from_millis(reply.int(at + 1)?.max(0) as u64),
                    owner: Owner::from_stored(reply.text(at + 2)?),
                })
            })
            .collect::<Result<_, Error>>()?;
        Ok(Some(Place {
            position,
            waiting: reply.uint(1)?,
            holders,
        }))
    }
}
