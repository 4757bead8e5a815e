//! `inboxed-bench batch`: `Processor::process_batch` at several batch sizes against the
//! processor one message per transaction, and against a consumer with no dedup at all that
//! commits once per message (the naive at-least-once consumer), in interleaved rounds.

use std::time::Duration;

use sqlx::PgPool;

use inboxed_core::{ConsumerName, Envelope, MessageId, Outcome, Processor, ProcessorConfig};
use inboxed_postgres::PgStore;

use crate::variants::{Credit, bench_store, business_only};

/// Batched processor against one message per transaction and against no dedup at all.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Concurrent workers (and pool size).
    #[arg(long, default_value_t = 8)]
    workers: usize,
    /// Batch sizes to measure (comma-separated), first deliveries with broker counts.
    #[arg(long, value_delimiter = ',', default_value = "10,100,1000")]
    sizes: Vec<usize>,
    /// Batch sizes to measure counted in the store (no broker counts; comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "100")]
    counted: Vec<usize>,
    /// Seconds per variant per round.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Rounds; each runs every variant once, in rotating order.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Accounts the business update spreads over (many, so that concurrent batches rarely
    /// wait on each other's rows).
    #[arg(long, default_value_t = 1_000_000)]
    accounts: i64,
    /// CI smoke run: batches of 100 only (broker counts), 1 s per variant, 3 rounds, 100,000
    /// accounts.
    #[arg(long)]
    quick: bool,
    /// Fail when the median ratio of batches of 100 (broker counts) to one message per
    /// transaction falls below this: a gross regression, far below the noise of a shared
    /// machine. `--quick` sets 2.0 unless given.
    #[arg(long)]
    min_ratio: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// `Processor::process`, one message per transaction.
    Single,
    /// `BEGIN; UPDATE; COMMIT` per message: at-least-once with no dedup.
    Naive,
    /// `Processor::process_batch_with_counts` with this many first deliveries.
    Batch(usize),
    /// `Processor::process_batch` with this many messages: counted in the store first.
    Counted(usize),
}

impl Variant {
    fn label(self) -> String {
        match self {
            Self::Single => "processor, 1 per tx".into(),
            Self::Naive => "no dedup, 1 per tx".into(),
            Self::Batch(n) => format!("batch N={n}, broker counts"),
            Self::Counted(n) => format!("batch N={n}, store counts"),
        }
    }
}

fn fresh(n: usize) -> Vec<Envelope> {
    (0..n)
        .map(|_| {
            let id = MessageId::from_uuid(uuid::Uuid::now_v7());
            Envelope::new(id, b"{\"credit\":1}".to_vec())
        })
        .collect()
}

/// The counters' table churns (a row inserted and deleted per message counted in the store):
/// vacuumed before each measurement, standing in for autovacuum, which may be off on the
/// benchmark server.
async fn vacuum(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::raw_sql("VACUUM inboxed_attempts")
        .execute(pool)
        .await?;
    Ok(())
}

async fn run_variant(
    processor: &Processor<PgStore, Credit>,
    pool: &PgPool,
    accounts: i64,
    variant: Variant,
    workers: usize,
    dur: Duration,
) -> anyhow::Result<f64> {
    let (processor, pool) = (processor.clone(), pool.clone());
    let (n, elapsed) = crate::load::for_duration(workers, dur, move || {
        let (processor, pool) = (processor.clone(), pool.clone());
        async move {
            Ok(match variant {
                Variant::Single => {
                    let env = &fresh(1)[0];
                    anyhow::ensure!(processor.process(env, Some(1)).await? == Outcome::Processed);
                    1
                }
                Variant::Naive => {
                    business_only(&pool, accounts).await?;
                    1
                }
                Variant::Batch(n) => {
                    let batch = fresh(n);
                    let counts = vec![Some(1); n];
                    for r in processor.process_batch_with_counts(&batch, &counts).await {
                        anyhow::ensure!(r? == Outcome::Processed);
                    }
                    n as u64
                }
                Variant::Counted(n) => {
                    let batch = fresh(n);
                    for r in processor.process_batch(&batch).await {
                        anyhow::ensure!(r? == Outcome::Processed);
                    }
                    n as u64
                }
            })
        }
    })
    .await?;
    Ok(n as f64 / elapsed)
}

