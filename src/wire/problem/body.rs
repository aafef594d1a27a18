//! [`Problem`]: the RFC 9457 problem body, as the service writes it and as
//! a client reads it.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::kind::ProblemType;
use crate::wire::lenient::ignoring_mistyped;
use crate::wire::status::Mode;

/// An RFC 9457 problem: `type`, `title`, `status`, `detail`, and the extension
/// members of some problem types.
// Every member may be absent (the service always sends the first four), as
// RFC 9457 has it; `from_json` also ignores one of the wrong type.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "type": "/problems/lock-held",
    "title": "Lock is held",
    "status": 409,
    "detail": "lock 'deploy-prod' is held by someone else; it expires in 29500 ms unless refreshed",
    "owner": "https://ci.example.com/jobs/42",
    "expires_in_ms": 29500
}))]
pub struct Problem {
    /// A URI reference that ends in the problem's slug; `GET` it for a description.
    #[serde(rename = "type", default)]
    #[schema(required = true)]
    pub kind: String,
    /// A short summary of the problem type.
    #[serde(default)]
    #[schema(required = true)]
    pub title: String,
    /// The HTTP status code.
    #[serde(default)]
    #[schema(required = true)]
    pub status: u16,
    /// What went wrong in this occurrence, and which field when a field is at fault.
    #[serde(default)]
    #[schema(required = true)]
    pub detail: String,
    /// `lock-held`: the current holder's owner label, if it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// `lock-held`: when the last lease in the request's way expires unless refreshed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_ms: Option<u64>,
    /// `lock-held`: how the lock is held, `exclusive` or `shared`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// `lock-held`, `semaphore-full`: how many leases are held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holders: Option<u64>,
    /// `semaphore-full`: how many permits they hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used: Option<u64>,
    /// `semaphore-full`: the limit the acquisition was judged against.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// `lock-held`, `semaphore-full`: how many requests are queued in the line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<u64>,
    /// `invalid-request` for a `wait_ms` over the server's maximum: that maximum.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wait_ms: Option<u64>,
    /// `forbidden`: the scope the request needed on the name, `read`,
    /// `write` or `admin`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^(read|write|admin)$")]
    pub scope: Option<String>,
    /// `frozen`: the freeze's reason, if it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `frozen`: the id of the freeze that holds the name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freeze_id: Option<String>,
    /// `frozen`: when the freeze's window ends (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub until: Option<String>,
    /// `claim-refused`: the names in the claim's way; `claim-not-found`
    /// after a refresh: the names whose leases were gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
}

impl Problem {
    /// The problem that the JSON `body` is, read as RFC 9457 asks of a
    /// client: every member optional, one of the wrong type (or a `mode`
    /// this version does not know) ignored. `None` when `body` is not an
    /// object.
    pub fn from_json(body: &Value) -> Option<Self> {
        ignoring_mistyped(body.as_object()?).ok()
    }

    /// A problem of type `kind` that says what every occurrence of it says
    /// (its table's `detail`; its title where it has none).
    pub fn of(kind: ProblemType) -> Self {
        let facts = kind.facts();
        Self::new(kind, facts.detail.unwrap_or(facts.title).to_owned())
    }

    /// A problem of type `kind` with its title and status, and `detail`.
    pub fn new(kind: ProblemType, detail: String) -> Self {
        let facts = kind.facts();
        Self {
            kind: kind.uri(),
            title: facts.title.into(),
            status: facts.status,
            detail,
            owner: None,
            expires_in_ms: None,
            mode: None,
            holders: None,
            used: None,
            limit: None,
            waiting: None,
            max_wait_ms: None,
            scope: None,
            reason: None,
            freeze_id: None,
            until: None,
            names: None,
        }
    }

    /// The last segment of its `type` (`lock-held`), whether or not this
    /// version knows it: for messages.
    pub fn slug(&self) -> Option<&str> {
        self.kind.rsplit('/').next().filter(|slug| !slug.is_empty())
    }

    /// Its type, when this version knows it.
    pub fn problem_type(&self) -> Option<ProblemType> {
        self.slug().and_then(ProblemType::from_slug)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Mode, Problem, ProblemType};

    #[test]
    fn a_problem_reads_as_rfc_9457_asks() {
        let full = Problem {
            owner: Some("ci".into()),
            mode: Some(Mode::Shared),
            holders: Some(2),
            ..Problem::new(ProblemType::LockHeld, "held".into())
        };
        let written = serde_json::to_value(&full).unwrap();
        let read = Problem::from_json(&written).unwrap();
        assert_eq!(serde_json::to_value(&read).unwrap(), written);
        assert_eq!(read.problem_type(), Some(ProblemType::LockHeld));
        // Every member may be absent, and one of the wrong type is ignored.
        let odd = Problem::from_json(&json!({
            "type": "https://example.com/problems/teapot", "status": "418",
            "mode": "intent", "holders": 2, "extra": true
        }))
        .unwrap();
        assert_eq!((odd.slug(), odd.problem_type()), (Some("teapot"), None));
        assert_eq!((odd.status, odd.detail.as_str()), (0, ""));
        assert_eq!((odd.mode, odd.holders), (None, Some(2)));
        let none = Problem::from_json(&json!({})).unwrap();
        assert_eq!(none.slug(), None);
        assert!(Problem::from_json(&json!(["type"])).is_none());
    }

    #[test]
    fn a_type_that_says_the_same_each_time_says_its_table_detail() {
        let problem = Problem::of(ProblemType::LeaseNotFound);
        assert_eq!(problem.status, 404);
        assert_eq!(
            Some(problem.detail.as_str()),
            ProblemType::LeaseNotFound.facts().detail
        );
    }
}
