//! What anyone sees of a lock or a semaphore: its status (`GET
//! /locks/{name}`, `GET /semaphores/{name}`), the holders and waiters in it,
//! and the pages of a listing (`GET /locks`, `GET /semaphores`).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::lenient::{one_permit, or_absent};
use crate::domain::Kind;

/// One lease of a lock, without its id.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LockHolderBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub fencing_token: u64,
    pub expires_in_ms: u64,
    /// Whether it is a shared (read) lease.
    #[serde(default)]
    #[schema(required = true)]
    pub shared: bool,
}

/// One held slot, without its lease id.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SlotBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub fencing_token: u64,
    pub expires_in_ms: u64,
    /// How many of the limit it counts as.
    #[serde(default = "one_permit")]
    #[schema(required = true)]
    pub permits: u64,
}

/// One queued request in a status, without its lease id.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WaiterBody {
    /// 1 for the next to be served.
    pub position: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// How long it has waited so far.
    pub waited_ms: u64,
    /// Its priority (1 to 9), when it is not 0: the line is in order of
    /// priority, then of joining.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// A lock's waiter that asked for a shared lease: `true` (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
    /// A semaphore's waiter: the permits it asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permits: Option<u64>,
    /// A ticket (a place kept by `keep_place_ms` while no request waits on
    /// it): `true` (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<bool>,
    /// A ticket's place is kept until then (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_until: Option<String>,
    /// Its expected wait (ms), while the name has at least 3 finished holds
    /// (see the ticket's `eta_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_basis: Option<super::ticket::EtaBasis>,
}

/// How a held lock is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// By one exclusive (write) lease.
    Exclusive,
    /// By shared (read) leases, any number of them.
    Shared,
}

impl Mode {
    /// How a lock with `holders` leases is held, `exclusive` or not: `None`
    /// while it is free.
    pub fn of(holders: u64, exclusive: bool) -> Option<Self> {
        match (holders, exclusive) {
            (0, _) => None,
            (_, true) => Some(Self::Exclusive),
            (_, false) => Some(Self::Shared),
        }
    }
}

/// A lock as anyone may see it; the lease id is never shown.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "name": "deploy-prod",
    "held": true,
    "mode": "exclusive",
    "owner": "https://ci.example.com/jobs/42",
    "fencing_token": 1_763_780_000_000_001_u64,
    "expires_in_ms": 41230,
    "holders": 1,
    "leases": [{"owner": "https://ci.example.com/jobs/42", "fencing_token": 1_763_780_000_000_001_u64, "expires_in_ms": 41230, "shared": false}],
    "waiting": 1,
    "waiters": [{"position": 1, "owner": "https://ci.example.com/jobs/43", "waited_ms": 5200}]
}))]
pub struct LockStatusBody {
    pub name: String,
    #[serde(default)]
    #[schema(required = true)]
    pub held: bool,
    /// While held: `exclusive` (one writer) or `shared` (readers).
    // A mode this version does not know reads as none.
    #[serde(
        skip_serializing_if = "Option::is_none",
        default,
        deserialize_with = "or_absent"
    )]
    pub mode: Option<Mode>,
    /// The exclusive holder's owner label (absent while held shared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The exclusive holder's fencing token (absent while held shared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fencing_token: Option<u64>,
    /// When the exclusive holder's lease expires (absent while held shared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_ms: Option<u64>,
    /// While held: how many leases, 1 exclusive or any number shared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holders: Option<u64>,
    /// While held: the leases (at most 100), in the order they were granted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leases: Option<Vec<LockHolderBody>>,
    /// How many requests are queued in the line.
    #[serde(default)]
    #[schema(required = true)]
    pub waiting: u64,
    /// The first of them (at most 100), in the order they will be served.
    #[serde(default)]
    #[schema(required = true)]
    pub waiters: Vec<WaiterBody>,
    /// While a freeze holds the name: which, until when, and why (nothing
    /// is granted meanwhile; the line keeps its order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen: Option<super::ticket::TicketFrozen>,
}

/// A semaphore as anyone may see it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "name": "migrations",
    "holders": 2,
    "used": 3,
    "limit": 4,
    "leases": [
        {"owner": "worker-7", "fencing_token": 1_763_780_000_000_017_u64, "expires_in_ms": 51200, "permits": 2},
        {"fencing_token": 1_763_780_000_000_020_u64, "expires_in_ms": 58800, "permits": 1}
    ],
    "waiting": 1,
    "waiters": [{"position": 1, "owner": "worker-9", "waited_ms": 1200, "permits": 2}]
}))]
pub struct SemaphoreStatusBody {
    pub name: String,
    /// How many leases are held now.
    #[serde(default)]
    #[schema(required = true)]
    pub holders: u64,
    /// How many permits they hold in all (absent while none is held).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used: Option<u64>,
    /// The limit of the latest acquisition, while the semaphore is in use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The held leases, in the order they were granted.
    #[serde(default)]
    #[schema(required = true)]
    pub leases: Vec<SlotBody>,
    /// How many requests are queued in the line.
    #[serde(default)]
    #[schema(required = true)]
    pub waiting: u64,
    /// The first of them (at most 100), in the order they will be served.
    #[serde(default)]
    #[schema(required = true)]
    pub waiters: Vec<WaiterBody>,
    /// While a freeze holds the name: which, until when, and why (nothing
    /// is granted meanwhile; the line keeps its order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen: Option<super::ticket::TicketFrozen>,
}

/// A lock or semaphore as anyone may see it.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum StatusBody {
    Lock(LockStatusBody),
    Semaphore(SemaphoreStatusBody),
}

