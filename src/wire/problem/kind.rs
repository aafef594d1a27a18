//! [`ProblemType`]: every problem type of the API, and how one is named (its
//! slug, its `type` URI, its OpenAPI component).

use crate::domain::Kind;

/// Every problem type of the API. `InternalError` stays last: [`Self::ALL`]
/// is checked against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemType {
    InvalidRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    LeaseNotFound,
    TicketNotFound,
    FreezeNotFound,
    LockNotHeld,
    SemaphoreNotHeld,
    MethodNotAllowed,
    LockHeld,
    SemaphoreFull,
    Superseded,
    Frozen,
    ClaimRefused,
    ClaimNotFound,
    PayloadTooLarge,
    RedisUnavailable,
    ShuttingDown,
    TooManyWaiters,
    TooManyStreams,
    RequestTimeout,
    IssuerUnavailable,
    InternalError,
}

impl ProblemType {
    /// Every problem type, in declaration order.
    pub const ALL: &'static [Self] = &[
        Self::InvalidRequest,
        Self::Unauthorized,
        Self::Forbidden,
        Self::NotFound,
        Self::LeaseNotFound,
        Self::TicketNotFound,
        Self::FreezeNotFound,
        Self::LockNotHeld,
        Self::SemaphoreNotHeld,
        Self::MethodNotAllowed,
        Self::LockHeld,
        Self::SemaphoreFull,
        Self::Superseded,
        Self::Frozen,
        Self::ClaimRefused,
        Self::ClaimNotFound,
        Self::PayloadTooLarge,
        Self::RedisUnavailable,
        Self::ShuttingDown,
        Self::TooManyWaiters,
        Self::TooManyStreams,
        Self::RequestTimeout,
        Self::IssuerUnavailable,
        Self::InternalError,
    ];

    /// What a `kind` answers when it stayed busy for a whole wait (409).
    pub const fn busy(kind: Kind) -> Self {
        match kind {
            Kind::Lock => Self::LockHeld,
            Kind::Semaphore => Self::SemaphoreFull,
        }
    }

    /// What force-release of a `kind` answers when nothing is held (404).
    pub const fn not_held(kind: Kind) -> Self {
        match kind {
            Kind::Lock => Self::LockNotHeld,
            Kind::Semaphore => Self::SemaphoreNotHeld,
        }
    }

    /// Its slug (`lock-held`): the last segment of its `type` URI.
    pub fn slug(self) -> &'static str {
        self.facts().slug
    }

    /// Its slug, as [`Self::slug`].
    pub fn as_str(self) -> &'static str {
        self.slug()
    }

    /// The type whose slug is `slug`.
    pub fn from_slug(slug: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|p| p.slug() == slug)
    }

    /// The `type` URI: where `GET` describes it.
    pub fn uri(self) -> String {
        format!("/problems/{}", self.slug())
    }

    /// The name of its OpenAPI response component.
    pub fn component_name(self) -> String {
        format!("{self:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::ProblemType;

    #[test]
    fn all_lists_every_type_once_in_order() {
        for (i, kind) in ProblemType::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i, "{kind:?}");
        }
        assert_eq!(
            ProblemType::ALL.len(),
            ProblemType::InternalError as usize + 1
        );
    }

    #[test]
    fn slugs_are_unique_and_lead_back() {
        for &kind in ProblemType::ALL {
            assert_eq!(ProblemType::from_slug(kind.slug()), Some(kind));
            assert_eq!(kind.as_str(), kind.slug());
            assert!(kind.uri().ends_with(kind.slug()));
        }
    }
}
