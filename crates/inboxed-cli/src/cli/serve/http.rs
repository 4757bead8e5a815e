//! The HTTP side of `inboxed serve`, on axum: the operator's console at `/` (its own access
//! control in front of it),
//! `/metrics` for Prometheus and `/health` for a load balancer's probe, each request bounded in time and the requests in flight bounded in
//! number, so that a client that trickles its request or a crowd of them cannot hold the
//! process.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use inboxed_console::{Console, ConsoleConfig};
use metrics_exporter_prometheus::PrometheusHandle;
use tower::limit::ConcurrencyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use super::health::health;
use crate::cli::AnyStore;

/// Requests served at once; more wait for a slot.
const MAX_IN_FLIGHT: usize = 32;
/// One request, read to answered.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// What the routes read: the database and the metrics recorder.
pub(crate) struct Served {
    pub(crate) store: AnyStore,
    pub(crate) metrics: PrometheusHandle,
}

/// The routes, with their bounds: `/metrics` and `/health`, and the console's pages at `/`
/// when it is configured.
pub(crate) fn router(
    served: Arc<Served>,
    console: Option<(super::console::ServeStore, ConsoleConfig)>,
) -> Router {
    let mut router = Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(probe))
        .with_state(Arc::clone(&served));
    if let Some((store, config)) = console {
        router = router.merge(Console::new(store).with_config(config).router());
    }
    router
        .fallback(|| async { (StatusCode::NOT_FOUND, "try /, /metrics or /health\n") })
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_DEADLINE,
        ))
        .layer(ConcurrencyLimitLayer::new(MAX_IN_FLIGHT))
}

async fn metrics(State(served): State<Arc<Served>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        served.metrics.render(),
    )
}

async fn probe(State(served): State<Arc<Served>>) -> impl IntoResponse {
    let (status, body) = health(&served.store).await;
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{body}\n"),
    )
}
