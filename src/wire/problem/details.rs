//! What one occurrence of a problem says: the constructors of the
//! [`Problem`]s whose `detail` and extension members tell that occurrence.
//! Each such sentence is written here once (a type that says the same each
//! time has its sentence in the table, `facts.rs`; a refusal of `access`
//! says its own); the routes' errors and the OpenAPI examples (`openapi.rs`)
//! are both made by these constructors.

use super::body::Problem;
use super::kind::ProblemType;
use crate::domain::{Invalid, Kind};
use crate::wire::status::Mode;
use crate::wire::time::rfc3339_ms_signed;

/// A lock that stayed held for a whole wait (`lock-held`).
#[derive(Debug, Clone)]
pub struct LockHeld {
    pub name: String,
    /// The holder's owner label, if it gave one.
    pub owner: Option<String>,
    /// When the last lease in the request's way expires unless refreshed.
    pub expires_in_ms: u64,
    /// How it is held (none: only waiters ahead are in the way).
    pub mode: Option<Mode>,
    /// Leases held.
    pub holders: u64,
    /// Requests queued in the line.
    pub waiting: u64,
}

/// A semaphore that stayed full for a whole wait (`semaphore-full`).
#[derive(Debug, Clone)]
pub struct SemaphoreFull {
    pub name: String,
    /// Leases held.
    pub holders: u64,
    /// Permits they hold.
    pub used: u64,
    /// The limit the acquisition was judged against.
    pub limit: u32,
    /// Requests queued in the line.
    pub waiting: u64,
}

impl Problem {
    /// `invalid-request` whose `detail` is `detail` (it names the field).
    pub fn invalid(detail: String) -> Self {
        Self::new(ProblemType::InvalidRequest, detail)
    }

    /// `invalid-request` naming `field` and what is wrong with it.
    pub fn invalid_field(field: &str, err: &Invalid) -> Self {
        Self::invalid(format!("{field}: {}", err.0))
    }

    /// `invalid-request` for a `wait_ms` over the server's maximum, which it
    /// names in `max_wait_ms`; `why` is the domain's refusal of it.
    pub fn wait_too_long(why: &Invalid, max_wait_ms: u64) -> Self {
        Self {
            max_wait_ms: Some(max_wait_ms),
            ..Self::invalid_field("wait_ms", why)
        }
    }

    /// `forbidden`: `detail` says what the token may not do; `scope` is the
    /// scope it needed, where one would do.
    pub fn forbidden(detail: String, scope: Option<&str>) -> Self {
        Self {
            scope: scope.map(str::to_owned),
            ..Self::new(ProblemType::Forbidden, detail)
        }
    }

    /// `lock-held`.
    pub fn lock_held(held: LockHeld) -> Self {
        let LockHeld {
            name,
            owner,
            expires_in_ms: ms,
            mode,
            holders,
            waiting,
        } = held;
        let detail = match mode {
            Some(Mode::Shared) if holders == 1 => {
                format!("lock '{name}' is held shared by 1 reader; it expires in {ms} ms unless refreshed")
            }
            Some(Mode::Shared) => format!(
                "lock '{name}' is held shared by {holders} readers; the last of them \
                 expires in {ms} ms unless refreshed"
            ),
            _ => format!(
                "lock '{name}' is held by someone else; it expires in {ms} ms unless refreshed"
            ),
        };
        Self {
            owner,
            expires_in_ms: Some(ms),
            mode,
            holders: Some(holders),
            waiting: Some(waiting),
            ..Self::new(ProblemType::LockHeld, detail)
        }
    }

    /// `semaphore-full`.
    pub fn semaphore_full(full: SemaphoreFull) -> Self {
        let SemaphoreFull {
            name,
            holders,
            used,
            limit,
            waiting,
        } = full;
        let leases = if holders == 1 { "lease" } else { "leases" };
        let detail = format!(
            "semaphore '{name}' is full: {used} of {limit} permits held by {holders} {leases}"
        );
        Self {
            holders: Some(holders),
            used: Some(used),
            limit: Some(limit),
            waiting: Some(waiting),
            ..Self::new(ProblemType::SemaphoreFull, detail)
        }
    }

