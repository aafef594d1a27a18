//! The record of a claim in Redis: which lease of which name it holds, so
//! that any instance can refresh, release or show it. One string key per
//! claim ([`Keys::claim`](crate::engine::Keys::claim)) with a TTL that
//! follows its leases; one line per lease: `kind\tlease id\tname` (names
//! hold no control characters, so neither tab nor newline can be part of one).

use std::time::Duration;

use crate::domain::{ClaimId, Kind, LeaseId, Name};
use crate::engine::error::Error;
use crate::engine::handle::Engine;

/// How much longer than its longest lease a record lives: a claim's leases
/// are refreshed through it, so it must not lapse first.
const OUTLIVES_LEASES: Duration = Duration::from_secs(60);

/// One lease of a claim, as the record keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub kind: Kind,
    pub name: Name,
    pub id: LeaseId,
}

/// Which leases a claim holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Record(pub Vec<Entry>);

impl Record {
    fn encode(&self) -> String {
        self.0
            .iter()
            .map(|e| format!("{}\t{}\t{}", e.kind, e.id.expose(), e.name))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn decode(raw: &str) -> Result<Self, Error> {
        let bad = || Error::Protocol("a claim's record is malformed".into());
        raw.split('\n')
            .map(|line| {
                let mut fields = line.splitn(3, '\t');
                let kind = match fields.next() {
                    Some("lock") => Kind::Lock,
                    Some("semaphore") => Kind::Semaphore,
                    _ => return Err(bad()),
                };
                let id = LeaseId::parse(fields.next().ok_or_else(bad)?).map_err(|_| bad())?;
                let name = Name::parse(fields.next().ok_or_else(bad)?).map_err(|_| bad())?;
                Ok(Entry { kind, name, id })
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

impl Engine {
    /// Writes (or rewrites) the record of claim `id`, to live a while longer
    /// than `longest`, the longest ttl of its leases.
    pub(super) async fn save_claim(
        &self,
        id: &ClaimId,
        record: &Record,
        longest: Duration,
    ) -> Result<(), Error> {
        let mut cmd = redis::cmd("SET");
        let ttl = (longest + OUTLIVES_LEASES).as_millis() as u64;
        cmd.arg(self.keys().claim(id))
            .arg(record.encode())
            .arg("PX")
            .arg(ttl);
        self.store().query::<()>(&cmd).await
    }

    /// The record of claim `id`, if it still has one.
    pub(super) async fn load_claim(&self, id: &ClaimId) -> Result<Option<Record>, Error> {
        let mut cmd = redis::cmd("GET");
        cmd.arg(self.keys().claim(id));
        let raw: Option<String> = self.store().query(&cmd).await?;
        raw.as_deref().map(Record::decode).transpose()
    }

    /// Forgets the record of claim `id`.
    pub(super) async fn drop_claim(&self, id: &ClaimId) -> Result<(), Error> {
        let mut cmd = redis::cmd("DEL");
        cmd.arg(self.keys().claim(id));
        self.store().query::<()>(&cmd).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_written() {
        let record = Record(vec![
            Entry {
                kind: Kind::Lock,
                name: Name::parse("deploy prod: a\\b").unwrap(),
                id: LeaseId::new(),
            },
            Entry {
                kind: Kind::Semaphore,
                name: Name::parse("pool").unwrap(),
                id: LeaseId::new(),
            },
        ]);
        assert_eq!(Record::decode(&record.encode()).unwrap(), record);
        assert!(Record::decode("lock\tnot-an-id\tx").is_err());
        assert!(Record::decode("queue\tx").is_err());
    }
}
