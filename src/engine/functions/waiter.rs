//! A waiter as the line keeps it in Redis (`core/formats.lua` reads it with
//! `unpack_waiter()`): this is its one encoder. Its fields are fixed for the
//! whole wait, so the same request always names the same member of the line.

use crate::domain::{Demand, LeaseId, Owner, Priority, Reason, TokenName, Ttl};
use crate::engine::error::Error;

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
    /// Its place among the waiters: ahead of every lower priority.
    pub priority: Priority,
    pub owner: Option<&'a Owner>,
    /// The name of the token that made the request (history's `by`).
    pub by: Option<&'a TokenName>,
    /// The reason an administrator gave to be granted through a freeze.
    pub override_reason: Option<&'a Reason>,
}

impl LineEntry<'_> {
    /// `id|tag|instance|ttl_ms|limit|weight|newest|priority|owner`, then
    /// `by` and the override reason, each after a newline: the owner is the
    /// last `|`-field, so it may hold `|`, and none of the three text fields
    /// holds a newline (they are printable). A waiter with an override
    /// reason is granted through a freeze (`core/admission.lua`).
    pub(in crate::engine) fn encode(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}|{}|{}|{}|{}\n{}\n{}",
            self.id.expose(),
            self.tag,
            self.instance,
            self.ttl.as_ms(),
            self.demand.limit(),
            self.demand.weight(),
            u8::from(self.newest),
            self.priority,
            self.owner.map_or("", Owner::as_str),
            self.by.map_or("", TokenName::as_str),
            self.override_reason.map_or("", Reason::as_str),
        )
    }
}

/// A waiter read back from the line (a ticket's entry, `ticket.lua`): the
/// terms its request asked, which a wait on the ticket keeps. Its one
/// decoder, the inverse of [`LineEntry::encode`].
#[derive(Debug)]
pub(in crate::engine) struct StoredWaiter {
    pub id: LeaseId,
    pub ttl: Ttl,
    pub demand: Demand,
    pub newest: bool,
    pub priority: Priority,
    pub owner: Option<Owner>,
    pub by: Option<TokenName>,
    pub override_reason: Option<Reason>,
}

impl StoredWaiter {
    /// # Errors
    /// [`Error::Protocol`] when `raw` is not a waiter as [`LineEntry::encode`] writes it.
    pub(in crate::engine) fn parse(raw: &str) -> Result<Self, Error> {
        let bad = || Error::Protocol("a ticket's entry in line is malformed".into());
        let mut lines = raw.splitn(3, '\n');
        let head = lines.next().ok_or_else(bad)?;
        let by = lines.next().unwrap_or("");
        let override_reason = lines.next().unwrap_or("");
        let fields: Vec<&str> = head.splitn(9, '|').collect();
        let [id, _tag, _instance, ttl, limit, weight, newest, priority, owner] = fields[..] else {
            return Err(bad());
        };
        let number = |raw: &str| raw.parse::<u64>().map_err(|_| bad());
        Ok(Self {
            id: LeaseId::parse(id).map_err(|_| bad())?,
            ttl: Ttl::from_ms(number(ttl)?).map_err(|_| bad())?,
            demand: Demand::from_stored(number(weight)?, number(limit)?).map_err(|_| bad())?,
            newest: newest == "1",
            priority: Priority::new(number(priority)?).map_err(|_| bad())?,
            owner: Owner::from_stored(owner.to_owned()),
            by: (!by.is_empty())
                .then(|| TokenName::parse(by))
                .transpose()
                .map_err(|_| bad())?,
            override_reason: Reason::from_stored(override_reason.to_owned()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Limit, Permits};

    fn entry<'a>(
        id: LeaseId,
        owner: Option<&'a Owner>,
        by: Option<&'a TokenName>,
    ) -> LineEntry<'a> {
        LineEntry {
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
            priority: Priority::new(7).expect("priority"),
            owner,
            by,
            override_reason: None,
        }
    }

    #[test]
    fn the_owner_is_the_last_numbered_field_so_it_may_hold_the_separator() {
        let id = LeaseId::new();
        let owner = Owner::from_stored("ci|job 7".to_owned()).expect("owner");
        let by = TokenName::parse("team|a").expect("token name");
        assert_eq!(
            entry(id, Some(&owner), Some(&by)).encode(),
            format!(
                "{}|42|0123456789abcdef|30000|3|2|1|7|ci|job 7\nteam|a\n",
                id.expose()
            )
        );
    }

    #[test]
    fn an_override_is_the_last_text_field() {
        let id = LeaseId::new();
        let reason = Reason::parse(Some("hotfix | incident 7".into()))
            .expect("reason")
            .expect("given");
        let mut waiter = entry(id, None, None);
        waiter.override_reason = Some(&reason);
        assert_eq!(
            waiter.encode(),
            format!(
                "{}|42|0123456789abcdef|30000|3|2|1|7|\n\nhotfix | incident 7",
                id.expose()
            )
        );
    }

    #[test]
    fn a_stored_waiter_reads_back_what_was_encoded() {
        let id = LeaseId::new();
        let owner = Owner::from_stored("ci|job 7".to_owned()).expect("owner");
        let by = TokenName::parse("team-a").expect("token name");
        let stored =
            StoredWaiter::parse(&entry(id, Some(&owner), Some(&by)).encode()).expect("parsed");
        assert_eq!(stored.id, id);
        assert_eq!(stored.ttl.as_ms(), 30_000);
        assert_eq!((stored.demand.weight(), stored.demand.limit()), (2, 3));
        assert!(stored.newest);
        assert_eq!(stored.priority.get(), 7);
        assert_eq!(stored.owner.as_ref().map(Owner::as_str), Some("ci|job 7"));
        assert_eq!(stored.by.as_ref().map(TokenName::as_str), Some("team-a"));
        assert!(stored.override_reason.is_none());
        assert!(StoredWaiter::parse("nonsense").is_err());
    }

    #[test]
    fn a_request_without_owner_or_token_has_empty_text_fields() {
        let id = LeaseId::new();
        assert_eq!(
            entry(id, None, None).encode(),
            format!("{}|42|0123456789abcdef|30000|3|2|1|7|\n\n", id.expose())
        );
    }
}
