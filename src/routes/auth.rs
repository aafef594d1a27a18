//! Bearer tokens: setting `BATON_API_TOKENS` or `BATON_ADMIN_TOKENS` (either)
//! guards `/locks` and `/semaphores`; admin tokens are API tokens too, and may
//! also force-release. Compared in constant time, never logged.

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::header::AUTHORIZATION;
use axum::response::{IntoResponse, Response};
use futures_util::future::Either;
use subtle::{Choice, ConstantTimeEq};
use tower::{Layer, Service};

use super::AppError;

/// The configured tokens.
pub struct Auth {
    api: Vec<Vec<u8>>,
    admin: Vec<Vec<u8>>,
}

/// What the caller proved, put in the request's extensions by [`RequireToken`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No valid token, on a service whose API is open.
    Anonymous,
    /// A valid API token.
    User,
    /// A valid admin token.
    Admin,
}

impl Auth {
    pub fn new(api: &[String], admin: &[String]) -> Self {
        let bytes = |tokens: &[String]| tokens.iter().map(|t| t.as_bytes().to_vec()).collect();
        Self {
            api: bytes(api),
            admin: bytes(admin),
        }
    }

    /// No tokens at all: everything is open, force-release included.
    pub fn is_open(&self) -> bool {
        self.api.is_empty() && self.admin.is_empty()
    }

    /// Whether the API itself needs a token: with any token configured.
    pub fn requires_token(&self) -> bool {
        !self.is_open()
    }

    /// What anyone who can reach the service may do without a token, beyond
    /// the service endpoints (`/healthz`, `/readyz`, `/metrics`,
    /// `/openapi.json`, `/docs`, `/problems`), which are always open; `None`
    /// when that is nothing.
    pub fn what_is_open(&self) -> Option<&'static str> {
        self.is_open().then_some(
            "BATON_API_TOKENS and BATON_ADMIN_TOKENS are both unset: anyone who can reach this \
             service can acquire, refresh, release and force-release every lock and semaphore",
        )
    }

    /// What a request with `presented` (the bearer token, if any) may do.
    ///
    /// # Errors
    /// [`AppError::Unauthorized`] when the API needs a token and none valid was given.
    pub fn access(&self, presented: Option<&[u8]>) -> Result<Access, AppError> {
        let presented = presented.unwrap_or_default();
        let is_admin = !presented.is_empty() && matches_any(&self.admin, presented);
        let is_user = !presented.is_empty() && matches_any(&self.api, presented);
        if is_admin {
            Ok(Access::Admin)
        } else if is_user {
            Ok(Access::User)
        } else if self.requires_token() {
            Err(AppError::Unauthorized)
        } else {
            Ok(Access::Anonymous)
        }
    }

    /// Whether `access` may force-release a lock.
    ///
    /// # Errors
    /// 401 without a token, 403 with a token that is not an admin token.
    pub fn allow_force_release(&self, access: Access) -> Result<(), AppError> {
        match access {
            Access::Admin => Ok(()),
            _ if self.is_open() => Ok(()),
            Access::Anonymous => Err(AppError::Unauthorized),
            Access::User => Err(AppError::Forbidden),
        }
    }
}

/// Compares against every token, without stopping at the first match.
fn matches_any(tokens: &[Vec<u8>], presented: &[u8]) -> bool {
    let mut found = Choice::from(0);
    for token in tokens {
        found |= token.as_slice().ct_eq(presented);
    }
    found.into()
}

fn bearer(request: &Request) -> Option<&[u8]> {
    let value = request.headers().get(AUTHORIZATION)?.as_bytes();
    let (scheme, token) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| token.trim_ascii())
}

/// The guard of `/locks` and `/semaphores`: answers 401 unless the request
/// may use the API, and records its [`Access`] for the handlers. The check is
/// synchronous, so the guard adds nothing to a request's future (a waiting
/// request keeps that future for its whole wait).
#[derive(Clone, Copy)]
pub struct RequireToken;

impl<S> Layer<S> for RequireToken {
    type Service = RequireTokenService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequireTokenService(inner)
    }
}

/// [`RequireToken`] around a service.
#[derive(Clone)]
pub struct RequireTokenService<S>(S);

impl<S> Service<Request> for RequireTokenService<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        // Put there by the `Extension` layer that wraps every route.
        let Some(auth) = request.extensions().get::<Arc<Auth>>().cloned() else {
            let err = AppError::Internal("no token check");
            return Either::Left(ready(Ok(err.into_response())));
        };
        match auth.access(bearer(&request)) {
            Ok(access) => {
                request.extensions_mut().insert(access);
                Either::Right(self.0.call(request))
            }
            Err(err) => Either::Left(ready(Ok(err.into_response()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(api: &[&str], admin: &[&str]) -> Auth {
        let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        Auth::new(&owned(api), &owned(admin))
    }

    #[test]
    fn open_service_lets_everyone_do_everything() {
        let auth = auth(&[], &[]);
        let access = auth.access(None).unwrap();
        assert_eq!(access, Access::Anonymous);
        assert!(auth.allow_force_release(access).is_ok());
    }

    #[test]
    fn api_tokens_are_required_and_checked() {
        let auth = auth(&["alpha", "beta"], &["root"]);
        assert!(matches!(auth.access(None), Err(AppError::Unauthorized)));
        assert!(matches!(
            auth.access(Some(b"alph")),
            Err(AppError::Unauthorized)
        ));
        assert_eq!(auth.access(Some(b"beta")).unwrap(), Access::User);
        assert_eq!(auth.access(Some(b"root")).unwrap(), Access::Admin);
    }

    #[test]
    fn force_release_needs_an_admin_token() {
        let auth = auth(&["alpha"], &["root"]);
        assert!(matches!(
            auth.allow_force_release(Access::User),
            Err(AppError::Forbidden)
        ));
        assert!(auth.allow_force_release(Access::Admin).is_ok());
        let admin_only = super::tests::auth(&[], &["root"]);
        assert!(matches!(
            admin_only.allow_force_release(Access::Anonymous),
            Err(AppError::Unauthorized)
        ));
    }

    #[test]
    fn admin_tokens_alone_turn_authentication_on() {
        let auth = auth(&[], &["root"]);
        assert!(auth.requires_token());
        assert!(matches!(auth.access(None), Err(AppError::Unauthorized)));
        assert!(matches!(
            auth.access(Some(b"other")),
            Err(AppError::Unauthorized)
        ));
        assert_eq!(auth.access(Some(b"root")).unwrap(), Access::Admin);
        assert_eq!(auth.what_is_open(), None);
    }

    #[test]
    fn only_a_service_without_tokens_says_it_is_open() {
        let open = auth(&[], &[]).what_is_open().unwrap();
        assert!(open.contains("BATON_API_TOKENS") && open.contains("BATON_ADMIN_TOKENS"));
        assert!(open.contains("force-release"));
        assert_eq!(auth(&["a"], &[]).what_is_open(), None);
    }
}
