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
use super::daemon::{Daemon, Shutdown, Status};
use super::database::redact;

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let shutdown = Shutdown::listen("relay")?;
    let s = args.resolve()?;
    let status = Status::default();
    let daemon = Daemon::start(s.metrics_addr, &status, &shutdown).await?;
    let schema = s.schema.clone().unwrap_or_else(|| {
        let is_pg = s.to.starts_with("postgres://") || s.to.starts_with("postgresql://");
        (if is_pg { "public" } else { "main" }).to_owned()
    });
    let connections = u32::try_from(s.concurrency)
        .unwrap_or(u32::MAX)
        .clamp(2, 64);
    let namespace = Some((schema.as_str(), s.table_prefix.as_str()));
    let open = || AnyStore::connect_in(&s.to, connections, namespace);
    let Some(store) = daemon.database(open, s.migrate).await else {
        return daemon
            .stopped(out, true, "relay stopped before it started")
            .await;
    };
    info!(from = %redact(&s.from), to = %redact(&s.to), consumer = %s.consumer, "relay starting");
    let mut started = true;
    let relayed = daemon.bounded(async {
        started = match store {
            AnyStore::Postgres(store) => relay(store, &s, &status, &shutdown).await,
            AnyStore::Sqlite(store) => relay(store, &s, &status, &shutdown).await,
            AnyStore::MySql(store) => relay(store, &s, &status, &shutdown).await,
        }?;
        Ok(())
    });
    let drained = relayed.await?;
    let said = match (started, drained) {
        (false, _) => "relay stopped before it started",
        (true, true) => "relay stopped; nothing in flight was left unacked",
        (true, false) => {
            "relay stopped at its shutdown bound; deliveries not yet stored go back to the broker"
        }
    };
    daemon.stopped(out, drained, said).await
}

async fn relay<S: InboxStore>(
    store: S,
    s: &Settings,
    status: &Status,
    shutdown: &Shutdown,
) -> anyhow::Result<bool> {
    let consumer = ConsumerName::new(&s.consumer).context("--consumer")?;
    let relay = InboxRelay::new(
        Inbox::new(store, consumer),
        InboxRelayConfig::default()
            .concurrency(s.concurrency)
            .batch_size(s.batch_size),
    );
    broker::relay_from(&relay, s, status, shutdown).await
}