impl StatusBody {
    /// The status of a `kind`, as the service's JSON `body` shows it.
    ///
    /// # Errors
    /// `body` is not such a status.
    pub fn from_json(kind: Kind, body: &Value) -> Result<Self, serde_json::Error> {
        Ok(match kind {
            Kind::Lock => Self::Lock(LockStatusBody::deserialize(body)?),
            Kind::Semaphore => Self::Semaphore(SemaphoreStatusBody::deserialize(body)?),
        })
    }

    pub fn kind(&self) -> Kind {
        match self {
            Self::Lock(_) => Kind::Lock,
            Self::Semaphore(_) => Kind::Semaphore,
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Self::Lock(status) => &status.name,
            Self::Semaphore(status) => &status.name,
        }
    }

    /// The freeze that holds the name now, if one does.
    pub fn frozen(&self) -> Option<&super::ticket::TicketFrozen> {
        match self {
            Self::Lock(status) => status.frozen.as_ref(),
            Self::Semaphore(status) => status.frozen.as_ref(),
        }
    }

    /// How many requests are queued in the line.
    pub fn waiting(&self) -> u64 {
        match self {
            Self::Lock(status) => status.waiting,
            Self::Semaphore(status) => status.waiting,
        }
    }

    /// The first of them, in the order they will be served.
    pub fn waiters(&self) -> &[WaiterBody] {
        match self {
            Self::Lock(status) => &status.waiters,
            Self::Semaphore(status) => &status.waiters,
        }
    }
}

/// A page of a listing: `{"locks": [...], "next_cursor"?}`, keyed by the
/// kind's plural. The service writes [`StatusBody`] entries; a client reads
/// them as JSON values, to print them as they were written or to read each
/// as the status of the page's kind ([`StatusBody::from_json`]).
#[derive(Debug)]
pub struct Listing<T = StatusBody> {
    pub kind: Kind,
    pub entries: Vec<T>,
    /// Pass as `?cursor=` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

const NEXT_CURSOR: &str = "next_cursor";

impl<T: Serialize> Serialize for Listing<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry(self.kind.plural(), &self.entries)?;
        if let Some(cursor) = &self.next_cursor {
            map.serialize_entry(NEXT_CURSOR, cursor)?;
        }
        map.end()
    }
}

impl Listing<Value> {
    /// A page of a `kind`'s listing, as the service's JSON `body` shows it;
    /// without entries (no such member), an empty page.
    ///
    /// # Errors
    /// A member of `body` is not what a page holds.
    pub fn from_json(kind: Kind, body: &Value) -> Result<Self, serde_json::Error> {
        let null = Value::Null;
        let member = |key: &str| body.get(key).unwrap_or(&null);
        Ok(Self {
            kind,
            entries: Option::<Vec<Value>>::deserialize(member(kind.plural()))?.unwrap_or_default(),
            next_cursor: Option::deserialize(member(NEXT_CURSOR))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_status_reads_back_as_the_service_wrote_it() {
        let written = json!({"name": "docs", "held": true, "mode": "shared", "holders": 2,
            "leases": [{"owner": "r1", "fencing_token": 3, "expires_in_ms": 9000, "shared": true},
                {"fencing_token": 4, "expires_in_ms": 20000, "shared": true}],
            "waiting": 1, "waiters": [{"position": 1, "owner": "w", "waited_ms": 1000}]});
        let status = StatusBody::from_json(Kind::Lock, &written).unwrap();
        assert_eq!(serde_json::to_value(&status).unwrap(), written);
        let written = json!({"name": "pool", "holders": 1, "used": 3, "limit": 5,
            "leases": [{"owner": "a", "fencing_token": 7, "expires_in_ms": 9000, "permits": 3}],
            "waiting": 0, "waiters": []});
        let status = StatusBody::from_json(Kind::Semaphore, &written).unwrap();
        assert_eq!(serde_json::to_value(&status).unwrap(), written);
    }

    #[test]
    fn an_older_or_newer_service_s_status_reads_too() {
        // Before lines, shared locks and permits; and with members (and a
        // mode) this version does not know.
        let old = json!({"name": "x", "held": true, "owner": "ci", "fencing_token": 1,
            "expires_in_ms": 5, "mode": "intent", "colour": "red"});
        let StatusBody::Lock(lock) = StatusBody::from_json(Kind::Lock, &old).unwrap() else {
            panic!("a lock's status");
        };
        assert_eq!((lock.mode, lock.waiting, lock.waiters.len()), (None, 0, 0));
        let old = json!({"name": "s", "holders": 1,
            "leases": [{"fencing_token": 2, "expires_in_ms": 5}]});
        let StatusBody::Semaphore(semaphore) =
            StatusBody::from_json(Kind::Semaphore, &old).unwrap()
        else {
            panic!("a semaphore's status");
        };
        assert_eq!(semaphore.leases[0].permits, 1);
        assert_eq!(semaphore.used, None);
        // What makes a status one is required.
        assert!(StatusBody::from_json(Kind::Lock, &json!({"held": true})).is_err());
    }

    #[test]
    fn a_listing_page_is_keyed_by_the_kind_s_plural() {
        let page = json!({"semaphores": [{"name": "s", "holders": 0, "leases": [],
            "waiting": 0, "waiters": []}], "next_cursor": "c1"});
        let read = Listing::from_json(Kind::Semaphore, &page).unwrap();
        assert_eq!(read.next_cursor.as_deref(), Some("c1"));
        assert_eq!(serde_json::to_value(&read).unwrap(), page);
        let entry = StatusBody::from_json(read.kind, &read.entries[0]).unwrap();
        assert_eq!(entry.name(), "s");
        let last = Listing::from_json(Kind::Lock, &json!({"locks": []})).unwrap();
        assert!(last.entries.is_empty() && last.next_cursor.is_none());
        assert_eq!(serde_json::to_string(&last).unwrap(), r#"{"locks":[]}"#);
    }
}
