//! Progress of a waiting acquisition: the query of its place in line.

use std::time::Duration;

use super::reply::Reply;
use super::{scripts, Engine, Error, Holder, Kind};
use crate::domain::{LeaseId, Name, Owner};

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
    /// The place in `name`'s line of the waiter `id`; `None` when it is not
    /// in line (granted meanwhile, or gone).
    ///
    /// # Errors
    /// [`Error::Unavailable`] when Redis does not answer.
    pub async fn place(
        &self,
        kind: Kind,
        name: &Name,
        id: LeaseId,
    ) -> Result<Option<Place>, Error> {
        let keys = self.keys();
        let mut call = scripts::PLACE.prepare_invoke();
        for key in keys.line(kind, name) {
            call.key(key);
        }
        call.arg(kind.as_str())
            .arg(name.as_str())
            .arg(keys.name_channel(kind, name))
            .arg(self.store().shard_publish_command())
            .arg(keys.events_channel())
            .arg(id.expose());
        let reply = Reply::new(self.store().eval(&call).await?)?;
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
