//! `inboxed serve`: Prometheus metrics derived from the database (backlog, oldest pending age,
//! expired leases, dead letters, processed keys) and a health check, over HTTP.

mod gauges;
mod http;

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde_json::json;
use tracing::{info, warn};

use inboxed_core::ConsumerName;

use super::AnyStore;
use super::database::DbArgs;
use super::duration::parse_duration;
use http::Response;

/// `inboxed serve`'s flags.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    db: DbArgs,
    /// Address to serve `/metrics` and `/health` on. Loopback by default: expose it on purpose.
    #[arg(long, env = "INBOXED_LISTEN", default_value = "127.0.0.1:9464")]
    listen: SocketAddr,
    /// How often the gauges are read from the database, e.g. 15s.
    #[arg(long, env = "INBOXED_INTERVAL", default_value = "15s", value_parser = parse_duration)]
    interval: Duration,
    /// Consumers whose processed keys (count, growth, oldest age, table bytes) are published
    /// too. Repeat for several; the store-then-process backlog covers every consumer anyway.
    #[arg(long = "consumer")]
    consumers: Vec<String>,
}

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let consumers = args
        .consumers
        .iter()
        .map(|c| ConsumerName::new(c.clone()))
        .collect::<Result<Vec<_>, _>>()
        .context("--consumer")?;
    let store = args.db.connect(4).await?;
    let handle = PrometheusBuilder::new()
        .install_recorder()
        .context("cannot install the metrics recorder")?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    writeln!(
        out,
        "serving http://{addr}/metrics and http://{addr}/health"
    )?;
    out.flush()?;
    info!(database = %args.db.shown_url(), %addr, "serving metrics and health");

    let refresh = tokio::spawn(refresh(store.clone(), consumers, args.interval));
    let state = Arc::new((store, handle));
    let server = http::serve(listener, move |path| {
        let state = Arc::clone(&state);
        async move { route(&path, &state.0, &state.1).await }
    });
    tokio::select! {
        () = server => {}
        _ = tokio::signal::ctrl_c() => info!("shutting down"),
    }
    refresh.abort();
    Ok(ExitCode::SUCCESS)
}

/// Reads the database every `interval` and sets the gauges; a failed read sets
/// `inboxed_observe_up` to 0 and is retried at the next interval.
async fn refresh(store: AnyStore, consumers: Vec<ConsumerName>, interval: Duration) {
    let mut published = gauges::Published::default();
    let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(100)));
    loop {
        ticker.tick().await;
        let started = Instant::now();
        let now = SystemTime::now();
        match store.observe().await {
            Ok(seen) => {
                published.set(&seen, now);
                metrics::gauge!(gauges::UP).set(1.0);
            }
            Err(e) => {
                warn!(error = %e, "could not read the inbox tables");
                metrics::gauge!(gauges::UP).set(0.0);
            }
        }
        for consumer in &consumers {
            match store.processed_stats(consumer).await {
                Ok(stats) => stats.publish(consumer, now),
                Err(e) => warn!(error = %e, consumer = %consumer, "could not read processed keys"),
            }
        }
        metrics::gauge!(gauges::OBSERVE_SECONDS).set(started.elapsed().as_secs_f64());
    }
}

async fn route(path: &str, store: &AnyStore, handle: &PrometheusHandle) -> Response {
    match path {
        "/metrics" => Response::new(200, "text/plain; version=0.0.4", handle.render()),
        "/health" => health(store).await,
        _ => Response::new(404, "text/plain", "try /metrics or /health\n".to_owned()),
    }
}

/// How long `/health` waits for the database before saying it is down.
const HEALTH_DEADLINE: Duration = Duration::from_secs(5);

/// 200 when the database answers and its migrations are current (`degraded` if claims with
/// expired leases wait for a reaper); 503 otherwise. Read fresh on each request.
async fn health(store: &AnyStore) -> Response {
    let checked = tokio::time::timeout(HEALTH_DEADLINE, async {
        // Migrations first: on tables never migrated, the observation itself would fail.
        let pending = store.pending_migrations().await?;
        if !pending.is_empty() {
            return Ok((pending, None));
        }
        Ok::<_, anyhow::Error>((pending, Some(store.observe().await?)))
    })
    .await
    .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer within {HEALTH_DEADLINE:?}")));
    let (status, body) = match checked {
        Err(e) => (
            503,
            json!({ "status": "down", "database": format!("{e:#}") }),
        ),
        Ok((pending, None)) => (
            503,
            json!({ "status": "down", "database": "ok", "migrations_pending": pending }),
        ),
        Ok((_, Some(seen))) => {
            let stale: u64 = seen.backlog.iter().map(|b| b.expired_leases).sum();
            let status = if stale > 0 { "degraded" } else { "ok" };
            (
                200,
                json!({ "status": status, "database": "ok", "migrations": "current",
                        "expired_leases": stale }),
            )
        }
    };
    Response::new(status, "application/json", format!("{body}\n"))
}
