//! `inboxed-bench memory`: the resident memory of a RabbitMQ → processor → PostgreSQL consumer
//! while it drains a queue, one message per transaction and in batches, against the same
//! process before it consumed anything. Linux only (`/proc/self/status`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lapin::options::ConfirmSelectOptions;
use lapin::{Connection, ConnectionProperties};

use inboxed_core::{ConsumerConfig, ConsumerName, Processor};

use crate::rabbitmq::{ACCOUNTS, Broker, batched, measure, through_inbox};
use crate::variants::{Credit, bench_store};

/// Resident memory of a consumer at steady state.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    broker: Broker,
    /// Messages per measurement.
    #[arg(long, default_value_t = 20_000)]
    messages: u64,
    /// The broker's prefetch (deliveries in flight) for both consumers.
    #[arg(long, default_value_t = 400)]
    prefetch: usize,
}

/// This process's resident set, in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

pub(crate) async fn run(server: &str, args: Args) -> anyhow::Result<()> {
    let store = bench_store(server, 32, ACCOUNTS).await?;
    let handler = Credit { accounts: ACCOUNTS };
    let processor = Processor::new(store, ConsumerName::new("bench")?, handler);
    processor.ensure_ready().await?;
    let conn = Connection::connect(&args.broker.amqp_url, ConnectionProperties::default()).await?;
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let prefetch = args.prefetch;
    let configs = [
        (
            "one message per transaction",
            ConsumerConfig::default().concurrency(prefetch),
        ),
        ("in batches", batched(prefetch)),
    ];
    println!(
        "{} messages per measurement, prefetch {prefetch}, RSS sampled every 50 ms",
        args.messages
    );
    println!();
    println!(
        "| consumer (in flight x batch) | RSS at its start (MiB) | median RSS while consuming (MiB) | \
         peak RSS (MiB) | peak - start (MiB) | msg/s |"
    );
    println!("|---|---|---|---|---|---|");
    for (label, config) in configs {
        // Sampled only while the consumer runs: the queue is filled before, and publishing
        // (the confirms of 20,000 messages) has a footprint of its own.
        let consuming = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (consuming, stop) = (consuming.clone(), stop.clone());
            tokio::spawn(async move {
                let mut samples = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    if consuming.load(Ordering::Relaxed) {
                        samples.push(rss_kib() as f64);
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                samples
            })
        };
        let (c, b) = (config.concurrency, config.batch_size);
        let before = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let rate = measure(
            &channel,
            &args.broker.amqp_url,
            args.messages,
            prefetch,
            |source, target| {
                before.store(rss_kib(), Ordering::Relaxed);
                consuming.store(true, Ordering::Relaxed);
                through_inbox(processor.clone(), source, config, target)
            },
        )
        .await?;
        consuming.store(false, Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        let samples = sampler.await?;
        let before = before.load(Ordering::Relaxed) as f64;
        let peak = samples.iter().copied().fold(before, f64::max);
        let mib = |kib: f64| kib / 1024.0;
        println!(
            "| {label} ({c} x {b}) | {:.1} | {:.1} | {:.1} | {:.1} | {rate:.0} |",
            mib(before),
            mib(crate::median(samples)),
            mib(peak),
            mib(peak - before)
        );
    }
    Ok(())
}
