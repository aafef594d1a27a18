//! Builds the service: the Redis engine, the router with its layers, the
//! listener, and the run loop that stops gracefully.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use axum::{Extension, Router};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::config::Settings;
use crate::engine::{Engine, EngineParts, Keys, Store, StoreConfig, Subscriber, Waiters};
use crate::error::AppError;
use crate::openapi::{self, ApiDoc};
use crate::routes::{
    health, locks, problems, require_token, semaphores, AppParts, AppState, Auth, BodyLimit,
};

/// How long in-flight requests may take to finish after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The documented routes, without state or layers, and their OpenAPI document.
pub fn api_routes() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let guarded = OpenApiRouter::new()
        .merge(locks::router())
        .merge(semaphores::router())
        .layer(middleware::from_fn(require_token));
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(guarded)
        .merge(health::router())
        .split_for_parts()
}

/// The whole HTTP service over `state`: a plain function, so tests can drive it.
pub fn router(state: AppState) -> Router {
    let body_limit = state.settings.max_body_bytes;
    let deadline = state.settings.request_deadline();
    let auth = state.auth.clone();
    let document = bytes::Bytes::from(openapi::document_json_with_max_wait(
        state.settings.max_wait_ms,
    ));
    let (api, _) = api_routes();
    let routes = api
        .route(
            "/openapi.json",
            get(move || async move {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    document.clone(),
                )
            }),
        )
        .route("/docs", get(openapi::swagger_index))
        .route("/docs/", get(openapi::swagger_index))
        .route("/docs/{*file}", get(openapi::swagger_asset))
        .route("/problems/{slug}", get(problems::describe))
        .fallback(|| async { AppError::NotFound })
        .method_not_allowed_fallback(|| async { AppError::MethodNotAllowed })
        .with_state(state)
        // The one layer that needs the matched route runs inside the router.
        .layer(middleware::from_fn(record_metrics));
    // The others wrap the router once, rather than each of its routes.
    let service = ServiceBuilder::new()
        .layer(CatchPanicLayer::custom(|_| {
            AppError::Engine(crate::engine::Error::Protocol("panic".into())).into_response()
        }))
        .layer(TraceLayer::new_for_http().make_span_with(|req: &Request| {
            // Debug level: at the default `info` it costs nothing per request.
            // The route template is recorded later; paths carry lease ids,
            // which are never logged.
            tracing::debug_span!("request", method = %req.method(), route = tracing::field::Empty)
        }))
        .layer(Extension(auth))
        .layer(Extension(BodyLimit(body_limit)))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn(move |req: Request, next: Next| {
            enforce_deadline(deadline, req, next)
        }))
        .service(routes);
    Router::new().fallback_service(service)
}

/// Requests by route, method and status, and their duration.
async fn record_metrics(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let route = req.extensions().get::<MatchedPath>().cloned();
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    tracing::Span::current().record("route", route);
    let response = next.run(req).await;
    crate::telemetry::record_request(&method, route, response.status(), started.elapsed());
    response
}

/// No request runs longer than the longest wait plus the request timeout.
async fn enforce_deadline(deadline: Duration, req: Request, next: Next) -> Response {
    match tokio::time::timeout(deadline, next.run(req)).await {
        Ok(response) => response,
        Err(_) => AppError::Timeout.into_response(),
    }
}

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
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
    router: Router,
    engine: Engine,
    subscriber: JoinHandle<()>,
}

impl Application {
    /// Connects to Redis (lazily), subscribes to release events (waiting up to
    /// two seconds for the first subscription), and binds the listener.
    ///
    /// # Errors
    /// A bad Redis URL, or an address that cannot be bound.
    pub async fn build(settings: Settings) -> Result<Self, StartupError> {
        // rustls needs a crypto provider for rediss://; ring is the one built in.
        let _ = rustls::crypto::ring::default_provider().install_default();
        crate::telemetry::init_metrics();

        let store = Store::connect_lazy(&StoreConfig {
            url: settings.redis_url.clone(),
            call_timeout: settings.redis_timeout,
        })
        .map_err(StartupError::RedisUrl)?;
        let engine = Engine::new(EngineParts {
            store: store.clone(),
            keys: Keys::new(settings.key_prefix.clone()),
            waiters: Arc::new(Waiters::new(settings.max_waiters)),
            shutdown: CancellationToken::new(),
        });

        let ready = Arc::new(Notify::new());
        let subscribed = ready.clone().notified_owned();
        tokio::pin!(subscribed);
        subscribed.as_mut().enable();
        let subscriber = tokio::spawn(Subscriber::run(
            store.client().clone(),
            engine.keys.channel().to_owned(),
            engine.waiters.clone(),
            engine.shutdown.clone(),
            ready,
        ));
        if tokio::time::timeout(Duration::from_secs(2), subscribed)
            .await
            .is_err()
        {
            tracing::warn!("Redis does not answer yet; serving anyway (readyz says 503)");
        }

        let auth = Arc::new(Auth::new(&settings.api_tokens, &settings.admin_tokens));
        if auth.is_open() {
            tracing::warn!(
                "no BATON_API_TOKENS or BATON_ADMIN_TOKENS: anyone who can reach this service can take and force-release any lock"
            );
        }
        let listener = TcpListener::bind(&settings.listen)
            .await
            .map_err(|source| StartupError::Listen {
                addr: settings.listen.clone(),
                source,
            })?;
        tracing::info!(
            listen = %listener.local_addr().map_or_else(|_| settings.listen.clone(), |a| a.to_string()),
            redis = %settings.redis_url_redacted(),
            key_prefix = %settings.key_prefix,
            "baton is serving"
        );
        let state = AppState::new(AppParts {
            locks: engine.locks(),
            semaphores: engine.semaphores(),
            store,
            settings,
            auth,
        });
        Ok(Self {
            listener,
            router: router(state),
            engine,
            subscriber,
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
        let stop = self.engine.shutdown.clone();
        let signal = {
            let stop = stop.clone();
            async move {
                shutdown.await;
                stop.cancel();
            }
        };
        let listener = self.listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        // One service for all connections, not a copy of the router per connection.
        let serve =
            axum::serve(listener, self.router.into_make_service()).with_graceful_shutdown(signal);
        let grace = async {
            stop.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        };
        tokio::select! {
            result = std::future::IntoFuture::into_future(serve) => result?,
            () = grace => tracing::warn!("requests still running after the grace period; stopping anyway"),
        }
        stop.cancel();
        let _ = self.subscriber.await;
        tracing::info!("stopped");
        Ok(())
    }

    /// The engine, for tests that inspect waiters.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}
