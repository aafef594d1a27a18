//! A waiter as the line keeps it in Redis (`core/state.lua` reads it with
//! `unpack_waiter()`): this is its one encoder. Its fields are fixed for the
//! whole wait, so the same request always names the same member of the line.

use crate::domain::{Demand, LeaseId, Owner, Ttl};

/// One acquisition's place in line, as Redis keeps it.
#[derive(Debug, Clone, Copy)]
pub(in crate::engine) struct LineEntry<'a> {
    /// The lease it acquires under (a capability: never logged).
    pub id: LeaseId,
    /// A number naming it among its instance's waiters, in messages.
    pub tag: u64,
    /// The instance that keeps it alive.
    pub instance: &'a str,
    pub ttl: Ttl,
    pub demand: Demand,
    /// It asked `newest_wins`.
    pub newest: bool,
    pub owner: Option<&'a Owner>,
}

impl LineEntry<'_> {
    /// `id|tag|instance|ttl_ms|limit|weight|newest|owner`; the owner comes last, so
    /// it may hold `|`.
    pub(in crate::engine) fn encode(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}|{}|{}|{}",
            self.id.expose(),
            self.tag,
            self.instance,
            self.ttl.as_ms(),
            self.demand.limit(),
            self.demand.weight(),
            u8::from(self.newest),
            self.owner.map_or("", Owner::as_str),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Limit, Permits};

    #[test]
    fn the_owner_comes_last_so_it_may_hold_the_separator() {
        let id = LeaseId::new();
        let owner = Owner::from_stored("ci|job 7".to_owned()).expect("owner");
        let entry = LineEntry {
            id,
            tag: 42,
            instance: "0123456789abcdef",
            ttl: Ttl::from_ms(30_000).expect("ttl"),
            demand: Demand::semaphore(
                Permits::new(2).expect("permits"),
                Limit::new(3).expect("limit"),
            )
            .expect("demand"),
            newest: true,
            owner: Some(&owner),
        };
        assert_eq!(
            entry.encode(),
            format!("{}|42|0123456789abcdef|30000|3|2|1|ci|job 7", id.expose())
        );
    }
}
