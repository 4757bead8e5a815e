//! `inboxed-bench outbox`: the transactional outbox against what it adds to. In interleaved
//! rounds of one run:
//! - the relay's publish rate (its defaults) against raw confirmed publishing of the same
//!   messages through the same client library (lapin, async-nats), every message in flight
//!   before the confirmations are awaited;
//! - a handler that writes one outbox row beside its business update against the same handler
//!   without it, one message per transaction and in batches;
//! - commit-to-confirm latency: one outbox row a transaction at a steady rate, a relay with its
//!   defaults (woken by NOTIFY) publishing them, `sent_at - created_at` of each row.

mod handler;
mod latency;
mod publish;

use std::time::Duration;

use inboxed_core::inbox::ClaimMode;
use inboxed_core::outbox::OutboxRelayConfig;
use inboxed_postgres::PgStore;

use crate::rabbitmq::Broker;
use crate::variants::bench_store;

/// The outbox's relay, its write in a handler, and its latency, each against its baseline.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    broker: Broker,
    /// NATS server for the JetStream half of the publish comparison.
    #[arg(
        long,
        env = "INBOXED_NATS_URL",
        default_value = "nats://127.0.0.1:4222"
    )]
    nats_url: String,
    /// Messages per publish measurement.
    #[arg(long, default_value_t = 20_000)]
    messages: usize,
    /// Payload bytes of each message.
    #[arg(long, default_value_t = 256)]
    payload: usize,
    /// Concurrent workers of the handler measurement (and pool size).
    #[arg(long, default_value_t = 8)]
    workers: usize,
    /// Messages per batch of the batched handler measurement.
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Seconds per handler variant per round.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Outbox rows a second written for the latency measurement.
    #[arg(long, default_value_t = 1_000)]
    rate: u32,
    /// Seconds the latency measurement writes for.
    #[arg(long, default_value_t = 10.0)]
    latency_seconds: f64,
    /// Rounds; each measures every variant once, in rotating order.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Relay batch sizes to measure (comma-separated); the relay's other settings are its
    /// defaults.
    #[arg(long, value_delimiter = ',', default_value = "100,500,1000")]
    relay_batches: Vec<u32>,
    /// The relay's claim modes to measure, each at every batch size (comma-separated):
    /// lock-held (the default on PostgreSQL), lease.
    #[arg(long, value_delimiter = ',', default_value = "lock-held,lease")]
    claim_modes: Vec<String>,
    /// The relay's claim loops (default: the relay's own default).
    #[arg(long)]
    relay_concurrency: Option<usize>,
    /// The relay keeps no sent rows (`sent_retention` zero): it deletes each confirmed row in
    /// place of marking it sent.
    #[arg(long)]
    delete_sent: bool,
    /// Only these parts (comma-separated): publish, handler, latency. Default: all three.
    #[arg(long, value_delimiter = ',', default_value = "publish,handler,latency")]
    only: Vec<String>,
    /// The relay's batch size in the latency measurement (default: the relay's default).
    #[arg(long)]
    latency_batch: Option<u32>,
}

impl Args {
    /// The relay's config: its defaults, or the loops asked for.
    fn relay(&self) -> OutboxRelayConfig {
        let mut c = OutboxRelayConfig::default();
        if let Some(n) = self.relay_concurrency {
            c = c.concurrency(n);
        }
        if self.delete_sent {
            c = c.sent_retention(Some(Duration::ZERO));
        }
        c
    }

    /// The claim modes asked for, by name.
    fn modes(&self) -> anyhow::Result<Vec<(&str, ClaimMode)>> {
        self.claim_modes
            .iter()
            .map(|m| match m.as_str() {
                "lock-held" => Ok(("lock-held", ClaimMode::LockHeld)),
                "lease" => Ok(("lease", ClaimMode::Lease)),
                other => anyhow::bail!("--claim-modes: {other:?} is not lock-held or lease"),
            })
            .collect()
    }
}

pub(super) const ACCOUNTS: i64 = 100_000;
/// 1 while any row is unsent, else 0: asked of the pending and sending partial indexes, so
/// that polling it every few milliseconds does not read the whole table beside the relay it
/// times (a count did, and took a share of the machine's two cores from it).
pub(super) const UNSENT: &str = "SELECT (EXISTS (SELECT 1 FROM inboxed_outbox_messages \
     WHERE status = 'pending') OR EXISTS (SELECT 1 FROM inboxed_outbox_messages \
     WHERE status = 'sending'))::int::int8";

pub(crate) async fn run(server: &str, args: Args) -> anyhow::Result<()> {
    let store = bench_store(server, args.workers.max(8) + 4, ACCOUNTS).await?;
    println!(
        "{} messages of {} bytes per publish measurement, {} workers and batches of {} for the \
         handler, {} rows/s for {} s for the latency, {} rounds",
        args.messages,
        args.payload,
        args.workers,
        args.batch,
        args.rate,
        args.latency_seconds,
        args.rounds
    );
    let part = |name: &str| args.only.iter().any(|p| p == name);
    if part("publish") {
        publish::publish_rates(&store, &args).await?;
    }
    if part("handler") {
        tidy(&store).await?;
        handler::handler_cost(&store, &args).await?;
    }
    if part("latency") {
        tidy(&store).await?;
        latency::latency(&store, &args).await?;
    }
    Ok(())
}

/// Vacuums and analyzes the database and writes a checkpoint: what autovacuum (off on the
/// benchmark machine) and the checkpointer would have done between the measurements, so that
/// one part does not pay for the dead rows and the WAL of the one before.
async fn tidy(store: &PgStore) -> anyhow::Result<()> {
    // One statement each: several in one string run as one transaction, which VACUUM refuses.
    for sql in ["VACUUM ANALYZE", "CHECKPOINT"] {
        sqlx::raw_sql(sql).execute(store.pool()).await?;
    }
    Ok(())
}
