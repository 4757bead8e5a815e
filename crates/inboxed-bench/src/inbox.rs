//! `inboxed-bench inbox`: stored→done throughput of the store-then-process workers, against
//! bare claim-and-complete loops without a handler measured in the same run, and the pickup
//! latency from store to handler start with and without `NOTIFY` wake-ups.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::postgres::PgPoolOptions;
use sqlx::{AssertSqlSafe, PgConnection, PgPool, Postgres};

use inboxed_core::inbox::store::{ClaimBatchParams, ClaimToken, InboxRow, InboxStore};
use inboxed_core::inbox::{ClaimMode, Inbox, Worker, WorkerConfig};
use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, MessageId, Store};
use inboxed_postgres::PgStore;

/// Store-then-process throughput and pickup latency.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Worker counts to measure (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    workers: Vec<usize>,
    /// Batch sizes to measure (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,10,50,100,500")]
    batches: Vec<u32>,
    /// Seconds per variant per configuration.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Offered rate for the pickup-latency run, messages per second.
    #[arg(long, default_value_t = 1_000)]
    rate: u64,
    /// Seconds of the pickup-latency run.
    #[arg(long, default_value_t = 10.0)]
    latency_seconds: f64,
    /// CI smoke run: one configuration (4 workers, batch 50), 1 s each, only the lease worker
    /// with the batch handler and the bare two-transaction loop (what the gate compares), no
    /// latency run.
    #[arg(long)]
    quick: bool,
    /// Fail when the median lease worker (batch handler) / bare ratio falls below this: a gross regression, far
    /// below the noise of a shared machine. `--quick` sets 0.5 unless given.
    #[arg(long)]
    min_ratio: Option<f64>,
}

const ACCOUNTS: i64 = 1_000_000;
const UPDATE: &str = "UPDATE bench_accounts SET balance = balance + 1 WHERE id = $1";

/// Send times by message id, and the pickup latencies measured so far.
type Pickups = Arc<Mutex<(HashMap<String, Instant>, Vec<Duration>)>>;

/// Credits a batch's accounts with one statement: `count(*)` folds an account drawn twice.
const UPDATE_BATCH: &str = "UPDATE bench_accounts a SET balance = a.balance + d.n
    FROM (SELECT id, count(*) AS n FROM unnest($1::bigint[]) AS u(id) GROUP BY id) d
    WHERE a.id = d.id";

/// The business change: credit one account.
struct Credit {
    started: Option<Pickups>,
    /// Overrides `handle_batch` with one set-based statement for the whole batch.
    batched: bool,
}

impl Handler<Postgres> for Credit {
    const BATCHES: bool = true;

