//! Each problem type's OpenAPI response: the [`Problem`] schema, an example
//! made by the same constructors as the service's answers, and
//! `Retry-After` where the type has a retry policy.

use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder, Type};

use super::body::Problem;
use super::details::{LockHeld, SemaphoreFull};
use super::facts::RetryAfter;
use super::kind::ProblemType;
use crate::domain::Ttl;
use crate::wire::status::Mode;

impl ProblemType {
    /// An occurrence of it, as the OpenAPI document shows it.
    pub fn example(self) -> Problem {
        match self {
            Self::InvalidRequest => match Ttl::from_ms(0) {
                Err(zero) => Problem::invalid_field("ttl_ms", &zero),
                Ok(_) => Problem::of(self),
            },
            Self::Forbidden => Problem::forbidden(
                "this token may not write \"team-b-deploy\": it needs write on that name".into(),
                Some("write"),
            ),
            Self::LockHeld => Problem::lock_held(LockHeld {
                name: "deploy-prod".into(),
                owner: Some("https://ci.example.com/jobs/42".into()),
                expires_in_ms: 29500,
                mode: Some(Mode::Exclusive),
                holders: 1,
                waiting: 2,
            }),
            Self::SemaphoreFull => Problem::semaphore_full(SemaphoreFull {
                name: "migrations".into(),
                holders: 4,
                used: 4,
                limit: 4,
                waiting: 3,
            }),
            Self::Superseded => {
                Problem::superseded("deploy-prod", Some("https://ci.example.com/jobs/43".into()))
            }
            Self::Frozen => Problem::frozen(
                "deploy-prod",
                Some("release weekend".into()),
                Some("3b2c0f6e-4f7c-4f43-9a51-7d0c2e1b9a10".into()),
                1_796_022_000_000,
            ),
            Self::ClaimRefused => Problem::claim_refused(
                "lock 'db-migrations' is held by someone else",
                vec!["db-migrations".into()],
            ),
            Self::PayloadTooLarge => Problem::payload_too_large(16384),
            Self::TooManyStreams => Problem::too_many_streams(1000),
            _ => Problem::of(self),
        }
    }

    /// A reference to its OpenAPI response component, for an operation's
    /// answer of this type.
    pub fn response_ref(self) -> Ref {
        Ref::from_response_name(self.component_name())
    }

    /// Its OpenAPI response: the [`Problem`] schema with an example, and
    /// `Retry-After` where it has a retry policy.
    pub fn openapi_response(self) -> RefOr<utoipa::openapi::Response> {
        let facts = self.facts();
        let example = serde_json::to_value(self.example()).unwrap_or_default();
        let content = ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("Problem")))
            .example(Some(example))
            .build();
        let mut response = ResponseBuilder::new()
            .description(facts.description)
            .content("application/problem+json", content);
        if facts.retry != RetryAfter::Never {
            let seconds = utoipa::openapi::schema::Object::with_type(Type::Integer);
            let header = HeaderBuilder::new()
                .schema(Some(seconds))
                .description(Some("Seconds to wait before trying again"))
                .build();
            response = response.header("Retry-After", header);
        }
        response.build().into()
    }
}

#[cfg(test)]
mod tests {
    use super::ProblemType;

    #[test]
    fn every_example_is_of_its_own_type() {
        for &kind in ProblemType::ALL {
            let example = kind.example();
            assert_eq!(example.problem_type(), Some(kind), "{kind:?}");
            assert!(!example.detail.is_empty(), "{kind:?}");
        }
    }
}
