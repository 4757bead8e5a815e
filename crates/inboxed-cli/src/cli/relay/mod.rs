//! `inboxed relay`: a broker's messages into the store-then-process inbox table (store,
//! commit, ack), for services that process the rows themselves (docs/inbox-contract.md).

mod broker;
mod settings;

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use tracing::info;

use inboxed_core::ConsumerName;
use inboxed_core::inbox::{Inbox, InboxRelay, InboxRelayConfig, InboxStore};

use settings::Settings;
pub(crate) use settings::{Args, parse_key};

use super::AnyStore;
use super::database::redact;

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let s = args.resolve()?;
    if let Some(addr) = s.metrics_addr {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(addr)
            .install()
            .with_context(|| format!("cannot serve metrics on {addr}"))?;
    }
    let schema = s.schema.clone().unwrap_or_else(|| {
        let is_pg = s.to.starts_with("postgres://") || s.to.starts_with("postgresql://");
        (if is_pg { "public" } else { "main" }).to_owned()
    });
    let store = AnyStore::connect_in(
        &s.to,
        u32::try_from(s.concurrency)
            .unwrap_or(u32::MAX)
            .clamp(2, 64),
        Some((&schema, &s.table_prefix)),
    )
    .await?;
    if s.migrate {
        store.migrate().await?;
    }
    info!(from = %redact(&s.from), to = %redact(&s.to), consumer = %s.consumer, "relay starting");
    match store {
        AnyStore::Postgres(store) => relay(store, &s).await?,
        AnyStore::Sqlite(store) => relay(store, &s).await?,
        AnyStore::MySql(store) => relay(store, &s).await?,
    }
    writeln!(out, "relay stopped; nothing in flight was left unacked")?;
    Ok(ExitCode::SUCCESS)
}

async fn relay<S: InboxStore>(store: S, s: &Settings) -> anyhow::Result<()> {
    let consumer = ConsumerName::new(&s.consumer).context("--consumer")?;
    let relay = InboxRelay::new(
        Inbox::new(store, consumer),
        InboxRelayConfig::default()
            .concurrency(s.concurrency)
            .batch_size(s.batch_size),
    );
    broker::relay_from(&relay, s, shutdown_signal()).await
}

/// Ctrl-C or SIGTERM: the relay then settles what it holds and stops.
pub(crate) async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = async {
            match term.as_mut() {
                Some(t) => { t.recv().await; }
                None => std::future::pending::<()>().await,
            }
        } => {}
    }
    info!("shutting down: settling deliveries in flight");
}
