//! Tickets: a place in line that outlives the request (`keep_place_ms`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `frozen` of a ticket: a freeze holds the name; the ticket keeps its place.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TicketFrozen {
    /// When the window ends (RFC 3339).
    pub until: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_id: Option<String>,
}

/// What an expected wait (`eta_ms`) was worked out from: the median of the
/// name's last `holds` finished holds (at least 3, at most 20).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EtaBasis {
    pub holds: u32,
}

/// A ticket's place in line: the 202 of an acquisition with `keep_place_ms`
/// that ended before its grant, and of a wait on a ticket that did too
/// (`Location: /{kind}/{name}/tickets/{ticket}`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"ticket": "0b9e5a84-5e1f-4a57-9d6c-0c8f3d0d1b7e", "place": 3, "waiting": 5, "place_expires_at": "2026-05-04T09:00:00.000Z"}))]
pub struct TicketBody {
    /// The ticket: a capability like a lease id (and the id of the lease it
    /// is granted), shown only to whoever took it.
    #[schema(format = Uuid)]
    pub ticket: String,
    /// 1 for the next to be served.
    pub place: u64,
    /// Requests in line in all (tickets included).
    pub waiting: u64,
    /// Until when the place is kept (RFC 3339); every call on the ticket renews it.
    #[schema(format = DateTime)]
    pub place_expires_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen: Option<TicketFrozen>,
}

/// `GET /{kind}/{name}/tickets/{ticket}`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TicketStateBody {
    /// `waiting` in line; `granted`: its lease is held for it until `pickup_by`.
    #[schema(pattern = "^(waiting|granted)$")]
    pub state: String,
    /// 1 for the next to be served; 0 once granted.
    pub place: u64,
    pub waiting: u64,
    #[schema(format = DateTime)]
    pub place_expires_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen: Option<TicketFrozen>,
    /// The expected wait (ms), while waiting and the name has at least 3
    /// finished holds: the time left of the leases in the way plus, for
    /// each waiter ahead, the name's typical hold (a semaphore's shared by
    /// its limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_ms: Option<u64>,
    /// What `eta_ms` was worked out from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_basis: Option<EtaBasis>,
    /// Granted: collect the lease (`POST`) by then, or it ends `not-collected`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub pickup_by: Option<String>,
    /// Granted with a turn notice (`notify`): when the notice was delivered
    /// (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub notified_at: Option<String>,
    /// Granted with a turn notice not delivered yet: why its last try
    /// failed (e.g. "receiver answered 500"); it is tried again until
    /// `pickup_by`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify_error: Option<String>,
}

/// `POST /{kind}/{name}/tickets/{ticket}`: wait again in the same place
/// (every field optional; an empty body collects or answers at once).
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TicketWaitBody {
    /// How long to wait for the grant now (0 to the service's maximum; a
    /// larger one is cut to it); default 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
    /// Renews the place for this long (1 to `BATON_MAX_KEEP_PLACE_MS`);
    /// default: as long as the ticket was taken for.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub keep_place_ms: Option<u64>,
}
