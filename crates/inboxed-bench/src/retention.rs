//! `inboxed-bench retention`: the hot path's latency under a steady load with and without a
//! concurrent purge of expired keys, the purge's rate at its default settings, and the time to
//! detach and drop a partition of expired keys, all in one run.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use sqlx::postgres::PgPoolOptions;
use sqlx::{AssertSqlSafe, PgPool};

use inboxed_core::retention::{PartitionConfig, Purger, PurgerConfig, Retention, RetentionStore};
use inboxed_core::{ConsumerName, Envelope, MessageId, Processor, Store};
use inboxed_postgres::PgStore;

use crate::variants::{Credit, create_accounts};

/// Purge and partition drop against the hot path.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Expired keys to purge, and rows in the partition dropped.
    #[arg(long, default_value_t = 1_000_000)]
    expired: i64,
    /// Processor workers of the load.
    #[arg(long, default_value_t = 8)]
    workers: usize,
    /// Seconds of the unpaced run that finds the workers' maximum rate.
    #[arg(long, default_value_t = 3.0)]
    probe_seconds: f64,
    /// Seconds of the idle (no purge) latency run.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Purge batch size (default: the purger's default).
    #[arg(long, default_value_t = PurgerConfig::default().batch_size)]
    batch_size: u32,
    /// Pause between purge batches in milliseconds (default: the purger's default).
    #[arg(long, default_value_t = u64::try_from(PurgerConfig::default().pause.as_millis()).unwrap_or(0))]
    pause_ms: u64,
    /// Rounds of (load alone, load during a purge), each purging a fresh seed of expired
    /// keys; the ratio reported is the median of the rounds' ratios, since one stall in a
    /// ten-second window moves a p99.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Skip the partition drop.
    #[arg(long)]
    no_partitions: bool,
}

const DAY: Duration = Duration::from_secs(86_400);

pub(crate) async fn run(server: &str, args: Args) -> anyhow::Result<()> {
    let url = crate::fresh_database(server).await?;
    let pool = PgPoolOptions::new()
        .max_connections(u32::try_from(args.workers).unwrap_or(8) + 4)
        .connect(&url)
        .await?;
    create_accounts(&pool, 10_000).await?;
    let store = PgStore::new(pool.clone());
    store.migrate().await?;
    let consumer = ConsumerName::new("bench")?;
    let processor = Processor::new(store.clone(), consumer.clone(), Credit { accounts: 10_000 });
    processor.ensure_ready().await?;

    let max = load(
        &processor,
        args.workers,
        None,
        secs(args.probe_seconds),
        None,
    )
    .await?;
    let max_rate = max.len() as f64 / args.probe_seconds;
    let rate = max_rate / 2.0;
    println!(
        "{} workers; maximum {max_rate:.0} msg/s; load at half: {rate:.0} msg/s",
        args.workers
    );
    let purger = Purger::new(store.clone(), purger_config(&args))
        .consumer(consumer.clone(), Retention::new(30 * DAY, 7 * DAY))?;
    let mut rounds = Vec::new();
    for round in 1..=args.rounds {
        seed_expired(&pool, "inboxed_processed_messages", args.expired).await?;
        let r = purge_round(&processor, &purger, &args, rate).await?;
        println!(
            "round {round}: alone p50 {:.2} / p99 {:.2} ms; during the purge p50 {:.2} / p99 {:.2} ms; \
             ratio {:.2}; purged {} keys at {:.0} keys/s",
            r.idle.0,
            r.idle.1,
            r.during.0,
            r.during.1,
            r.ratio(),
            r.purged,
            r.rate
        );
        rounds.push(r);
    }
    let mut ratios: Vec<f64> = rounds.iter().map(Round::ratio).collect();
    ratios.sort_by(f64::total_cmp);
    let mut rates: Vec<f64> = rounds.iter().map(|r| r.rate).collect();
    rates.sort_by(f64::total_cmp);
    println!();
    println!(
        "p99 during purge / p99 alone, median of {} rounds: {:.2} (goal <= 1.5; rounds {:.2} to {:.2})",
        ratios.len(),
        median(&ratios),
        ratios.first().copied().unwrap_or_default(),
        ratios.last().copied().unwrap_or_default()
    );
    println!(
        "purge rate, median: {:.0} keys/s at batch {}, pause {} ms (goal >= 50,000)",
        median(&rates),
        args.batch_size,
        args.pause_ms
    );
    if args.no_partitions {
        return Ok(());
    }

    let parted = PgStore::new(pool.clone()).partitioned(PartitionConfig::default());
    parted.migrate().await?;
    sqlx::raw_sql(
        "CREATE TABLE inboxed_processed_log_old PARTITION OF inboxed_processed_log
         FOR VALUES FROM ((floor(extract(epoch FROM now() - interval '42 days')) - 1577836800)::int)
                     TO ((floor(extract(epoch FROM now() - interval '39 days')) - 1577836800)::int)",
    )
    .execute(&pool)
    .await?;
    seed_expired(&pool, "inboxed_processed_log", args.expired).await?;
    let on_parted = Processor::new(
        parted.clone(),
        consumer.clone(),
        Credit { accounts: 10_000 },
    );
    let done = Arc::new(AtomicBool::new(false));
    let dropping = {
        let (done, parted, windows) = (done.clone(), parted.clone(), vec![(consumer, 30 * DAY)]);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await; // under load
            let started = Instant::now();
            let report = parted
                .maintain_partitions(SystemTime::now(), &windows)
                .await;
            let took = started.elapsed();
            done.store(true, Ordering::Relaxed);
            report.map(|r| (r.dropped, r.longest_drop, took))
        })
    };
    let loaded = load(
        &on_parted,
        args.workers,
        Some(rate),
        Duration::MAX,
        Some(done),
    )
    .await?;
    let (dropped, drop, took) = dropping.await??;
    println!(
        "partition of {} expired keys detached (CONCURRENTLY) and dropped in {:.1} ms ({dropped} dropped; goal < 100 ms); whole maintenance pass {:.1} ms; under {} msg/s of claims (p99 {:.2} ms)",
        args.expired,
        drop.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e3,
        rate as u64,
        pct(&loaded, 0.99)
    );
    Ok(())
}

