//! Every answer of the service, classified once: an [`Answer`] (its status
//! and JSON body) becomes an [`Outcome`] (done, rejected, refused, gone,
//! superseded, busy, frozen, retry, unexpected), read from the
//! [`crate::wire`] problem it carries; and every rule the client applies to
//! an outcome is written here once: which exit status it ends with
//! ([`crate::cli::exit`]), which failures may pass and are tried again, and the
//! sentence that says so.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::cli::exit::{Failure, LOST, NOT_ACQUIRED, REFUSED, SUPERSEDED, UNAVAILABLE, USAGE};
use crate::cli::target::Target;
use crate::wire::{Problem, ProblemType};

/// What the service answered: the status and the JSON body (`Null` when there
/// was none or it was not JSON). The body is kept as it came for the
/// commands that print it verbatim (`--output json`); everything else reads
/// it as its [`crate::wire`] type ([`Answer::read`], [`Answer::problem`]).
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

/// What an answer means to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// 2xx: what was asked was done (the status says which: 200, 201, 202, 204).
    Done,
    /// 400, 422: the request is wrong. `max_wait_ms` is the service's
    /// maximum wait when that is what it named: a wait may step down to it.
    Rejected { max_wait_ms: Option<u64> },
    /// 401, 403: the token is missing, wrong, or may not do this.
    Refused,
    /// 404 `lease-not-found`: the lease is no longer held.
    LeaseGone,
    /// Any other 404: no such freeze, ticket, claim or route.
    NotFound,
    /// 409 `superseded`: a newer `--newest-wins` request took this one's place.
    Superseded { by: Option<String> },
    /// Any other 409: the name is taken.
    Busy,
    /// 423: a freeze holds the name (`until`, `reason` when it says so).
    Frozen {
        until: Option<String>,
        reason: Option<String>,
    },
    /// 429, 5xx: a failure that may pass; tried again.
    Retry,
    /// Anything else: not a baton service, or not one this client knows.
    Unexpected,
}

impl Answer {
    /// The body as a problem (RFC 9457), when it is one.
    pub fn problem(&self) -> Option<Problem> {
        Problem::from_json(&self.body)
    }

    /// The body as the `what` it should be.
    ///
    /// # Errors
    /// Not one: not a baton service, or not one this client can read (69).
    pub fn read<T: DeserializeOwned>(&self, what: &str) -> Result<T, Failure> {
        T::deserialize(&self.body).map_err(|err| unreadable(what, &err))
    }

    /// What it means: the one place where a status becomes a meaning.
    pub fn outcome(&self) -> Outcome {
        outcome(self.status, self.problem())
    }

    /// Whether it is a failure that may pass (429, 5xx): tried again.
    pub fn may_pass(&self) -> bool {
        self.outcome() == Outcome::Retry
    }

    /// `HTTP 409 lock-held: the lock is held`, for messages.
    pub fn describe(&self) -> String {
        let mut out = format!("HTTP {}", self.status);
        if let Some(problem) = self.problem() {
            if let Some(slug) = problem.slug() {
                out.push(' ');
                out.push_str(slug);
            }
            if !problem.detail.is_empty() {
                out.push_str(": ");
                out.push_str(&problem.detail);
            }
        }
        out
    }
}

/// What an answer of `status` with the problem `problem` means (the stream
/// of a lease's events is read with it as well as every call).
pub fn outcome(status: u16, problem: Option<Problem>) -> Outcome {
    let kind = problem.as_ref().and_then(Problem::problem_type);
    match (status, kind) {
        (200..=299, _) => Outcome::Done,
        (400 | 422, _) => Outcome::Rejected {
            max_wait_ms: problem.and_then(|p| p.max_wait_ms),
        },
        (401 | 403, _) => Outcome::Refused,
        (404, Some(ProblemType::LeaseNotFound)) => Outcome::LeaseGone,
        (404, _) => Outcome::NotFound,
        (409, Some(ProblemType::Superseded)) => Outcome::Superseded {
            by: problem.and_then(|p| p.owner),
        },
        (409, _) => Outcome::Busy,
        (423, _) => {
            let (until, reason) = problem.map_or((None, None), |p| (p.until, p.reason));
            Outcome::Frozen { until, reason }
        }
        (429 | 500..=599, _) => Outcome::Retry,
        _ => Outcome::Unexpected,
    }
}

/// The failure of an answer whose body is not the `what` it should be: not
/// a baton service, or not one this client can read (69).
pub fn unreadable(what: &str, err: &serde_json::Error) -> Failure {
    Failure::new(
        UNAVAILABLE,
        format!("cannot read the {what} the service showed: {err}"),
    )
}

