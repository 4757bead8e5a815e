//! What the long-running commands (`relay`, `outbox relay`, `serve`) share to run under a
//! supervisor: they stop on SIGTERM and SIGINT within a stated bound ([`signal`]), wait for a
//! database or broker that is not up yet ([`wait`]), and answer `/health` and `/metrics`
//! ([`http`], [`status`]).

mod broker;
pub(crate) mod database;
pub(crate) mod http;
mod signal;
mod status;
mod wait;

use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::warn;

use crate::cli::AnyStore;

pub(crate) use broker::Broker;
pub(crate) use signal::Shutdown;
pub(crate) use status::Status;
pub(crate) use wait::until_up;

/// Installs this process's Prometheus recorder, every histogram with its buckets
/// ([`inboxed_core::metrics::HISTOGRAM_BUCKETS`]): no summaries, which cannot be added up
/// across replicas.
pub(crate) fn recorder() -> anyhow::Result<PrometheusHandle> {
    builder()?
        .install_recorder()
        .context("cannot install the metrics recorder")
}

/// The exporter's settings: every histogram with its buckets.
fn builder() -> anyhow::Result<PrometheusBuilder> {
    let mut builder = PrometheusBuilder::new();
    for (name, buckets) in inboxed_core::metrics::HISTOGRAM_BUCKETS {
        builder = builder.set_buckets_for_metric(Matcher::Full((*name).to_owned()), buckets)?;
    }
    Ok(builder)
}

/// How long a relay may take to drain after the first signal before the process exits anyway
/// (status 1): the library's own bounds come first (10 s for an in-order delivery being
/// stored, `OutboxRelayConfig::shutdown_grace`'s 10 s for an outbox batch being published),
/// and what is still
/// held at this one is not lost: a delivery not acked goes back to its broker, an outbox row
/// not marked is published again under the same id.
pub(crate) const DRAIN_BOUND: Duration = Duration::from_secs(30);

/// A relay's frame: its metrics and health server (with `--metrics-addr`), marked unready at
/// the first signal and kept answering until the relay has drained, and the bound on the drain.
#[derive(Debug)]
pub(crate) struct Daemon {
    shutdown: Shutdown,
    status: Status,
    stop_server: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

impl Daemon {
    /// Starts the server on `addr` when there is one, before anything connects: a probe sees
    /// `starting` and what the daemon waits for.
    pub(crate) async fn start(
        addr: Option<SocketAddr>,
        status: &Status,
        shutdown: &Shutdown,
    ) -> anyhow::Result<Self> {
        tokio::spawn({
            let (status, requested) = (status.clone(), shutdown.requested());
            async move {
                requested.await;
                status.stopping();
            }
        });
        let (stop_server, server) = match addr {
            Some(addr) => {
                let (tx, rx) = oneshot::channel::<()>();
                let stopped = async move {
                    let _ = rx.await;
                };
                let server = http::serve_relay(addr, recorder()?, status.clone(), stopped).await?;
                (Some(tx), Some(server))
            }
            None => (None, None),
        };
        Ok(Self {
            shutdown: shutdown.clone(),
            status: status.clone(),
            stop_server,
            server,
        })
    }

    /// The database `open` connects to, waited for while it is not up, its tables brought up
    /// to date first with `migrate`; `/health` checks it from then on. `None` when a stop came
    /// first.
    pub(crate) async fn database<F, Fut>(&self, open: F, migrate: bool) -> Option<AnyStore>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<AnyStore>>,
    {
        let (status, shutdown) = (&self.status, &self.shutdown);
        let store = until_up("the database", status, shutdown, open).await?;
        if migrate {
            until_up("the migrations", status, shutdown, || store.migrate()).await?;
        }
        status.database(store.clone());
        Some(store)
    }

    /// Runs `work` (which stops on its own at the signal) until it ends: `true`, or `false`
    /// when it was still draining [`DRAIN_BOUND`] after the signal and was dropped.
    pub(crate) async fn bounded(
        &self,
        work: impl Future<Output = anyhow::Result<()>>,
    ) -> anyhow::Result<bool> {
        let bound = {
            let requested = self.shutdown.requested();
            async move {
                requested.await;
                tokio::time::sleep(DRAIN_BOUND).await;
            }
        };
        tokio::select! {
            done = work => done.map(|()| true),
            () = bound => {
                warn!(bound = ?DRAIN_BOUND, "still draining at the shutdown bound: exiting; what is held goes back to the broker or is published again");
                Ok(false)
            }
        }
    }

    /// Stops the server (its requests in flight get their deadline) and reports `message`:
    /// exit status 0 when the drain finished, 1 when the bound cut it short.
    pub(crate) async fn stopped(
        mut self,
        out: &mut impl Write,
        drained: bool,
        message: &str,
    ) -> anyhow::Result<ExitCode> {
        if let Some(stop) = self.stop_server.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = tokio::time::timeout(http::REQUEST_DEADLINE, server).await;
        }
        writeln!(out, "{message}")?;
        Ok(if drained {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

#[cfg(test)]
mod tests {
    /// Every histogram the library records renders as buckets, none as a summary.
    #[test]
    fn histograms_are_exported_with_buckets() {
        let recorder = super::builder().unwrap().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            for (name, _) in inboxed_core::metrics::HISTOGRAM_BUCKETS {
                metrics::histogram!(*name).record(0.2);
            }
        });
        let text = handle.render();
        for (name, buckets) in inboxed_core::metrics::HISTOGRAM_BUCKETS {
            assert!(
                text.contains(&format!("# TYPE {name} histogram")),
                "{name} is not a histogram:\n{text}"
            );
            assert_eq!(
                text.matches(&format!("{name}_bucket{{")).count(),
                buckets.len() + 1,
                "{name}'s buckets and +Inf:\n{text}"
            );
        }
        assert!(!text.contains("quantile="), "{text}");
    }
}