fn purger_config(args: &Args) -> PurgerConfig {
    PurgerConfig::default()
        .batch_size(args.batch_size)
        .pause(Duration::from_millis(args.pause_ms))
}

/// One round: the paced load alone, then the same load while a pass purges the seeded keys.
struct Round {
    idle: (f64, f64),
    during: (f64, f64),
    purged: u64,
    rate: f64,
}

impl Round {
    fn ratio(&self) -> f64 {
        self.during.1 / self.idle.1
    }
}

async fn purge_round(
    processor: &Processor<PgStore, Credit>,
    purger: &Purger<PgStore>,
    args: &Args,
    rate: f64,
) -> anyhow::Result<Round> {
    let idle = load(
        processor,
        args.workers,
        Some(rate),
        secs(args.seconds),
        None,
    )
    .await?;
    let done = Arc::new(AtomicBool::new(false));
    let purging = {
        let (done, purger) = (done.clone(), purger.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let report = purger.purge_once(SystemTime::now(), |_, _| {}).await;
            done.store(true, Ordering::Relaxed);
            report.map(|r| (r.total(), started.elapsed()))
        })
    };
    let during = load(
        processor,
        args.workers,
        Some(rate),
        Duration::MAX,
        Some(done),
    )
    .await?;
    let (purged, took) = purging.await??;
    Ok(Round {
        idle: (pct(&idle, 0.5), pct(&idle, 0.99)),
        during: (pct(&during, 0.5), pct(&during, 0.99)),
        purged,
        rate: purged as f64 / took.as_secs_f64(),
    })
}

fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// `n` keys of consumer `bench` received 40 days ago, in one statement, then analyzed and
/// checkpointed.
async fn seed_expired(pool: &PgPool, table: &str, n: i64) -> anyhow::Result<()> {
    let started = Instant::now();
    sqlx::raw_sql(AssertSqlSafe(format!(
        "INSERT INTO {table} (consumer_id, message_key, received_s)
         SELECT (SELECT id FROM inboxed_consumers WHERE name = 'bench'),
                inboxed_message_key('old-' || g),
                (floor(extract(epoch FROM now() - interval '40 days')) - 1577836800)::int - g / 1000
         FROM generate_series(1, {n}) g"
    )))
    .execute(pool)
    .await?;
    // The checkpoint writes out what seeding dirtied now, so that the runs measured next do not
    // pay for it (a checkpoint that fell into the idle run once made its p99 39 ms).
    sqlx::raw_sql(AssertSqlSafe(format!("VACUUM ANALYZE {table}")))
        .execute(pool)
        .await?;
    sqlx::raw_sql("CHECKPOINT").execute(pool).await?;
    println!(
        "seeded {n} expired keys into {table} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs `workers` tasks processing fresh messages, paced to `rate` msg/s in all when given,
/// for `dur` or until `until` is set. Returns each message's latency in milliseconds.
async fn load<S: Store>(
    processor: &Processor<S, Credit>,
    workers: usize,
    rate: Option<f64>,
    dur: Duration,
    until: Option<Arc<AtomicBool>>,
) -> anyhow::Result<Vec<f64>>
where
    Credit: inboxed_core::Handler<S::Db>,
{
    let end = Instant::now().checked_add(dur);
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (p, until) = (processor.clone(), until.clone());
        tasks.push(tokio::spawn(async move {
            // Each message has a scheduled send time; latency is counted from it, so a stall
            // that delays later sends shows in their latency instead of thinning the sample.
            let period = rate.map(|r| Duration::from_secs_f64(workers as f64 / r));
            let mut due = Instant::now();
            let mut lat = Vec::new();
            loop {
                let over = end.is_some_and(|e| Instant::now() >= e)
                    || until.as_ref().is_some_and(|u| u.load(Ordering::Relaxed));
                if over {
                    return Ok::<_, anyhow::Error>(lat);
                }
                let started = match period {
                    Some(every) => {
                        tokio::time::sleep_until(due.into()).await;
                        let scheduled = due;
                        due += every;
                        scheduled
                    }
                    None => Instant::now(),
                };
                let env = Envelope::new(MessageId::from_uuid(uuid::Uuid::now_v7()), b"{}".to_vec());
                p.process(&env, Some(1)).await?;
                lat.push(started.elapsed().as_secs_f64() * 1e3);
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    all.sort_by(f64::total_cmp);
    Ok(all)
}

/// The `q` quantile of sorted samples.
fn pct(sorted: &[f64], q: f64) -> f64 {
    sorted
        .get(((sorted.len() as f64 - 1.0) * q) as usize)
        .copied()
        .unwrap_or_default()
}
