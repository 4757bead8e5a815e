//! `inboxed-bench defaults`: the store-then-process drain as a newcomer sets it up (a handler
//! with only `handle`, `WorkerConfig::default()`, one `Worker` per "worker", each running its
//! default claim loops), at 1, 4 and 16 workers, on messages that credit one of 10,000 accounts
//! named in the payload; beside it the tuned configuration (a batch handler that credits the
//! batch's accounts in one statement, in account order). Each worker count is compared with one
//! worker of the same configuration, measured in the same round. Two starts: workers starting
//! together on a waiting backlog (their start is timed), and a running fleet taking a burst
//! (the backlog stored in one transaction while they wait idle). The server's deadlock counter
//! and the handler's call count are reported, and every run's balances are checked: each
//! message credited exactly once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::{PgConnection, PgPool, Postgres};

use inboxed_core::inbox::{Inbox, Worker, WorkerConfig};
use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, MessageId, ResultExt};
use inboxed_postgres::PgStore;

/// Drain throughput with the default settings, by worker count.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Messages per run.
    #[arg(long, default_value_t = 30_000)]
    messages: usize,
    /// Worker counts (comma-separated); the first is the baseline of the ratios.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    workers: Vec<usize>,
    /// Rounds; each runs every configuration once.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// CI smoke run: 6,000 messages, 1 and 8 workers, one round, default handler only.
    #[arg(long)]
    quick: bool,
    /// Fail when the default configuration's median ratio at the most workers falls below
    /// this: a gross regression (the defaults before adaptive row groups drained 0.09 to 0.14
    /// times as fast at 16 workers as at 1). `--quick` sets 0.4 unless given: its one short
    /// round measured 0.69 to 0.96 at 8 workers.
    #[arg(long)]
    min_ratio: Option<f64>,
    /// Claim loops per worker instead of the default (to compare, not for the suite).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Rows per claim instead of the default (to compare, not for the suite).
    #[arg(long)]
    batch: Option<u32>,
    /// Every claim loop runs at once, without pacing (to compare, not for the suite).
    #[arg(long)]
    unpaced: bool,
    /// The default handler only, without the batch handler beside it.
    #[arg(long)]
    defaults_only: bool,
}

pub(crate) const ACCOUNTS: i64 = 10_000;
/// Connections of each worker's pool: its four claim loops and its `LISTEN` connection.
const WORKER_POOL: u32 = 5;

/// A job's payload: the account it credits.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Credit {
    pub(crate) account: i64,
}

/// The accounts `msgs` credit, in account order: the order a batch locks them in, so that
/// batches of several workers do not deadlock.
pub(crate) fn sorted_accounts(msgs: &[&Envelope]) -> Result<Vec<i64>, HandlerError> {
    let mut accounts = Vec::with_capacity(msgs.len());
    for msg in msgs {
        accounts.push(msg.json::<Credit>().permanent()?.account);
    }
    accounts.sort_unstable();
    Ok(accounts)
}

/// The newcomer's handler: `handle` only.
#[derive(Default)]
pub(crate) struct Simple {
    /// Messages handled (a row redone counts again).
    pub(crate) calls: Arc<AtomicU64>,
}