pub(crate) async fn run(server: &str, mut args: Args) -> anyhow::Result<()> {
    if args.quick {
        (args.sizes, args.counted, args.seconds, args.accounts) = (vec![100], vec![], 1.0, 100_000);
        args.min_ratio = args.min_ratio.or(Some(2.0));
    }
    let store = bench_store(server, args.workers, args.accounts).await?;
    let pool = store.pool().clone();
    let handler = Credit {
        accounts: args.accounts,
    };
    let consumer = ConsumerName::new("bench")?;
    let processor = Processor::with_config(store, consumer, handler, ProcessorConfig::default());
    processor.ensure_ready().await?;
    // The seeding's dirty pages are flushed now rather than by a checkpoint in the middle of a
    // measurement, and one unmeasured pass of each variant warms the caches and the pool.
    sqlx::query("CHECKPOINT").execute(&pool).await?;
    let mut variants = vec![Variant::Single, Variant::Naive];
    variants.extend(args.sizes.iter().map(|&n| Variant::Batch(n)));
    variants.extend(args.counted.iter().map(|&n| Variant::Counted(n)));
    println!(
        "workers {}, {} s per variant, {} rounds, {} accounts",
        args.workers, args.seconds, args.rounds, args.accounts
    );
    for &v in &variants {
        let warm = Duration::from_secs_f64(args.seconds.min(1.0));
        run_variant(&processor, &pool, args.accounts, v, args.workers, warm).await?;
    }
    let mut rates: Vec<Vec<f64>> = Vec::new();
    for round in 0..args.rounds {
        let mut row = vec![0.0; variants.len()];
        for k in 0..variants.len() {
            let i = (k + round) % variants.len();
            let dur = Duration::from_secs_f64(args.seconds);
            vacuum(&pool).await?;
            row[i] = run_variant(
                &processor,
                &pool,
                args.accounts,
                variants[i],
                args.workers,
                dur,
            )
            .await?;
        }
        let line: Vec<String> = variants
            .iter()
            .zip(&row)
            .map(|(v, r)| format!("{} {r:.0}", v.label()))
            .collect();
        println!("round {}: {} msg/s", round + 1, line.join(", "));
        rates.push(row);
    }
    let med = |a: usize| crate::median(rates.iter().map(|r| r[a]).collect());
    let ratio = |a: usize, b: usize| crate::median(rates.iter().map(|r| r[a] / r[b]).collect());
    println!();
    println!("| variant | median msg/s | / processor, 1 per tx | / no dedup, 1 per tx |");
    println!("|---|---|---|---|");
    for (i, v) in variants.iter().enumerate() {
        println!(
            "| {} | {:.0} | {:.2} | {:.2} |",
            v.label(),
            med(i),
            ratio(i, 0),
            ratio(i, 1)
        );
    }
    // Throughput against batch size: one message per transaction is the size-1 point of
    // both batched series; the consumer without dedup is a flat line for comparison.
    let sizes = |v: &Variant| match v {
        Variant::Batch(n) | Variant::Counted(n) => *n as f64,
        _ => 1.0,
    };
    for (i, v) in variants.iter().enumerate() {
        let series = match v {
            Variant::Single => {
                crate::plot::point("batch-size", "batch, broker counts", 1.0, med(i));
                "batch, store counts"
            }
            Variant::Batch(_) => "batch, broker counts",
            Variant::Counted(_) => "batch, store counts",
            Variant::Naive => continue,
        };
        crate::plot::point("batch-size", series, sizes(v), med(i));
    }
    let largest = variants.iter().map(sizes).fold(1.0, f64::max);
    for x in [1.0, largest] {
        crate::plot::point("batch-size", "no dedup, 1 per tx", x, med(1));
    }
    if let Some(min) = args.min_ratio {
        // The first batched variant against one message per transaction.
        let at = variants.iter().position(|v| matches!(v, Variant::Batch(_)));
        let got = at.map_or(0.0, |i| ratio(i, 0));
        anyhow::ensure!(
            got >= min,
            "batched / one per transaction = {got:.2}, below {min}: a regression"
        );
        println!("batched / one per transaction = {got:.2} (at least {min}): ok");
    }
    Ok(())
}
