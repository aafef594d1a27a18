//! What the holder of a lease is told (`POST`, `PATCH` and `GET` of
//! `/locks/{name}/{id}`, `/semaphores/{name}/{id}`), and what it sends to
//! refresh it.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::field;
use super::lenient::one_permit;
use crate::domain::Kind;

/// A lock lease, as its holder sees it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "name": "deploy-prod",
    "id": "5f0c6f5e-8d8e-4b7a-9c55-2f1f0e7d9a31",
    "owner": "https://ci.example.com/jobs/42",
    "fencing_token": 1_763_780_000_000_001_u64,
    "ttl_ms": 60000,
    "expires_at": "2026-11-22T03:14:15.926Z",
    "shared": false
}))]
pub struct LockLeaseBody {
    pub name: String,
    /// The lease id: the capability to refresh and release. Keep it secret.
    #[schema(format = Uuid)]
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Strictly increases with every acquisition of this lock; pass it to what
    /// the lock protects so it can refuse writes from a stale holder.
    pub fencing_token: u64,
    pub ttl_ms: u64,
    /// When the lease expires unless refreshed (RFC 3339, Redis's clock).
    #[schema(format = DateTime)]
    pub expires_at: String,
    /// Whether it is a shared (read) lease.
    #[serde(default)]
    #[schema(required = true)]
    pub shared: bool,
}

/// A semaphore lease, as its holder sees it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "name": "migrations",
    "id": "0b7f7c0e-2a51-4c0e-8f5e-9d3c1a2b4c6d",
    "owner": "worker-7",
    "limit": 4,
    "permits": 1,
    "fencing_token": 1_763_780_000_000_017_u64,
    "ttl_ms": 60000,
    "expires_at": "2026-11-22T03:14:15.926Z"
}))]
pub struct SemaphoreLeaseBody {
    pub name: String,
    /// The lease id: the capability to refresh and release. Keep it secret.
    #[schema(format = Uuid)]
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The limit this acquisition was judged against.
    pub limit: u32,
    /// How many of the limit this lease counts as.
    #[serde(default = "one_permit")]
    #[schema(required = true)]
    pub permits: u64,
    /// Strictly increases per semaphore name, in the order slots were granted.
    pub fencing_token: u64,
    pub ttl_ms: u64,
    /// When the lease expires unless refreshed (RFC 3339, Redis's clock).
    #[schema(format = DateTime)]
    pub expires_at: String,
}

/// A lease as its holder sees it: a lock's or a semaphore's.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum LeaseBody {
    Lock(LockLeaseBody),
    Semaphore(SemaphoreLeaseBody),
}

impl LeaseBody {
    /// A lease of a `kind`, as the service's JSON `body` shows it.
    ///
    /// # Errors
    /// `body` is not such a lease.
    pub fn from_json(kind: Kind, body: &Value) -> Result<Self, serde_json::Error> {
        Ok(match kind {
            Kind::Lock => Self::Lock(LockLeaseBody::deserialize(body)?),
            Kind::Semaphore => Self::Semaphore(SemaphoreLeaseBody::deserialize(body)?),
        })
    }

    /// Its kind: a lock's lease or a semaphore's.
    pub fn kind(&self) -> Kind {
        match self {
            Self::Lock(_) => Kind::Lock,
            Self::Semaphore(_) => Kind::Semaphore,
        }
    }

    /// The name it is a lease of.
    pub fn name(&self) -> &str {
        match self {
            Self::Lock(lease) => &lease.name,
            Self::Semaphore(lease) => &lease.name,
        }
    }

    /// The lease id (a secret).
    pub fn id(&self) -> &str {
        match self {
            Self::Lock(lease) => &lease.id,
            Self::Semaphore(lease) => &lease.id,
        }
    }

    pub fn fencing_token(&self) -> u64 {
        match self {
            Self::Lock(lease) => lease.fencing_token,
            Self::Semaphore(lease) => lease.fencing_token,
        }
    }

    /// When it expires unless refreshed (RFC 3339).
    pub fn expires_at(&self) -> &str {
        match self {
            Self::Lock(lease) => &lease.expires_at,
            Self::Semaphore(lease) => &lease.expires_at,
        }
    }
}

/// Body of `PATCH /locks/{name}/{id}` and `PATCH /semaphores/{name}/{id}`.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"ttl_ms": 60000}))]
pub struct Refresh {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = field::refresh_ttl_ms)]
    pub ttl_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_lease_reads_back_as_the_service_wrote_it() {
        let written = json!({"name": "pool", "id": "0b7f7c0e-2a51-4c0e-8f5e-9d3c1a2b4c6d",
            "limit": 4, "permits": 2, "fencing_token": 17, "ttl_ms": 60000,
            "expires_at": "2026-11-22T03:14:15.926Z"});
        let lease = LeaseBody::from_json(Kind::Semaphore, &written).unwrap();
        assert_eq!(serde_json::to_value(&lease).unwrap(), written);
        assert_eq!(
            (lease.fencing_token(), lease.expires_at()),
            (17, "2026-11-22T03:14:15.926Z")
        );
    }

    #[test]
    fn a_lease_of_an_older_service_reads_as_what_it_was() {
        let old = json!({"name": "x", "id": "i", "fencing_token": 1, "ttl_ms": 5,
            "expires_at": "t", "limit": 3});
        let LeaseBody::Lock(lock) = LeaseBody::from_json(Kind::Lock, &old).unwrap() else {
            panic!("a lock's lease");
        };
        assert!(!lock.shared, "exclusive, as every lock lease was");
        let LeaseBody::Semaphore(slot) = LeaseBody::from_json(Kind::Semaphore, &old).unwrap()
        else {
            panic!("a semaphore's lease");
        };
        assert_eq!(slot.permits, 1);
        assert!(LeaseBody::from_json(Kind::Lock, &json!({"id": "i"})).is_err());
    }
}
