//! `inboxed-bench mysql-defaults`: the store-then-process drain on MySQL or MariaDB as a
//! newcomer sets it up (a handler with only `handle`, `WorkerConfig::default()`, one `Worker`
//! per "worker", each with a pool of its own and its default claim loops), at 1, 4 and 16
//! workers, each worker count compared with one worker in the same round; as `defaults` does on
//! PostgreSQL. Every run's balances are checked: each message credited exactly once.

use std::str::FromStr as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::mysql::MySqlConnectOptions;
use sqlx::{ConnectOptions as _, Executor as _, MySql, MySqlConnection, MySqlPool};

use inboxed_core::inbox::{Inbox, Worker, WorkerConfig};
use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, MessageId, ResultExt};
use inboxed_mysql::MySqlStore;

/// Drain throughput with the default settings on MySQL, by worker count.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Server to create the benchmark database `inboxed_bench` on (dropped first).
    #[arg(
        long,
        env = "INBOXED_MYSQL_URL",
        default_value = "mysql://root@127.0.0.1:3306"
    )]
    mysql_url: String,
    /// Messages per run.
    #[arg(long, default_value_t = 20_000)]
    messages: usize,
    /// Worker counts (comma-separated); the first is the baseline of the ratios.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    workers: Vec<usize>,
    /// Rounds; each runs every worker count once.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// CI smoke run: 4,000 messages, 1 and 8 workers, one round.
    #[arg(long)]
    quick: bool,
    /// Fail when the median ratio at the most workers falls below this: a gross regression.
    /// `--quick` sets 0.4 unless given.
    #[arg(long)]
    min_ratio: Option<f64>,
}

const ACCOUNTS: i64 = 10_000;
/// Connections of each worker's pool: its four claim loops and one more.
const WORKER_POOL: u32 = 5;

#[derive(serde::Deserialize)]
struct Credit {
    account: i64,
}

/// The newcomer's handler: `handle` only.
struct Simple {
    calls: Arc<AtomicU64>,
}

