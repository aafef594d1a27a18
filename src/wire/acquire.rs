//! What an acquisition sends: `POST /locks/{name}` and `POST
//! /semaphores/{name}`. The service refuses a member it does not know; a
//! member left out takes its default.

use super::field;

/// The fields every acquisition takes, whatever its kind.
#[derive(Debug, Default)]
pub struct AcquireFields {
    pub ttl_ms: Option<u64>,
    pub wait_ms: Option<u64>,
    pub owner: Option<String>,
    pub newest_wins: Option<bool>,
    /// `override`: an administrator's reason to be granted through a freeze.
    pub override_reason: Option<String>,
    pub priority: Option<u64>,
    pub ask_yield: Option<bool>,
    pub keep_place_ms: Option<u64>,
    pub notify: Option<String>,
}

/// Declares an acquire-request body: the fields given, then the ones every
/// acquisition takes ([`AcquireFields`], which it is made of and turns
/// into).
macro_rules! acquire_body {
    ($(#[$meta:meta])* pub struct $body:ident { $($fields:tt)* }) => {
        #[derive(Debug, Default, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
        #[serde(deny_unknown_fields)]
        $(#[$meta])*
        pub struct $body {
            $($fields)*
            #[serde(skip_serializing_if = "Option::is_none")]
            #[schema(schema_with = field::ttl_ms)]
            pub ttl_ms: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            #[schema(schema_with = field::wait_ms)]
            pub wait_ms: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            #[schema(schema_with = field::owner)]
            pub owner: Option<String>,
            /// When `true` and the request waits in line, every queued request on
            /// this name that also asked `newest_wins` leaves the line (409
            /// `superseded`): for deploy queues where only the latest version matters.
            #[serde(skip_serializing_if = "Option::is_none")]
            #[schema(default = false)]
            pub newest_wins: Option<bool>,
            /// With an admin token: granted through a freeze that holds the
            /// name (in line order, as usual), for the reason given, which
            /// the audit line carries. Without one: 403.
            #[serde(rename = "override", skip_serializing_if = "Option::is_none")]
            #[schema(schema_with = field::override_reason)]
            pub override_reason: Option<String>,
            // Its place in line (`field::priority` says it).
            #[serde(skip_serializing_if = "Option::is_none")]
            #[schema(schema_with = field::priority)]
            pub priority: Option<u64>,
            /// When `true` and the request joins the line, the holders are asked
            /// once to finish early (a `yield-requested` event on their streams
            /// and on `/events`); nothing is taken from them.
            #[serde(skip_serializing_if = "Option::is_none")]
            #[schema(default = false)]
            pub ask_yield: Option<bool>,
            /// When the request ends before its grant (its wait runs out,
            /// the service's maximum wait cuts it, the client hangs up, or it
            /// did not wait and the name was busy or frozen), its place in
            /// line is kept as a ticket for this long (ms, 1 to the service's
            /// `BATON_MAX_KEEP_PLACE_MS`): answered 202 with the ticket. With
            /// it, a `wait_ms` over the service's maximum is cut to it.
            #[serde(skip_serializing_if = "Option::is_none")]
            #[schema(minimum = 1)]
            pub keep_place_ms: Option<u64>,
            /// With `keep_place_ms`: when the ticket's turn comes while
            /// nobody waits on it, one instance POSTs a turn notice
            /// (`{"event": "granted", "kind", "name", "ticket",
            /// "fencing_token", "pickup_by"}`, signed in `Baton-Signature`)
            /// to this http or https URL, whose host must be one of the
            /// service's `BATON_WEBHOOK_HOSTS`; retried until `pickup_by`.
            #[serde(skip_serializing_if = "Option::is_none")]
            #[schema(format = "uri", max_length = 2000)]
            pub notify: Option<String>,
        }

        impl From<AcquireFields> for $body {
            /// The fields every acquisition takes, and none of the kind's own.
            fn from(fields: AcquireFields) -> Self {
                Self {
                    ttl_ms: fields.ttl_ms,
                    wait_ms: fields.wait_ms,
                    owner: fields.owner,
                    newest_wins: fields.newest_wins,
                    override_reason: fields.override_reason,
                    priority: fields.priority,
                    ask_yield: fields.ask_yield,
                    keep_place_ms: fields.keep_place_ms,
                    notify: fields.notify,
                    ..Self::default()
                }
            }
        }

        impl From<$body> for AcquireFields {
            fn from(body: $body) -> Self {
                Self {
                    ttl_ms: body.ttl_ms,
                    wait_ms: body.wait_ms,
                    owner: body.owner,
                    newest_wins: body.newest_wins,
                    override_reason: body.override_reason,
                    priority: body.priority,
                    ask_yield: body.ask_yield,
                    keep_place_ms: body.keep_place_ms,
                    notify: body.notify,
                }
            }
        }
    };
}

acquire_body! {
    /// Body of `POST /locks/{name}`; every field is optional and an empty body
    /// means all defaults.
    #[schema(example = json!({"ttl_ms": 60000, "wait_ms": 10000, "owner": "https://ci.example.com/jobs/42"}))]
    pub struct AcquireLock {
        /// `true` asks for a shared (read) lease: any number of shared leases
        /// are held at once, never beside an exclusive one, and a shared
        /// request behind a queued exclusive one waits for it. Default
        /// `false`: an exclusive (write) lease, held alone.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schema(default = false)]
        pub shared: Option<bool>,
    }
}

acquire_body! {
    /// Body of `POST /semaphores/{name}`.
    #[schema(example = json!({"limit": 4, "permits": 1, "ttl_ms": 60000, "wait_ms": 10000, "owner": "worker-7"}))]
    pub struct AcquireSemaphore {
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schema(schema_with = field::limit, required = true)]
        pub limit: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schema(schema_with = field::permits)]
        pub permits: Option<u64>,
    }
}
