//! Builds the service: the Redis engine, the router with its layers, the
//! listener, and the run loop that stops gracefully.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::classify::ServerErrorsFailureClass;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::access::{self, Tokens};
use crate::config::{ConfigError, Settings};
use crate::engine::Engine;
use crate::http::server::{self, App, Limits};
use crate::http::{Deadline, RecordMetrics, ResolveParked};
use crate::openapi;
use crate::routes::lease::unrouted;
use crate::routes::{self, dashboard, problem, AppError, AppParts, AppState, BodyLimit};
use crate::wire::ProblemType;

/// How long in-flight requests may take to finish after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The whole HTTP service over `state`: a plain function, so tests can drive it.
pub fn app(state: AppState) -> App {
    let body_limit = state.settings.max_body_bytes;
    let deadline = state.settings.request_deadline();
    let tokens = state.tokens.clone();
    let document = bytes::Bytes::from(openapi::document_json_with_max_wait(
        state.settings.max_wait_ms,
        state.settings.max_keep_place_ms,
        &state.settings.webhook_hosts,
    ));
    let routes =
        Router::from(routes::api::api())
            .route(
                "/openapi.json",
                get(move |headers: HeaderMap| async move {
                    openapi::serve_document(&document, &headers)
                }),
            )
            .route("/docs", get(openapi::swagger_index))
            .route("/docs/", get(openapi::swagger_index))
            .route("/docs/{*file}", get(openapi::swagger_asset))
            .route("/problems/{slug}", get(problem::describe))
            .route("/", get(dashboard::page))
            .fallback(|method: Method, uri: Uri| async move {
                unrouted(uri.path(), &method, AppError::from(ProblemType::NotFound))
            })
            .method_not_allowed_fallback(|method: Method, uri: Uri| async move {
                unrouted(
                    uri.path(),
                    &method,
                    AppError::from(ProblemType::MethodNotAllowed),
                )
            })
            .with_state(state)
            // The one layer that needs the matched route runs inside the router.
            .layer(RecordMetrics);
    // The others wrap the router once, rather than each of its routes.
    let service = ServiceBuilder::new()
        // A request parked in line keeps only what it needs to answer.
        .layer(ResolveParked {
            body_limit,
            deadline,
            timed_out,
            panicked,
        })
        .layer(CatchPanicLayer::custom(|_| panicked()))
        // A request id for every request: the client's X-Request-Id, else a
        // new one; echoed in the response and carried by the request span.
        .map_request(drop_unusable_request_id)
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|req: &Request| {
                    crate::telemetry::request_span(req.method(), req.headers())
                })
                // A 5xx is logged once, inside the span (route, request id).
                .on_failure(
                    |class: ServerErrorsFailureClass, latency: Duration, _: &tracing::Span| {
                        crate::telemetry::request_failed(class, latency);
                    },
                ),
        )
        .layer(Extension(tokens))
        .layer(Extension(BodyLimit(body_limit)))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(Deadline {
            after: deadline,
            timed_out,
        })
        .service(routes);
    App::new(service)
}

/// What a request past its deadline answers: 503 `request-timeout`.
fn timed_out() -> Response {
    AppError::from(ProblemType::RequestTimeout).into_response()
}

/// What a request whose handler panicked answers: 500 `internal-error`.
fn panicked() -> Response {
    AppError::internal("panic").into_response()
}

/// A client's `X-Request-Id` that is too long or not plain text is dropped,
/// so that a fresh one replaces it.
fn drop_unusable_request_id(mut req: Request) -> Request {
    let unusable = req
        .headers()
        .get(crate::telemetry::REQUEST_ID)
        .is_some_and(|id| !crate::telemetry::acceptable_request_id(id));
    if unusable {
        req.headers_mut().remove(crate::telemetry::REQUEST_ID);
    }
    req
}

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// A setting read only at start (the token file): exit 2, as for any
    /// bad setting.
    #[error("{0}")]
    Setting(ConfigError),
    #[error("BATON_REDIS_URL is not a Redis URL: {0}")]
    RedisUrl(redis::RedisError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
}

/// A service ready to run: bound, connected lazily to Redis, subscribed.
pub struct Application {
    listener: TcpListener,
    app: App,
    engine: Engine,
    limits: Limits,
}

impl Application {
    /// [`Self::build_with`] the tokens of `settings`, read now.
    ///
    /// # Errors
    /// A bad token file, a bad Redis URL, or an address that cannot be bound.
    pub async fn build(settings: Settings) -> Result<Self, StartupError> {
        let tokens = Tokens::load(&settings).map_err(StartupError::Setting)?;
        Self::build_with(settings, tokens).await
    }

    /// Connects to Redis (lazily), subscribes to release events (waiting up to
    /// two seconds for the first subscription), binds the listener, and from
    /// then on reads the token file of `tokens` again on SIGHUP and when it changes.
    ///
    /// # Errors
    /// A bad Redis URL, or an address that cannot be bound.
    pub async fn build_with(settings: Settings, tokens: Tokens) -> Result<Self, StartupError> {
        // rustls needs a crypto provider for rediss://; ring is the one built in.
        let _ = rustls::crypto::ring::default_provider().install_default();
        crate::telemetry::init_metrics();

        let engine = Engine::start(&settings)
            .await
            .map_err(StartupError::RedisUrl)?;

        let tokens = Arc::new(tokens);
        if let Some(open) = tokens.what_is_open() {
            tracing::warn!("{open}");
        }
        crate::telemetry::record_tokens_loaded(tokens.count());
        access::follow_token_file(tokens.clone(), |reloaded| {
            crate::telemetry::record_tokens_reload(reloaded.is_some());
            if let Some(count) = reloaded {
                crate::telemetry::record_tokens_loaded(count);
            }
        });
        let listener = TcpListener::bind(&settings.listen)
            .await
            .map_err(|source| StartupError::Listen {
                addr: settings.listen.clone(),
                source,
            })?;
        tracing::info!(
            listen = %listener.local_addr().map_or_else(|_| settings.listen.clone(), |a| a.to_string()),
            redis = %settings.redis_url_redacted(),
            redis_mode = ?settings.redis_mode,
            key_prefix = %settings.key_prefix,
            "baton is serving"
        );
        let limits = Limits::from_settings(&settings);
        let state = AppState::new(AppParts {
            quotas: crate::access::Quotas::new(settings.max_waiters, settings.max_event_streams),
            yields: crate::routes::YieldThrottle::default(),
            engine: engine.clone(),
            settings,
            tokens,
        });
        Ok(Self {
            listener,
            app: app(state),
            engine,
            limits,
        })
    }

    /// The address actually bound (port 0 picks a free one).
    ///
    /// # Panics
    /// Never for a bound TCP listener.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Serves until `shutdown` resolves; then stops accepting, answers waiters
    /// at once (503 `shutting-down`), lets other requests finish for up to a
    /// few seconds, and returns.
    ///
    /// # Errors
    /// When serving fails.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let stop = CancellationToken::new();
        let signal = {
            let (stop, engine) = (stop.clone(), self.engine.clone());
            async move {
                shutdown.await;
                engine.stop_waiting();
                stop.cancel();
            }
        };
        tokio::spawn(signal);
        let serve = server::serve(self.listener, self.app, self.limits, stop.clone());
        let grace = async {
            stop.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        };
        tokio::select! {
            result = serve => result?,
            () = grace => tracing::warn!("requests still running after the grace period; stopping anyway"),
        }
        self.engine.shutdown().await;
        tracing::info!("stopped");
        Ok(())
    }

    /// The engine, for tests that inspect waiters.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}
