//! The daemons' HTTP side on axum: `/metrics` for Prometheus, `/health` (ready) and
//! `/health/live` for a supervisor's or a load balancer's probes, each request bounded in time
//! and the requests in flight bounded in number, so that a client that trickles its request or
//! a crowd of them cannot hold the process.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::json;
use tower::limit::ConcurrencyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use super::status::Status;

/// Requests served at once; more wait for a slot.
const MAX_IN_FLIGHT: usize = 32;
/// One request, read to answered; also how long requests in flight may take to finish once
/// the server stops.
pub(crate) const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// `router` with the bounds every daemon's server keeps.
pub(crate) fn bounded(router: Router) -> Router {
    router
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_DEADLINE,
        ))
        .layer(ConcurrencyLimitLayer::new(MAX_IN_FLIGHT))
}

/// `/metrics` from `metrics`.
pub(crate) async fn metrics(State(metrics): State<PrometheusHandle>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        metrics.render(),
    )
}

/// `/health/live`: answered at all, the process's runtime turns; an outage of the database or
/// the broker keeps it live (and unready), so that a supervisor does not restart a daemon that
/// is waiting out an outage.
pub(crate) async fn live() -> Response {
    json_response(StatusCode::OK, &json!({ "status": "live" }))
}

/// `body` as a JSON answer with `code`.
pub(crate) fn json_response(code: StatusCode, body: &serde_json::Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{body}\n"),
    )
        .into_response()
}

/// A relay's server on `addr`: `/metrics`, `/health` (`status`'s readiness) and
/// `/health/live`, until `stopped` resolves (the relay has drained), not merely until the
/// signal: a probe sees `stopping` and a scrape the last counts while it drains.
pub(crate) async fn serve_relay(
    addr: SocketAddr,
    recorder: PrometheusHandle,
    status: Status,
    stopped: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let ready = {
        let status = status.clone();
        move || async move {
            let (code, body) = status.ready().await;
            json_response(code, &body)
        }
    };
    let router = Router::new()
        .route("/metrics", get(metrics).with_state(recorder))
        .route("/health", get(ready.clone()))
        .route("/health/ready", get(ready))
        .route("/health/live", get(live))
        .fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                "try /metrics, /health or /health/live\n",
            )
        });
    let router = bounded(router);
    Ok(tokio::spawn(async move {
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(stopped)
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the metrics and health server failed");
        }
    }))
}
