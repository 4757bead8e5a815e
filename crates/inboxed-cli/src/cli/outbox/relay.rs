//! `inboxed outbox relay`: an [`OutboxRelay`] over the database's outbox and a broker's
//! publisher, with the settings of [`settings`](super::settings).

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, bail};
use tracing::info;

use inboxed_core::outbox::store::OutboxStore;
use inboxed_core::outbox::{OutboxRelay, Publisher};
use inboxed_rabbitmq::{RabbitPublisher, RabbitPublisherConfig};

use super::settings::{Args, Settings};
use crate::cli::AnyStore;
use crate::cli::database::redact;

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let s = args.resolve()?;
    if let Some(addr) = s.metrics_addr {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(addr)
            .install()
            .with_context(|| format!("cannot serve metrics on {addr}"))?;
    }
    let is_pg = s.database.starts_with("postgres://") || s.database.starts_with("postgresql://");
    let schema = s
        .schema
        .clone()
        .unwrap_or_else(|| (if is_pg { "public" } else { "main" }).to_owned());
    // The claim loops, the reaper's pass and the listener.
    let connections = u32::try_from(s.relay.concurrency + 2).unwrap_or(u32::MAX);
    let store =
        AnyStore::connect_in(&s.database, connections, Some((&schema, &s.table_prefix))).await?;
    if s.migrate {
        store.migrate().await?;
    }
    let publisher = publisher(&s).await?;
    info!(database = %redact(&s.database), broker = %redact(&s.broker), "outbox relay starting");
    match store {
        AnyStore::Postgres(store) => relay(store, publisher, &s).await,
        AnyStore::Sqlite(store) => relay(store, publisher, &s).await,
    }?;
    writeln!(out, "outbox relay stopped")?;
    Ok(ExitCode::SUCCESS)
}

async fn publisher(s: &Settings) -> anyhow::Result<RabbitPublisher> {
    if !(s.broker.starts_with("amqp://") || s.broker.starts_with("amqps://")) {
        bail!(
            "--broker {}: the outbox relay publishes to RabbitMQ (amqp:// or amqps://) so far",
            redact(&s.broker)
        );
    }
    let mut config = RabbitPublisherConfig::new(&s.broker);
    config.routes.clone_from(&s.routes);
    config.tls_ca_file.clone_from(&s.tls_ca_file);
    RabbitPublisher::connect(config)
        .await
        .context("cannot reach the broker")
}

async fn relay<S: OutboxStore, P: Publisher>(
    store: S,
    publisher: P,
    s: &Settings,
) -> anyhow::Result<()> {
    let relay = OutboxRelay::new(store, publisher, s.relay.clone());
    info!(relay = relay.id(), "outbox relay running");
    relay.run(crate::cli::relay::shutdown_signal()).await?;
    Ok(())
}
