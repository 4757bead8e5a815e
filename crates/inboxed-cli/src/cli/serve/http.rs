//! The HTTP side of `inboxed serve`, on axum: the operator's console at `/` (its own access
//! control in front of it), `/metrics` for Prometheus, `/health` (ready) and `/health/live`
//! for probes, with the bounds every daemon's server keeps. It answers from the start: until
//! the databases are connected, `/health` says what it waits for and `/metrics` has the
//! process's own series; then the full routes take over.

use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use tower::ServiceExt as _;

use crate::cli::AnyStore;
use crate::cli::daemon::Status;
use crate::cli::daemon::database::health_of_all;
use crate::cli::daemon::http::{bounded, json_response, live, metrics};

/// What the routes read: the database (or each tenant's, under its name) and the metrics
/// recorder.
pub(crate) struct Served {
    pub(crate) stores: Vec<(Option<String>, AnyStore)>,
    pub(crate) metrics: PrometheusHandle,
}

/// The full routes, set once the databases are connected.
#[derive(Debug, Clone, Default)]
pub(crate) struct Late(Arc<OnceLock<Router>>);

impl Late {
    pub(crate) fn set(&self, routes: Router) {
        let _ = self.0.set(routes);
    }
}

/// The server's routes: the full ones once [`Late::set`], meanwhile `/health` from `status`
/// (starting, and what it waits for), `/health/live` and `/metrics`; anything else answers
/// 503 until then.
pub(crate) fn router(late: Late, status: Status, recorder: PrometheusHandle) -> Router {
    let ready = move || async move {
        let (code, body) = status.ready().await;
        json_response(code, &body)
    };
    let starting = Router::new()
        .route("/health", get(ready.clone()))
        .route("/health/ready", get(ready))
        .route("/health/live", get(live))
        .route("/metrics", get(metrics).with_state(recorder))
        .fallback(|| async { (StatusCode::SERVICE_UNAVAILABLE, "starting: try /health\n") });
    let either = Router::new().fallback(move |request: Request| async move {
        let routes = late.0.get().cloned().unwrap_or_else(|| starting.clone());
        routes.oneshot(request).await.map_or_else(
            |never: std::convert::Infallible| match never {},
            IntoResponse::into_response,
        )
    });
    bounded(either)
}

/// The routes once the databases are connected: `/metrics`, `/health` (each database's, read
/// fresh), `/health/ready` (the same), `/health/live`, and the console's pages at `/` when it
/// is configured.
pub(crate) fn full(served: Arc<Served>, console: Option<Router>) -> Router {
    let mut router = Router::new()
        .route("/metrics", get(render))
        .route("/health", get(probe))
        .route("/health/ready", get(probe))
        .route("/health/live", get(live))
        .with_state(Arc::clone(&served));
    if let Some(console) = console {
        router = router.merge(console);
    }
    router.fallback(|| async { (StatusCode::NOT_FOUND, "try /, /metrics or /health\n") })
}

async fn render(State(served): State<Arc<Served>>) -> Response {
    metrics(State(served.metrics.clone())).await.into_response()
}

async fn probe(State(served): State<Arc<Served>>) -> Response {
    let (status, body) = health_of_all(&served.stores).await;
    json_response(status, &body)
}
