//! A claim on the wire (`/claims`): what a claim asks for, what its holder
//! is told (the claim id, every lease, the earliest expiry), and where a
//! waiting claim stands in its progress events.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::openapi::schema::{ArrayBuilder, OneOfBuilder};
use utoipa::openapi::{Array, Ref};
use utoipa::ToSchema;

use super::field;
use super::lease::{LeaseBody, LockLeaseBody, SemaphoreLeaseBody};

/// A lock a claim takes.
#[derive(Debug, Default, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimLock {
    /// The lock's name (as in `/locks/{name}`, not percent-encoded).
    pub name: String,
    /// `true`: a shared (read) lease; default `false`: exclusive.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(default = false)]
    pub shared: Option<bool>,
}

/// A semaphore a claim takes a lease of.
#[derive(Debug, Default, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimSemaphore {
    /// The semaphore's name.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = field::limit, required = true)]
    pub limit: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = field::permits)]
    pub permits: Option<u64>,
}

/// Body of `POST /claims`: 1 to 16 names in all, each at most once.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "locks": [{"name": "deploy-prod"}, {"name": "db-migrations"}],
    "semaphores": [{"name": "build-farm", "limit": 4}],
    "ttl_ms": 60000, "wait_ms": 30000, "owner": "https://ci.example.com/jobs/42"
}))]
pub struct ClaimRequest {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locks: Vec<ClaimLock>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub semaphores: Vec<ClaimSemaphore>,
    /// The lifetime of every lease of the claim.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = field::ttl_ms)]
    pub ttl_ms: Option<u64>,
    /// How long the whole claim may wait for all its names.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = field::wait_ms)]
    pub wait_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = field::owner)]
    pub owner: Option<String>,
    /// Its place in each name's line (`field::priority` says it).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = field::priority)]
    pub priority: Option<u64>,
    /// With an admin token on every name: each name is granted through a
    /// freeze that holds it (in line order, as usual), for the reason given,
    /// which the audit lines and history entries carry. Without one: 403.
    #[serde(rename = "override", skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = field::override_reason)]
    pub override_reason: Option<String>,
}

/// A claim as its holder sees it: its id (a capability, like a lease id),
/// every lease of it (each an ordinary lease of its name, with its own
/// fencing token), and the earliest expiry among them.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "7d1e3c52-5b0a-4f0e-9d7b-2c3a4b5c6d7e",
    "leases": [
        {"name": "db-migrations", "id": "5f0c6f5e-8d8e-4b7a-9c55-2f1f0e7d9a31", "fencing_token": 1_763_780_000_000_001_u64, "ttl_ms": 60000, "expires_at": "2026-11-22T03:14:15.926Z", "shared": false},
        {"name": "build-farm", "id": "0b7f7c0e-2a51-4c0e-8f5e-9d3c1a2b4c6d", "limit": 4, "permits": 1, "fencing_token": 1_763_780_000_000_017_u64, "ttl_ms": 60000, "expires_at": "2026-11-22T03:14:15.950Z"}
    ],
    "expires_at": "2026-11-22T03:14:15.926Z"
}))]
pub struct ClaimBody {
    /// The claim id: the capability to refresh and release it. Keep it secret.
    #[schema(format = Uuid)]
    pub id: String,
    /// Its leases, locks first, then semaphores, each by name.
    #[schema(schema_with = leases_schema)]
    pub leases: Vec<LeaseBody>,
    /// The earliest expiry of its leases (RFC 3339, Redis's clock).
    #[schema(format = DateTime)]
    pub expires_at: String,
}

fn leases_schema() -> Array {
    let lease = OneOfBuilder::new()
        .item(Ref::from_schema_name(LockLeaseBody::name()))
        .item(Ref::from_schema_name(SemaphoreLeaseBody::name()));
    ArrayBuilder::new().items(lease).build()
}

impl ClaimBody {
    /// A claim as the service's JSON `body` shows it: a lease with a
    /// `limit` is a semaphore's, one without a lock's.
    ///
    /// # Errors
    /// `body` is not such a claim.
    pub fn from_json(body: &Value) -> Result<Self, serde_json::Error> {
        #[derive(Deserialize)]
        struct Raw {
            id: String,
            #[serde(default)]
            leases: Vec<Value>,
            expires_at: String,
        }
        let raw = Raw::deserialize(body)?;
        let leases = raw
            .leases
            .iter()
            .map(|lease| {
                let kind = if lease.get("limit").is_some() {
                    crate::domain::Kind::Semaphore
                } else {
                    crate::domain::Kind::Lock
                };
                LeaseBody::from_json(kind, lease)
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            id: raw.id,
            leases,
            expires_at: raw.expires_at,
        })
    }
}

/// A name of a claim, as its progress events show it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClaimName {
    pub kind: crate::domain::Kind,
    pub name: String,
}

/// `queued` data of a waiting claim: the names it holds already, the one it
/// waits for, and its place in that name's line.
#[derive(Debug, Serialize, Deserialize)]
pub struct ClaimQueued {
    #[serde(default)]
    pub held: Vec<ClaimName>,
    pub waiting_for: ClaimName,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<u64>,
}

/// `frozen` data of a waiting claim: a freeze holds `waiting_for`, one of
/// its names, so the claim holds none of them and is in no line; it takes
/// them once the window ends (`until`, RFC 3339).
#[derive(Debug, Serialize, Deserialize)]
pub struct ClaimFrozen {
    #[serde(default)]
    pub held: Vec<ClaimName>,
    pub waiting_for: ClaimName,
    pub until: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_claim_reads_back_as_the_service_wrote_it() {
        let written = json!({"id": "c", "expires_at": "t", "leases": [
            {"name": "a", "id": "i", "fencing_token": 1, "ttl_ms": 5, "expires_at": "t", "shared": true},
            {"name": "p", "id": "j", "limit": 4, "permits": 2, "fencing_token": 2, "ttl_ms": 5, "expires_at": "u"}
        ]});
        let claim = ClaimBody::from_json(&written).unwrap();
        assert_eq!(serde_json::to_value(&claim).unwrap(), written);
        assert!(matches!(claim.leases[1], LeaseBody::Semaphore(_)));
    }

    #[test]
    fn a_claim_request_refuses_unknown_members() {
        let body = json!({"locks": [{"name": "a", "mode": "x"}]});
        assert!(serde_json::from_value::<ClaimRequest>(body).is_err());
    }
}