/// The service found the `noun` (request, claim, freeze) invalid (64).
pub fn rejected(noun: &str, answer: &Answer) -> Failure {
    Failure::new(
        USAGE,
        format!("the service rejected the {noun}: {}", answer.describe()),
    )
}

/// The service refused the token for the `noun` (77); `admin`: only an
/// admin token may do it.
pub fn refused(noun: &str, answer: &Answer, admin: bool) -> Failure {
    let needs = if admin {
        "freezes take an admin token: "
    } else {
        ""
    };
    Failure::new(
        REFUSED,
        format!(
            "the service refused the {noun}: {} ({needs}check --token or BATON_TOKEN)",
            answer.describe()
        ),
    )
}

/// An answer the client has no use for (69): `about` says where or what it
/// answered (`unexpected answer`, `unexpected answer from URL`), `hint`
/// what to check besides the URL.
pub fn unexpected(about: &str, answer: &Answer, hint: &str) -> Failure {
    Failure::new(
        UNAVAILABLE,
        format!(
            "{about}: {} ({hint}check --url or BATON_URL)",
            answer.describe()
        ),
    )
}

/// Nothing serves at `--url`, or it stopped answering (69): `why` says which.
pub fn unreachable(why: impl std::fmt::Display) -> Failure {
    Failure::new(UNAVAILABLE, format!("{why} (check --url or BATON_URL)"))
}

/// What an answer that is not a success means for a call on `target`, as
/// an exit status and its line.
pub fn failure(answer: &Answer, target: &Target) -> Failure {
    let described = answer.describe();
    match answer.outcome() {
        Outcome::Rejected { .. } => rejected("request", answer),
        Outcome::Refused => refused("request", answer, false),
        Outcome::LeaseGone => Failure::new(
            LOST,
            format!("{target} is no longer held by this lease (expired or force-released)"),
        ),
        Outcome::Superseded { .. } => Failure::new(SUPERSEDED, format!("superseded: {described}")),
        Outcome::Busy => Failure::new(NOT_ACQUIRED, format!("{target} is taken: {described}")),
        Outcome::Frozen { .. } => {
            Failure::new(NOT_ACQUIRED, format!("{target} is frozen: {described}"))
        }
        Outcome::Done | Outcome::NotFound | Outcome::Retry | Outcome::Unexpected => {
            unexpected("unexpected answer", answer, "")
        }
    }
}

/// What an answer that is not a success means for a call on the freezes
/// (no lease, no name: only usage, the admin token, or the service).
pub fn freeze_failure(answer: &Answer) -> Failure {
    match answer.outcome() {
        Outcome::Rejected { .. } => rejected("freeze", answer),
        Outcome::Refused => refused("request", answer, true),
        _ => unexpected("unexpected answer", answer, ""),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::Kind;

    fn answer(status: u16, slug: &str) -> Answer {
        Answer {
            status,
            body: json!({"type": format!("https://baton/problems/{slug}"), "max_wait_ms": 5,
                "owner": "ci-9", "until": "2026-12-06T07:00:00Z"}),
        }
    }

    #[test]
    fn answers_map_to_exit_statuses() {
        let target = Target::new(Kind::Lock, "x").unwrap();
        for (status, slug, exit) in [
            (400, "invalid-request", USAGE),
            (401, "unauthorized", REFUSED),
            (403, "forbidden", REFUSED),
            (404, "lease-not-found", LOST),
            (409, "lock-held", NOT_ACQUIRED),
            (409, "superseded", SUPERSEDED),
            (423, "frozen", NOT_ACQUIRED),
            (404, "not-found", UNAVAILABLE),
            (503, "unavailable", UNAVAILABLE),
        ] {
            assert_eq!(
                failure(&answer(status, slug), &target).status,
                exit,
                "{status} {slug}"
            );
        }
    }

    #[test]
    fn an_answer_is_classified_once_with_what_its_problem_says() {
        assert_eq!(answer(201, "").outcome(), Outcome::Done);
        assert_eq!(
            answer(400, "invalid-request").outcome(),
            Outcome::Rejected {
                max_wait_ms: Some(5)
            }
        );
        assert_eq!(
            answer(409, "superseded").outcome(),
            Outcome::Superseded {
                by: Some("ci-9".into())
            }
        );
        assert_eq!(
            answer(423, "frozen").outcome(),
            Outcome::Frozen {
                until: Some("2026-12-06T07:00:00Z".into()),
                reason: None
            }
        );
        for status in [429, 500, 502, 503, 504] {
            assert!(answer(status, "x").may_pass(), "{status}");
        }
        for status in [200, 400, 404, 409, 418] {
            assert!(!answer(status, "x").may_pass(), "{status}");
        }
        assert_eq!(answer(302, "").outcome(), Outcome::Unexpected);
    }
}