    async fn handle(&self, msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        if let Some(lat) = &self.started {
            let mut guard = lat
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(sent) = guard.0.remove(msg.id().as_str()) {
                guard.1.push(sent.elapsed());
            }
        }
        sqlx::query(UPDATE)
            .bind(fastrand::i64(0..ACCOUNTS))
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    async fn handle_batch(
        &self,
        msgs: &[&Envelope],
        conn: &mut PgConnection,
    ) -> Result<(), HandlerError> {
        if !self.batched {
            for msg in msgs {
                self.handle(msg, conn).await?;
            }
            return Ok(());
        }
        let accounts: Vec<i64> = msgs.iter().map(|_| fastrand::i64(0..ACCOUNTS)).collect();
        sqlx::query(UPDATE_BATCH)
            .bind(&accounts)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
enum Variant {
    /// `Worker::run_once` loops with the crediting handler (lease mode).
    Worker,
    /// The same in lock-held mode.
    WorkerLockHeld,
    /// Lease mode with a handler that credits the whole batch in one statement.
    WorkerBatched,
    /// Lock-held mode with the same batched handler.
    WorkerLockHeldBatched,
    /// Claim (tx 1), then mark the batch done (tx 2): the lease protocol without a handler.
    BareLease,
    /// Lock, mark done and commit in one transaction: a lock-held claim without a handler.
    BareLockHeld,
}

pub(crate) async fn run(server: &str, mut args: Args) -> anyhow::Result<()> {
    if args.quick {
        (
            args.workers,
            args.batches,
            args.seconds,
            args.latency_seconds,
        ) = (vec![4], vec![50], 1.0, 2.0);
    }
    // Rows stored before each variant, per second it runs: enough that none runs dry. A release
    // build's fastest variant moved about 60,000 rows/s, the smoke run's debug build about
    // 12,000; storing the release figure's rows took most of the smoke run's time.
    let fill_rate = if args.quick { 30_000.0 } else { 120_000.0 };
    let url = crate::fresh_database(server).await?;
    let pool = PgPoolOptions::new()
        .max_connections(20)
        .connect(&url)
        .await?;
    let store = PgStore::new(pool.clone());
    store.migrate().await?;
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE bench_accounts (id bigint PRIMARY KEY, balance bigint NOT NULL);
         INSERT INTO bench_accounts SELECT g, 0 FROM generate_series(0, {}) g;",
        ACCOUNTS - 1
    )))
    .execute(&pool)
    .await?;
    println!(
        "stored->done rows/s, {} s per variant; ratios = worker with the batch handler / bare loop of its protocol",
        args.seconds
    );
    println!();
    println!(
        "| workers | batch | lease, row handler | lock-held, row handler | lease, batch handler | lock-held, batch handler | bare claim->done, 2 tx | bare lock-held, 1 tx | lease batch / bare 2 tx | lock-held batch / bare 1 tx |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut ratios = Vec::new();
    for &w in &args.workers {
        for &b in &args.batches {
            let mut rate = [0.0; 6];
            let variants = [
                Variant::Worker,
                Variant::WorkerLockHeld,
                Variant::WorkerBatched,
                Variant::WorkerLockHeldBatched,
                Variant::BareLease,
                Variant::BareLockHeld,
            ];
            for (i, v) in variants.into_iter().enumerate() {
                // The smoke run measures only what its gate compares.
                if args.quick && !matches!(v, Variant::WorkerBatched | Variant::BareLease) {
                    rate[i] = f64::NAN;
                    continue;
                }
                let dur = Duration::from_secs_f64(args.seconds);
                rate[i] = measure(&store, v, w, b, dur, fill_rate).await?;
            }
            let [lease, held, lease_b, held_b, bare2, bare1] = rate;
            ratios.push(lease_b / bare2);
            let cell = |x: f64, places: usize| {
                if x.is_nan() {
                    "-".to_owned()
                } else {
                    format!("{x:.places$}")
                }
            };
            println!(
                "| {w} | {b} | {} | {} | {} | {} | {} | {} | {} | {} |",
                cell(lease, 0),
                cell(held, 0),
                cell(lease_b, 0),
                cell(held_b, 0),
                cell(bare2, 0),
                cell(bare1, 0),
                cell(lease_b / bare2, 2),
                cell(held_b / bare1, 2)
            );
        }
    }
    println!();
    let median = crate::median(ratios);
    println!("median lease batch / bare 2-tx ratio over the grid: {median:.2}");
    println!();
    if args.quick {
        return gate(median, args.min_ratio);
    }
    println!("| offered msg/s | claim mode | NOTIFY | p50 pickup | p99 pickup | samples |");
    println!("|---|---|---|---|---|---|");
    // At the offered rate the workers rarely idle; at a trickle they always do, which is where
    // waking them matters.
    let runs = [
        (ClaimMode::Lease, true),
        (ClaimMode::LockHeld, true),
        (ClaimMode::Lease, false),
    ];
    for rate in [args.rate, 20] {
        for (mode, notify) in runs {
            let dur = Duration::from_secs_f64(args.latency_seconds);
            let (p50, p99, n) = pickup(&store, mode, notify, rate, dur).await?;
            let wake = if notify { "on" } else { "off (100 ms poll)" };
            let (p50, p99) = (p50.as_secs_f64() * 1e3, p99.as_secs_f64() * 1e3);
            println!("| {rate} | {mode:?} | {wake} | {p50:.2} ms | {p99:.2} ms | {n} |");
        }
    }
    gate(median, args.min_ratio)
}

fn gate(median: f64, min: Option<f64>) -> anyhow::Result<()> {
    if let Some(min) = min
        && median < min
    {
        anyhow::bail!("worker / bare ratio {median:.2} is below {min}: a throughput regression");
    }
    Ok(())
}

/// Fills the inbox with `rows` pending rows through the batch receipt, 1,000 at a time.
async fn fill(pool: &PgPool, rows: i64) -> anyhow::Result<()> {
    sqlx::raw_sql("TRUNCATE inboxed_inbox_messages")
        .execute(pool)
        .await?;
    let inbox = Inbox::new(PgStore::new(pool.clone()), ConsumerName::new("bench")?).notify(false);
    let messages: Vec<Envelope> = (1..=rows)
        .map(|g| {
            Ok(Envelope::new(
                MessageId::new(format!("m-{g}"))?,
                b"{}".to_vec(),
            ))
        })
        .collect::<anyhow::Result<_>>()?;
    for chunk in messages.chunks(1_000) {
        inbox.store_many(chunk).await?;
    }
    sqlx::raw_sql("VACUUM ANALYZE inboxed_inbox_messages")
        .execute(pool)
        .await?;
    Ok(())
}

/// Rows moved to done per second by `variant` with `workers` tasks and batches of `batch`.
async fn measure(
    store: &PgStore,
    variant: Variant,
    workers: usize,
    batch: u32,
    dur: Duration,
    fill_rate: f64,
) -> anyhow::Result<f64> {
    fill(store.pool(), (dur.as_secs_f64() * fill_rate) as i64 + 1_000).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = ConsumerName::new("bench")?;
    let mode = match variant {
        Variant::WorkerLockHeld | Variant::WorkerLockHeldBatched => ClaimMode::LockHeld,
        _ => ClaimMode::Lease,
    };
    let batched = matches!(
        variant,
        Variant::WorkerBatched | Variant::WorkerLockHeldBatched
    );
    let config = WorkerConfig::default()
        .batch_size(batch)
        .notify(false)
        .claim_mode(mode);
    let worker = Worker::new(
        store.clone(),
        consumer.clone(),
        Credit {
            started: None,
            batched,
        },
        config,
    );
    let mut tasks = Vec::new();
    let started = Instant::now();
    for _ in 0..workers {
        let (stop, store, worker, consumer) = (
            stop.clone(),
            store.clone(),
            worker.clone(),
            consumer.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut done = 0u64;
            while !stop.load(Ordering::Relaxed) {
                done += match variant {
                    Variant::BareLease => bare_lease(&store, &consumer, batch).await?,
                    Variant::BareLockHeld => bare_lock_held(store.pool(), batch).await?,
                    _ => worker.run_once().await?.done,
                };
            }
            Ok::<u64, anyhow::Error>(done)
        }));
    }
    tokio::time::sleep(dur).await;
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// A bare lease loop's claim: the store's own statement, as a worker runs it, under a token
/// of its own (on any engine).
pub(crate) async fn bare_claim<S: InboxStore>(
    store: &S,
    consumer: &ConsumerName,
    batch: u32,
) -> anyhow::Result<(ClaimToken, Vec<InboxRow>)> {
    let token = ClaimToken::random();
    let params = ClaimBatchParams {
        consumer,
        worker: "bare",
        token: &token,
        limit: batch,
        lease: Duration::from_secs(30),
        now: None,
        ordered: false,
        park: false,
    };
    let rows = store.claim_batch(&params).await?;
    Ok((token, rows))
}

