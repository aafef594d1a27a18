//! What `GET /healthz` and `GET /readyz` answer.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

// Whether the service runs, and whether it is ready (no doc comment: the
// schema has no description).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"status": "ok"}))]
pub struct Health {
    /// `ok` (the process runs) or `ready` (Redis answers).
    pub status: String,
    /// `/readyz`: set when Redis's `maxmemory-policy` could evict baton's keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}