    /// `superseded`: a newer `newest_wins` request for `name` (by `owner`)
    /// took this one's place.
    pub fn superseded(name: &str, owner: Option<String>) -> Self {
        let detail =
            format!("a newer request for '{name}' asked for newest_wins; this one left the line");
        Self {
            owner,
            ..Self::new(ProblemType::Superseded, detail)
        }
    }

    /// `frozen`: a freeze holds `name` until `until_ms` (ms since the Unix epoch).
    pub fn frozen(
        name: &str,
        reason: Option<String>,
        freeze_id: Option<String>,
        until_ms: i64,
    ) -> Self {
        let until = rfc3339_ms_signed(until_ms);
        let detail = match &reason {
            Some(reason) => format!("'{name}' is frozen until {until}: {reason}"),
            None => format!("'{name}' is frozen until {until}"),
        };
        Self {
            reason,
            freeze_id,
            until: Some(until),
            ..Self::new(ProblemType::Frozen, detail)
        }
    }

    /// `claim-refused`: `why` the first of `names` was in its way.
    pub fn claim_refused(why: &str, names: Vec<String>) -> Self {
        Self {
            names: Some(names),
            ..Self::new(
                ProblemType::ClaimRefused,
                format!("{why}; the claim holds none of its names"),
            )
        }
    }

    /// `claim-not-found` after a refresh that found the leases of `lost`
    /// gone (and released the rest).
    pub fn claim_broken(lost: &[(Kind, String)]) -> Self {
        let gone: Vec<_> = lost
            .iter()
            .map(|(kind, name)| format!("{kind} '{name}'"))
            .collect();
        let detail = format!(
            "the claim is no longer whole: the lease of {} was gone (expired or \
             force-released), so the rest were released",
            gone.join(", ")
        );
        Self {
            names: Some(lost.iter().map(|(_, name)| name.clone()).collect()),
            ..Self::new(ProblemType::ClaimNotFound, detail)
        }
    }

    /// `payload-too-large`: the body is over `limit` bytes.
    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            ProblemType::PayloadTooLarge,
            format!("the request body is over the limit of {limit} bytes"),
        )
    }

    /// `too-many-waiters` or `too-many-streams` (`kind`) for a token that
    /// holds its share already: `max` of `what`, half of `setting`.
    pub fn over_quota(kind: ProblemType, max: usize, what: &str, setting: &str) -> Self {
        Self::new(
            kind,
            format!(
                "this token already has {max} {what} open on this instance, its share (half of \
                 {setting}); other tokens are still served; retry once one ends"
            ),
        )
    }

    /// `too-many-streams`: this instance serves `max` streams already.
    pub fn too_many_streams(max: usize) -> Self {
        Self::new(
            ProblemType::TooManyStreams,
            format!("this instance already serves its maximum of {max} event streams; retry later"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_lock_counts_its_readers() {
        let held = |holders| LockHeld {
            name: "docs".into(),
            owner: None,
            expires_in_ms: 900,
            mode: Some(Mode::Shared),
            holders,
            waiting: 0,
        };
        let one = Problem::lock_held(held(1));
        assert_eq!(
            one.detail,
            "lock 'docs' is held shared by 1 reader; it expires in 900 ms unless refreshed"
        );
        assert!(Problem::lock_held(held(3))
            .detail
            .contains("3 readers; the last"));
    }

    #[test]
    fn a_broken_claim_names_what_was_gone() {
        let problem = Problem::claim_broken(&[(Kind::Lock, "a".into())]);
        assert_eq!(problem.names, Some(vec!["a".to_owned()]));
        assert!(problem.detail.contains("lock 'a'"));
        assert_eq!(problem.status, 404);
    }
}