impl Handler<Postgres> for Simple {
    async fn handle(&self, msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let credit: Credit = msg.json().permanent()?;
        sqlx::query("UPDATE bench_accounts SET balance = balance + 1 WHERE id = $1")
            .bind(credit.account)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

/// The tuned handler: one statement per batch, accounts locked in id order.
struct Tuned {
    calls: Arc<AtomicU64>,
}

impl Handler<Postgres> for Tuned {
    const BATCHES: bool = true;

    async fn handle(&self, msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        Simple {
            calls: Arc::clone(&self.calls),
        }
        .handle(msg, conn)
        .await
    }

    async fn handle_batch(
        &self,
        msgs: &[&Envelope],
        conn: &mut PgConnection,
    ) -> Result<(), HandlerError> {
        self.calls.fetch_add(msgs.len() as u64, Ordering::Relaxed);
        let accounts = sorted_accounts(msgs)?;
        sqlx::query(
            "UPDATE bench_accounts a SET balance = a.balance + d.n
             FROM (SELECT id, count(*) AS n FROM unnest($1::bigint[]) AS u(id) GROUP BY id
                   ORDER BY id) d
             WHERE a.id = d.id",
        )
        .bind(&accounts)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}

/// One drain: rows/s, deadlocks the server counted, handler calls.
struct Drain {
    rate: f64,
    /// Rows/s between a tenth and nine tenths handled.
    steady: f64,
    /// Seconds until the first row was handled.
    first: f64,
    /// Seconds from nine tenths handled to the last row settled.
    tail: f64,
    deadlocks: i64,
    calls: u64,
    /// CPU per row of this process (the workers) and of the database server.
    cpu: String,
}

pub(crate) async fn run(server: &str, mut args: Args) -> anyhow::Result<()> {
    // (name, batch handler, a burst to a running fleet)
    let mut configs = vec![
        ("defaults", false, false),
        ("defaults, a burst to running workers", false, true),
        ("batch handler", true, false),
    ];
    if args.quick {
        (args.messages, args.workers, args.rounds) = (6_000, vec![1, 8], 1);
        args.min_ratio = args.min_ratio.or(Some(0.4));
        configs.truncate(1);
    }
    if args.defaults_only {
        configs.truncate(1);
    }
    let (url, store) = crate::variants::bench_database(server, 4, ACCOUNTS).await?;
    println!(
        "- {} messages per run, each crediting one of {ACCOUNTS} accounts (drawn at random); each worker as a process of its own would run it: `WorkerConfig::default()` (up to 4 claim loops, paced and shared among the registered workers, batch 50, lease mode, NOTIFY wake-ups, liveness registration) on a pool of its own of {WORKER_POOL} connections (the loops and the listener) beside its liveness connection; {} rounds",
        args.messages, args.rounds
    );
    let mut ratios = vec![vec![Vec::new(); args.workers.len()]; configs.len()];
    let mut rates = vec![vec![Vec::new(); args.workers.len()]; configs.len()];
    let mut steady = vec![vec![Vec::new(); args.workers.len()]; configs.len()];
    for round in 1..=args.rounds {
        for (c, &(name, tuned, burst)) in configs.iter().enumerate() {
            let (mut base, mut steady_base) = (0.0, 0.0);
            for (w, &workers) in args.workers.iter().enumerate() {
                let d = drain(&url, &store, &args, workers, tuned, burst).await?;
                if w == 0 {
                    (base, steady_base) = (d.rate, d.steady);
                }
                rates[c][w].push(d.rate);
                ratios[c][w].push(d.rate / base);
                steady[c][w].push(d.steady / steady_base);
                println!(
                    "- round {round}, {name}, {workers} workers: {:.0} rows/s ({:.0} from a tenth to nine tenths handled; first row handled after {:.2} s, the last tenth took {:.2} s), {} deadlocks, {} handler calls; CPU a row: {}",
                    d.rate, d.steady, d.first, d.tail, d.deadlocks, d.calls, d.cpu
                );
            }
        }
    }
    println!();
    println!(
        "| configuration | workers | rows/s (median) | / {0} worker(s) (median) | from a tenth to nine tenths handled, / {0} worker(s) (median) |",
        args.workers[0]
    );
    println!("|---|---|---|---|---|");
    let mut last = f64::INFINITY;
    for (c, &(name, ..)) in configs.iter().enumerate() {
        for (w, &workers) in args.workers.iter().enumerate() {
            let ratio = crate::median(ratios[c][w].clone());
            if c == 0 && w + 1 == args.workers.len() {
                last = ratio;
            }
            println!(
                "| {name} | {workers} | {:.0} | {ratio:.2} | {:.2} |",
                crate::median(rates[c][w].clone()),
                crate::median(steady[c][w].clone())
            );
        }
    }
    if let Some(min) = args.min_ratio
        && last < min
    {
        anyhow::bail!(
            "the default configuration at {} workers drains {last:.2} times as fast as at {}: below {min}",
            args.workers.last().copied().unwrap_or(1),
            args.workers[0]
        );
    }
    Ok(())
}

async fn drain(
    url: &str,
    store: &PgStore,
    args: &Args,
    workers: usize,
    tuned: bool,
    burst: bool,
) -> anyhow::Result<Drain> {
    let messages = args.messages;
    let pool = store.pool();
    let consumer = ConsumerName::new("bench")?;
    let credits = credits(messages)?;
    reset(store).await?;
    if !burst {
        store_credits(store, &consumer, &credits, 500, false).await?;
    }
    let deadlocks_before = deadlocks(pool).await?;
    let calls = Arc::new(AtomicU64::new(0));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    // Each worker's pool is its process's, as `PgStore::connect` builds it, made before the
    // worker starts (and before the clock); the worker's own start (its listener, its
    // liveness registration) is timed.
    let mut pools = Vec::new();
    for _ in 0..workers {
        pools.push(
            PgStore::pool_options()
                .max_connections(
                    args.concurrency
                        .map_or(WORKER_POOL, |c| u32::try_from(c + 1).unwrap_or(WORKER_POOL)),
                )
                .acquire_timeout(Duration::from_secs(60))
                .connect(url)
                .await?,
        );
    }
    let mut tasks = Vec::new();
    for own in pools {
        let mut config = WorkerConfig::default();
        if let Some(n) = args.concurrency {
            config = config.concurrency(n);
        }
        if let Some(n) = args.batch {
            config = config.batch_size(n);
        }
        if args.unpaced {
            config = config.adaptive_concurrency(false);
        }
        let mut stopped = stopped.clone();
        let shutdown = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        let calls = Arc::clone(&calls);
        let (store, consumer) = (PgStore::new(own), consumer.clone());
        tasks.push(tokio::spawn(async move {
            if tuned {
                Worker::new(store, consumer, Tuned { calls }, config)
                    .run(shutdown)
                    .await
            } else {
                Worker::new(store, consumer, Simple { calls }, config)
                    .run(shutdown)
                    .await
            }
        }));
    }
    if burst {
        // Long enough for every worker to listen, register and find nothing to claim: they
        // are running, idle, when the burst commits and wakes them.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let cpu = crate::cpu::Cpu::read(&["inboxed-bench", "postgres"]);
    let mut started = Instant::now();
    if burst {
        let all = credits.len();
        store_credits(store, &consumer, &credits, all, true).await?;
        started = Instant::now();
    }
    let total = i64::try_from(messages)?;
    let mut probe = end_probe(pool).await?;
    let (mut first, mut tenth, mut ninth) = (None, None, None);
    // Progress is the handler's call count, which costs nothing to read: counting settled rows
    // scans the churning table (22 to 36 ms a count here), and polling it every 20 ms took a
    // good part of a core from the drain it measured. Once the calls reach the total (they pass
    // it by the rows redone after a conflict, early at 16 workers), the end is timed by asking
    // whether a pending or processing row is left, through the claim's partial indexes.
    loop {
        let handled = i64::try_from(calls.load(Ordering::Relaxed))?;
        if handled > 0 && first.is_none() {
            first = Some(started.elapsed());
        }
        if handled >= total / 10 && tenth.is_none() {
            tenth = Some((started.elapsed(), handled));
        }
        if handled >= total * 9 / 10 && ninth.is_none() {
            ninth = Some((started.elapsed(), handled));
        }
        if handled >= total && drained(&mut probe).await? {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "the drain did not finish in 10 minutes ({handled} of {total} handled)"
        );
        tokio::time::sleep(Duration::from_millis(if handled >= total { 10 } else { 2 })).await;
    }
    let secs = started.elapsed().as_secs_f64();
    let cpu = cpu.per_message(
        &crate::cpu::Cpu::read(&["inboxed-bench", "postgres"]),
        u64::try_from(messages)?,
    );
    stop.send(true)?;
    for t in tasks {
        t.await??;
    }
    credited_once(pool, total).await?;
    #[allow(clippy::cast_precision_loss)]
    Ok(Drain {
        rate: total as f64 / secs,
        steady: match (tenth, ninth) {
            (Some((t0, n0)), Some((t1, n1))) if t1 > t0 => {
                (n1 - n0) as f64 / (t1 - t0).as_secs_f64()
            }
            _ => 0.0,
        },
        first: first.unwrap_or_default().as_secs_f64(),
        tail: ninth.map_or(0.0, |(t, _)| secs - t.as_secs_f64()),
        deadlocks: deadlocks(pool).await? - deadlocks_before,
        calls: calls.load(Ordering::Relaxed),
        cpu,
    })
}

/// Empties the inbox and the balances, then stores `messages` credits of random accounts for
/// `consumer`, 500 to a transaction.
pub(crate) async fn backlog(
    store: &PgStore,
    consumer: &ConsumerName,
    messages: usize,
) -> anyhow::Result<()> {
    reset(store).await?;
    store_credits(store, consumer, &credits(messages)?, 500, false).await
}

/// Empties the inbox and the balances.
async fn reset(store: &PgStore) -> anyhow::Result<()> {
    sqlx::raw_sql("TRUNCATE inboxed_inbox_messages; UPDATE bench_accounts SET balance = 0;")
        .execute(store.pool())
        .await?;
    Ok(())
}

/// `messages` credits of random accounts.
fn credits(messages: usize) -> anyhow::Result<Vec<Envelope>> {
    (0..messages)
        .map(|_| {
            let id = MessageId::new(uuid::Uuid::now_v7().to_string())?;
            let body = format!(r#"{{"account": {}}}"#, fastrand::i64(0..ACCOUNTS));
            Ok(Envelope::new(id, body.into_bytes()))
        })
        .collect()
}

/// Stores `credits` for `consumer`, `per` to a transaction; with `wake`, each transaction
/// wakes the idle workers (a backlog stored before the workers start needs no wake-up).
async fn store_credits(
    store: &PgStore,
    consumer: &ConsumerName,
    credits: &[Envelope],
    per: usize,
    wake: bool,
) -> anyhow::Result<()> {
    let inbox = Inbox::new(store.clone(), consumer.clone()).notify(wake);
    for chunk in credits.chunks(per.max(1)) {
        inbox.store_many(chunk).await?;
    }
    Ok(())
}

/// Rows done or dead.
/// A connection for [`drained`], its plans held to the partial indexes.
pub(crate) async fn end_probe(
    pool: &PgPool,
) -> anyhow::Result<sqlx::pool::PoolConnection<Postgres>> {
    let mut conn = pool.acquire().await?;
    // The drain's table churns faster than autovacuum analyzes it: on statistics taken while
    // it was empty, the planner may read it whole, as the settled count did (22 to 36 ms, every
    // 10 ms, at the end of a 16-worker drain where a third of the rows were still to settle).
    sqlx::query("SET enable_seqscan = off")
        .execute(&mut *conn)
        .await?;
    Ok(conn)
}

/// Whether no row is left pending (a retry's backoff included) or processing: the end of a
/// drain, read from the two partial indexes that hold only those rows.
pub(crate) async fn drained(conn: &mut PgConnection) -> anyhow::Result<bool> {
    Ok(sqlx::query_scalar(
        "SELECT NOT EXISTS (SELECT 1 FROM inboxed_inbox_messages WHERE status = 'pending') \
         AND NOT EXISTS (SELECT 1 FROM inboxed_inbox_messages WHERE status = 'processing')",
    )
    .fetch_one(conn)
    .await?)
}

pub(crate) async fn settled(pool: &PgPool) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM inboxed_inbox_messages WHERE status IN ('done', 'dead')",
    )
    .fetch_one(pool)
    .await?)
}

/// Fails unless the balances add up to `total`: each message credited exactly once.
pub(crate) async fn credited_once(pool: &PgPool, total: i64) -> anyhow::Result<()> {
    let credited: i64 =
        sqlx::query_scalar("SELECT CAST(sum(balance) AS BIGINT) FROM bench_accounts")
            .fetch_one(pool)
            .await?;
    anyhow::ensure!(
        credited == total,
        "{credited} credits for {total} messages: not exactly once"
    );
    Ok(())
}

async fn deadlocks(pool: &PgPool) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(pool)
    .await?)
}