async fn bare_lease(store: &PgStore, consumer: &ConsumerName, batch: u32) -> anyhow::Result<u64> {
    let (token, rows) = bare_claim(store, consumer, batch).await?;
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    let mut tx = store
        .begin(&inboxed_core::store::BeginParams::default())
        .await?;
    let done = sqlx::query("UPDATE inboxed_inbox_messages SET status = 'done', done_at = now() WHERE id = ANY($1) AND claim_token = $2")
        .bind(&ids)
        .bind(token.as_bytes().as_slice())
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(done.rows_affected())
}

async fn bare_lock_held(pool: &PgPool, batch: u32) -> anyhow::Result<u64> {
    let mut tx = pool.begin().await?;
    let done = sqlx::query(
        "WITH c AS (SELECT id FROM inboxed_inbox_messages WHERE consumer_name = 'bench' AND status = 'pending'
                    ORDER BY available_at, id LIMIT $1 FOR UPDATE SKIP LOCKED)
         UPDATE inboxed_inbox_messages m SET status = 'done', done_at = now() FROM c WHERE m.id = c.id",
    )
    .bind(i64::from(batch))
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(done.rows_affected())
}

/// Offers `rate` messages per second for `dur` and measures store -> handler start.
async fn pickup(
    store: &PgStore,
    mode: ClaimMode,
    notify: bool,
    rate: u64,
    dur: Duration,
) -> anyhow::Result<(Duration, Duration, usize)> {
    sqlx::raw_sql("TRUNCATE inboxed_inbox_messages")
        .execute(store.pool())
        .await?;
    let consumer = ConsumerName::new("bench")?;
    let latencies = Arc::new(Mutex::new((HashMap::new(), Vec::new())));
    let config = WorkerConfig::default()
        .batch_size(50)
        .notify(notify)
        .claim_mode(mode);
    let worker = Worker::new(
        store.clone(),
        consumer.clone(),
        Credit {
            started: Some(latencies.clone()),
            batched: false,
        },
        config,
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = {
        let worker = worker.clone();
        tokio::spawn(async move {
            worker
                .run(async {
                    let _ = stopped.await;
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let inbox = Inbox::new(store.clone(), consumer).notify(notify);
    let period = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let end = Instant::now() + dur;
    let mut n = 0u64;
    while Instant::now() < end {
        ticker.tick().await;
        let id = format!("l-{n}");
        n += 1;
        latencies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0
            .insert(id.clone(), Instant::now());
        let env = Envelope::new(MessageId::new(id)?, b"{}".to_vec());
        let inbox = inbox.clone();
        tokio::spawn(async move { inbox.store(&env).await });
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _ = stop.send(());
    running.await??;
    let mut samples = std::mem::take(
        &mut latencies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .1,
    );
    samples.sort();
    let at = |q: f64| {
        samples
            .get(((samples.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or_default()
    };
    Ok((at(0.5), at(0.99), samples.len()))
}
