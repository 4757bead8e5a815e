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
use metrics_exporter_prometheus::PrometheusHandle;
use tower::limit::ConcurrencyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use super::health::health_of_all;
use crate::cli::AnyStore;

/// Requests served at once; more wait for a slot.
const MAX_IN_FLIGHT: usize = 32;
/// One request, read to answered.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// What the routes read: the database (or each tenant's, under its name) and the metrics
/// recorder.
pub(crate) struct Served {
    pub(crate) stores: Vec<(Option<String>, AnyStore)>,
    pub(crate) metrics: PrometheusHandle,
}

/// The routes, with their bounds: `/metrics` and `/health`, and the console's pages at `/`
/// when it is configured.
pub(crate) fn router(served: Arc<Served>, console: Option<Router>) -> Router {
    let mut router = Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(probe))
        .with_state(Arc::clone(&served));
    if let Some(console) = console {
        router = router.merge(console);
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
    let (status, body) = health_of_all(&served.stores).await;
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{body}\n"),
    )
}