impl Handler<MySql> for Simple {
    async fn handle(&self, msg: &Envelope, conn: &mut MySqlConnection) -> Result<(), HandlerError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let credit: Credit = msg.json().permanent()?;
        sqlx::query("UPDATE bench_accounts SET balance = balance + 1 WHERE id = ?")
            .bind(credit.account)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

pub(crate) async fn run(mut args: Args) -> anyhow::Result<()> {
    if args.quick {
        (args.messages, args.workers, args.rounds) = (4_000, vec![1, 8], 1);
        args.min_ratio = args.min_ratio.or(Some(0.4));
    }
    let mut admin = MySqlConnectOptions::from_str(&args.mysql_url)?
        .connect()
        .await?;
    admin
        .execute("DROP DATABASE IF EXISTS inboxed_bench; CREATE DATABASE inboxed_bench")
        .await?;
    let url = format!("{}/inboxed_bench", args.mysql_url.trim_end_matches('/'));
    let store = MySqlStore::connect(&url, 4).await?;
    store.migrate().await?;
    crate::mysql::create_accounts(store.pool(), ACCOUNTS).await?;
    println!(
        "- {} messages per run, each crediting one of {ACCOUNTS} accounts (drawn at random); \
         each worker: `WorkerConfig::default()` on a pool of its own of {WORKER_POOL} \
         connections, a handler with only `handle`; {} rounds",
        args.messages, args.rounds
    );
    let mut rates = vec![Vec::new(); args.workers.len()];
    let mut ratios = vec![Vec::new(); args.workers.len()];
    for round in 1..=args.rounds {
        let mut base = 0.0;
        for (w, &workers) in args.workers.iter().enumerate() {
            let (rate, deadlocks) = drain(&url, &store, args.messages, workers).await?;
            if w == 0 {
                base = rate;
            }
            rates[w].push(rate);
            ratios[w].push(rate / base);
            println!("- round {round}, {workers} workers: {rate:.0} rows/s, {deadlocks} deadlocks");
        }
    }
    println!();
    println!(
        "| workers | rows/s (median) | / {} worker(s) (median) |",
        args.workers[0]
    );
    println!("|---|---|---|");
    for (w, &workers) in args.workers.iter().enumerate() {
        println!(
            "| {workers} | {:.0} | {:.2} |",
            crate::median(rates[w].clone()),
            crate::median(ratios[w].clone())
        );
    }
    admin.execute("DROP DATABASE inboxed_bench").await?;
    let last = crate::median(ratios.last().cloned().unwrap_or_default());
    if let Some(min) = args.min_ratio
        && last < min
    {
        anyhow::bail!(
            "the default configuration on MySQL at {} workers drains {last:.2} times as fast as \
             at {}: below {min}",
            args.workers.last().copied().unwrap_or(1),
            args.workers[0]
        );
    }
    Ok(())
}

/// One drain of a fresh backlog by `workers` default workers: rows/s and the deadlocks the
/// server counted.
async fn drain(
    url: &str,
    store: &MySqlStore,
    messages: usize,
    workers: usize,
) -> anyhow::Result<(f64, i64)> {
    let pool = store.pool();
    pool.execute("DELETE FROM inboxed_inbox_messages; UPDATE bench_accounts SET balance = 0")
        .await?;
    let consumer = ConsumerName::new("bench")?;
    let inbox = Inbox::new(store.clone(), consumer.clone());
    let credits: Vec<Envelope> = (0..messages)
        .map(|_| {
            let body = format!(r#"{{"account": {}}}"#, fastrand::i64(0..ACCOUNTS));
            Envelope::new(
                MessageId::from_uuid(uuid::Uuid::now_v7()),
                body.into_bytes(),
            )
        })
        .collect();
    for chunk in credits.chunks(500) {
        inbox.store_many(chunk).await?;
    }
    pool.execute("ANALYZE TABLE inboxed_inbox_messages").await?;
    let deadlocks_before = deadlocks(pool).await?;
    let calls = Arc::new(AtomicU64::new(0));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    // Each worker's pool is its process's, made before the clock starts.
    let mut stores = Vec::new();
    for _ in 0..workers {
        stores.push(MySqlStore::connect(url, WORKER_POOL).await?);
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for own in stores {
        let mut stopped = stopped.clone();
        let shutdown = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        let calls = Arc::clone(&calls);
        let consumer = consumer.clone();
        tasks.push(tokio::spawn(async move {
            Worker::new(own, consumer, Simple { calls }, WorkerConfig::default())
                .run(shutdown)
                .await
        }));
    }
    let total = i64::try_from(messages)?;
    loop {
        let handled = i64::try_from(calls.load(Ordering::Relaxed))?;
        if handled >= total && drained(pool).await? {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "the drain did not finish in 10 minutes ({handled} of {total} handled)"
        );
        tokio::time::sleep(Duration::from_millis(if handled >= total { 10 } else { 5 })).await;
    }
    let secs = started.elapsed().as_secs_f64();
    stop.send(true)?;
    for t in tasks {
        t.await??;
    }
    let credited: i64 =
        sqlx::query_scalar("SELECT CAST(SUM(balance) AS SIGNED) FROM bench_accounts")
            .fetch_one(pool)
            .await?;
    anyhow::ensure!(
        credited == total,
        "{credited} credits for {total} messages: not exactly once"
    );
    #[allow(clippy::cast_precision_loss)]
    Ok((
        total as f64 / secs,
        deadlocks(pool).await? - deadlocks_before,
    ))
}

/// Whether no row is left pending or processing, read through the claim index.
async fn drained(pool: &MySqlPool) -> anyhow::Result<bool> {
    Ok(sqlx::query_scalar::<_, i64>(
        "SELECT NOT EXISTS (SELECT 1 FROM inboxed_inbox_messages \
         WHERE consumer_name = 'bench' AND status IN ('pending', 'processing'))",
    )
    .fetch_one(pool)
    .await?
        == 1)
}

/// InnoDB's deadlock count since the server started.
async fn deadlocks(pool: &MySqlPool) -> anyhow::Result<i64> {
    let row: (String, String) = sqlx::query_as("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")
        .fetch_one(pool)
        .await?;
    Ok(row.1.parse()?)
}
