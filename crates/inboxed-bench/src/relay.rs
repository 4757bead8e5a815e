//! `inboxed-bench relay`: deliveries per second the relay stores from RabbitMQ into the inbox
//! table (store, commit, ack; no worker), with `inboxed relay`'s defaults (prefetch 512, four
//! batches of up to 128 in flight, each stored with `Inbox::store_many`), against the relay as
//! it was before batches (prefetch 32, 32 deliveries in flight, each stored with
//! `Inbox::store` in a transaction of its own), measured in the same run, interleaved.

use std::time::Duration;

use lapin::options::ConfirmSelectOptions;
use lapin::{Connection, ConnectionProperties};

use inboxed_core::ConsumerName;
use inboxed_core::inbox::{Inbox, InboxRelay, InboxRelayConfig};
use inboxed_postgres::PgStore;

use crate::rabbitmq::{Broker, measure};

/// The relay's batch receipt against one store per delivery.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    broker: Broker,
    /// Messages per measurement: enough that the relay's start and its last batch's linger
    /// are a small part of it (at 10,000 the batched relay measured 3.5 times the single path
    /// where 40,000 measured 5).
    #[arg(long, default_value_t = 40_000)]
    messages: u64,
    /// Rounds; each measures both relays.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The batched relay's prefetch, instead of the CLI's default (to compare).
    #[arg(long, default_value_t = 512)]
    prefetch: usize,
    /// The batched relay's batch size, instead of the default (to compare).
    #[arg(long)]
    batch_size: Option<usize>,
    /// The batched relay's batches in flight, instead of the default (to compare).
    #[arg(long)]
    concurrency: Option<usize>,
}

/// Database connections of the relay (the CLI's pool for the relay is as large).
const POOL: usize = 32;

/// The processes that share the machine's cores in this measurement.
const PROCESSES: &[&str] = &["inboxed-bench", "beam.smp", "postgres"];

/// A relay configuration under test: its name, prefetch and settings.
struct Variant<'a> {
    name: &'a str,
    prefetch: usize,
    config: InboxRelayConfig,
}

pub(crate) async fn run(server: &str, args: Args) -> anyhow::Result<()> {
    let store = crate::variants::bench_store(server, POOL, 1).await?;
    let conn = Connection::connect(&args.broker.amqp_url, ConnectionProperties::default()).await?;
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let mut batched = InboxRelayConfig::default();
    if let Some(n) = args.batch_size {
        batched = batched.batch_size(n);
    }
    if let Some(n) = args.concurrency {
        batched = batched.concurrency(n);
    }
    let label = format!(
        "batches of up to {}, {} at once, prefetch {}{}",
        batched.batch_size,
        batched.concurrency,
        args.prefetch,
        if args.batch_size.is_none() && args.concurrency.is_none() && args.prefetch == 512 {
            " (the defaults)"
        } else {
            ""
        }
    );
    let variants = [
        Variant {
            name: "one store per delivery, 32 at once, prefetch 32 (before batches)",
            prefetch: 32,
            config: InboxRelayConfig::default().batch_size(1).concurrency(32),
        },
        Variant {
            name: &label,
            prefetch: args.prefetch,
            config: batched,
        },
    ];
    println!(
        "- {} persistent messages per measurement on a durable classic queue, {} rounds, {POOL} database connections; each relay runs until every message is a row",
        args.messages, args.rounds
    );
    let mut rates = vec![Vec::new(); variants.len()];
    let mut ratios = Vec::new();
    for round in 1..=args.rounds {
        let mut line = format!("- round {round}:");
        let mut cpu = Vec::new();
        for (i, v) in variants.iter().enumerate() {
            sqlx::raw_sql("TRUNCATE inboxed_inbox_messages RESTART IDENTITY")
                .execute(store.pool())
                .await?;
            let rate = measure(
                &channel,
                &args.broker.amqp_url,
                args.messages,
                v.prefetch,
                |source, target| {
                    let (store, config, cpu) = (store.clone(), v.config.clone(), &mut cpu);
                    async move {
                        cpu.push(relay_until(store, config, source, target).await?);
                        Ok(())
                    }
                },
            )
            .await?;
            rates[i].push(rate);
            line.push_str(&format!(" {} {rate:.0} msg/s;", v.name));
        }
        ratios.push(rates[1][round - 1] / rates[0][round - 1]);
        println!("{}", line.trim_end_matches(';'));
        println!(
            "- round {round}, CPU per message: one by one {}; batched {}",
            cpu.first().map_or("", String::as_str),
            cpu.get(1).map_or("", String::as_str)
        );
    }
    println!();
    println!("| relay | msg/s (median) | / before batches (median of rounds) |");
    println!("|---|---|---|");
    println!(
        "| {} | {:.0} | 1.00 |",
        variants[0].name,
        crate::median(rates[0].clone())
    );
    println!(
        "| {} | {:.0} | {:.2} |",
        variants[1].name,
        crate::median(rates[1].clone()),
        crate::median(ratios)
    );
    Ok(())
}

/// Runs the relay on `source` until `target` rows are stored; the CPU time per message of the
/// processes on the machine's cores while it ran.
async fn relay_until(
    store: PgStore,
    config: InboxRelayConfig,
    source: inboxed_rabbitmq::RabbitSource,
    target: u64,
) -> anyhow::Result<String> {
    let pool = store.pool().clone();
    let inbox = Inbox::new(store, ConsumerName::new("bench")?).notify(false);
    let relay = InboxRelay::new(inbox, config);
    let target = i64::try_from(target)?;
    // Row ids count from 1 after the truncation and nothing rolls back, so the highest id is
    // the number stored: one index probe, where a count would scan the table (and take a good
    // part of a core from the relay it measures).
    let stored = async move {
        loop {
            let n: i64 =
                sqlx::query_scalar("SELECT coalesce(max(id), 0) FROM inboxed_inbox_messages")
                    .fetch_one(&pool)
                    .await
                    .unwrap_or(0);
            if n >= target {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let before = crate::cpu::Cpu::read(PROCESSES);
    relay.run(source, stored).await?;
    let after = crate::cpu::Cpu::read(PROCESSES);
    Ok(before.per_message(&after, u64::try_from(target)?))
}
