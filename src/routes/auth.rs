//! The bearer-token guard of `/locks`, `/semaphores` and `/events`: who the
//! caller is ([`Caller`], looked up in [`Tokens`]), or 401. What the caller
//! may do to a name is asked of it by each handler, before any Redis call:
//! `caller.require(Scope::Write, &name)?` (a refusal is 403 `forbidden`).

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::{FromRequestParts, Request};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use futures_util::future::{self, BoxFuture, Either};
use futures_util::FutureExt;
use tower::{Layer, Service};

use super::error::AppError;
use crate::access::{Principal, Standing, Tokens, Unidentified, Whose};
use crate::wire::ProblemType;

/// The caller of a guarded request, put in its extensions by
/// [`RequireToken`]: its token's name and grants ([`Principal`], which it
/// derefs to), and how what the request keeps open learns that the token
/// was removed, narrowed or expired since ([`Caller::revoked`]). A handler
/// takes it as an argument.
#[derive(Debug, Clone)]
pub struct Caller {
    principal: Arc<Principal>,
    /// `None` where nothing can change it: anyone on an open service, a
    /// job's token (checked once, when it is presented).
    standing: Option<Standing>,
}

impl std::ops::Deref for Caller {
    type Target = Principal;

    fn deref(&self) -> &Principal {
        &self.principal
    }
}

impl Caller {
    /// A caller whose token never changes under it.
    pub fn fixed(principal: Arc<Principal>) -> Self {
        Self {
            principal,
            standing: None,
        }
    }

    /// Whether its token can be removed, narrowed or expired while a
    /// request is open (a token of the set in force), so that what the
    /// request keeps open must watch it.
    pub fn can_change(&self) -> bool {
        self.standing.is_some()
    }

    /// Whose share of the instance's waiters and streams its requests take:
    /// its token's (each token on its own, by digest), a job token's rule's
    /// name, or nobody's on a service without tokens.
    pub fn whose(&self) -> Option<Whose> {
        match &self.standing {
            Some(standing) => Some(Whose::Token(standing.digest())),
            None => self.principal.name().cloned().map(Whose::Named),
        }
    }

    /// What its token may do now, once the set in force has changed: `None`
    /// once the token is gone (removed or expired). Never resolves for a
    /// caller whose token cannot change.
    pub async fn changed(&mut self) -> Option<Arc<Principal>> {
        match self.standing.as_mut() {
            Some(standing) => {
                let now = standing.changed().await;
                if let Some(principal) = &now {
                    self.principal = principal.clone();
                }
                now
            }
            None => std::future::pending().await,
        }
    }

    /// Resolves once the token no longer allows what `still` asks of it
    /// (after a reload, or its `expires`): 401 when it is gone, else the
    /// refusal `still` gives (403). Never resolves while it does.
    pub async fn revoked(mut self, still: impl Fn(&Principal) -> Result<(), AppError>) -> AppError {
        loop {
            match self.changed().await {
                None => return AppError::from(ProblemType::Unauthorized),
                Some(principal) => {
                    if let Err(err) = still(&principal) {
                        return err;
                    }
                }
            }
        }
    }

    /// `answer`, unless `revoked` ([`Caller::revoked`], with whatever the
    /// caller must note first) resolves first: then its refusal, and
    /// `answer` is dropped (a waiting request leaves the line, giving back a
    /// lease granted meanwhile, as when its client hangs up; no lease is
    /// answered after the change). Watched only when `revocable`
    /// ([`Caller::can_change`]: a service without tokens has nothing to
    /// watch), through a combinator with both futures boxed: an async block
    /// would hold the waiting future twice (about 1.3 KiB more per waiting
    /// request, measured by `scripts/bench.sh`'s idle waiters).
    pub fn unless_revoked<T>(
        revocable: bool,
        revoked: impl Future<Output = AppError> + Send + 'static,
        answer: impl Future<Output = Result<T, AppError>> + Send + 'static,
    ) -> impl Future<Output = Result<T, AppError>> + Send + 'static {
        if revocable {
            let first = future::select(Box::pin(revoked), Box::pin(answer));
            Either::Left(first.map(|first| match first {
                Either::Left((err, _)) => Err(err),
                Either::Right((answer, _)) => answer,
            }))
        } else {
            Either::Right(answer)
        }
    }

    /// The caller of the request with these `parts`.
    ///
    /// # Errors
    /// 500 on a route outside the guard (a bug, not the client's).
    pub fn of(parts: &Parts) -> Result<Self, AppError> {
        parts
            .extensions
            .get::<Self>()
            .cloned()
            .ok_or(AppError::internal(
                "a guarded route without its token check",
            ))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, AppError> {
        Self::of(parts)
    }
}

fn bearer(request: &Request) -> Option<&[u8]> {
    let value = request.headers().get(AUTHORIZATION)?.as_bytes();
    let (scheme, token) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| token.trim_ascii())
}

/// The guard of `/locks`, `/semaphores` and `/events`: answers 401 unless
/// the request may use the API, and records its [`Caller`] for the
/// handlers. The check is synchronous, so the guard adds nothing to a
/// request's future (a waiting request keeps that future for its whole wait),
/// except for a job's token whose issuer's keys must be fetched first.
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

/// The guard's answer: at once (refused, or the inner service's future), or
/// after a job's token waited for its issuer's keys (boxed: that path only).
type GuardFuture<F> = Either<
    Ready<Result<Response, Infallible>>,
    Either<F, BoxFuture<'static, Result<Response, Infallible>>>,
>;

impl<S> Service<Request> for RequireTokenService<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = GuardFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        // Put there by the `Extension` layer that wraps every route.
        let Some(tokens) = request.extensions().get::<Arc<Tokens>>().cloned() else {
            let err = AppError::internal("no token check");
            return Either::Left(ready(Ok(err.into_response())));
        };
        match crate::access::identify_standing(&tokens, bearer(&request)) {
            Ok((principal, standing)) => {
                request.extensions_mut().insert(Caller {
                    principal,
                    standing,
                });
                Either::Right(Either::Left(self.0.call(request)))
            }
            Err(Unidentified::NoValidToken) => Either::Left(ready(Ok(AppError::from(
                ProblemType::Unauthorized,
            )
            .into_response()))),
            Err(Unidentified::Refused(refusal)) => {
                Either::Left(ready(Ok(AppError::from(refusal).into_response())))
            }
            Err(Unidentified::Pending(pending)) => {
                // The inner service was made ready for this call: take it,
                // and leave a clone for the next.
                let clone = self.0.clone();
                let mut inner = std::mem::replace(&mut self.0, clone);
                Either::Right(Either::Right(Box::pin(async move {
                    match pending.resolve().await {
                        Ok(principal) => {
                            request.extensions_mut().insert(Caller::fixed(principal));
                            inner.call(request).await
                        }
                        Err(refusal) => Ok(AppError::from(refusal).into_response()),
                    }
                })))
            }
        }
    }
}
