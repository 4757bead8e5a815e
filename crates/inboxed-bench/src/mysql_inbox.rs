//! `inboxed-bench mysql-inbox`: store-then-process workers on MySQL or MariaDB against bare
//! claim loops of the same protocol, in interleaved rounds of one run, as `inbox` measures
//! them on PostgreSQL.
//!
//! A bare lease loop claims a batch (the store's own `claim_batch`, the statement a worker
//! runs) and marks it done in a second transaction; a bare lock-held loop locks a batch with
//! `SKIP LOCKED` and marks it done in the same transaction. The workers run the same
//! protocols with a handler whose whole batch is one statement, so what the ratio charges
//! the library is its own work: attempts, fencing, the settling of each row.

use std::str::FromStr;
use std::time::{Duration, Instant};

use sqlx::mysql::MySqlConnectOptions;
use sqlx::{ConnectOptions, Executor, MySql, MySqlConnection, MySqlPool};

use inboxed_core::inbox::{ClaimMode, Inbox, Worker, WorkerConfig};
use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, MessageId};
use inboxed_mysql::MySqlStore;

/// Store-then-process workers on MySQL against bare claim loops.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Server to create the benchmark database `inboxed_bench_inbox` on (dropped first).
    #[arg(
        long,
        env = "INBOXED_MYSQL_URL",
        default_value = "mysql://root@127.0.0.1:3306"
    )]
    mysql_url: String,
    /// Concurrent claim loops (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    workers: Vec<usize>,
    /// Rows per claim.
    #[arg(long, default_value_t = 50)]
    batch: u32,
    /// Seconds per variant per round.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Rounds; each runs every variant once, in rotating order.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Rows stored before each variant, per second it runs: enough that none runs dry.
    #[arg(long, default_value_t = 20_000)]
    fill_rate: u64,
}

const ACCOUNTS: i64 = 10_000;

/// Credits one account per row, the whole batch in one statement (a multi-table update
/// credits an account drawn twice once: the figure is rows moved, not money). The accounts are
/// sorted, so that concurrent batches lock them in one order: unsorted, two batches deadlocked
/// at four loops.
#[derive(Clone, Copy)]
struct Credit;

impl Handler<MySql> for Credit {
    const BATCHES: bool = true;

    async fn handle(&self, msg: &Envelope, conn: &mut MySqlConnection) -> Result<(), HandlerError> {
        self.handle_batch(&[msg], conn).await
    }

    async fn handle_batch(
        &self,
        msgs: &[&Envelope],
        conn: &mut MySqlConnection,
    ) -> Result<(), HandlerError> {
        let mut accounts: Vec<i64> = msgs.iter().map(|_| fastrand::i64(0..ACCOUNTS)).collect();
        accounts.sort_unstable();
        let ids: Vec<String> = accounts.iter().map(i64::to_string).collect();
        sqlx::query(
            "UPDATE JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j \
             STRAIGHT_JOIN bench_accounts a ON a.id = j.id SET a.balance = a.balance + 1",
        )
        .bind(format!("[{}]", ids.join(",")))
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}

#[derive(Clone, Copy)]
enum Variant {
    WorkerLease,
    BareLease,
    WorkerLockHeld,
    BareLockHeld,
}

pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    let server = MySqlConnectOptions::from_str(&args.mysql_url)?;
    let mut admin = server.connect().await?;
    admin
        .execute("DROP DATABASE IF EXISTS inboxed_bench_inbox; CREATE DATABASE inboxed_bench_inbox")
        .await?;
    let url = format!(
        "{}/inboxed_bench_inbox",
        args.mysql_url.trim_end_matches('/')
    );
    let most = u32::try_from(args.workers.iter().copied().max().unwrap_or(4)).unwrap_or(4);
    let store = MySqlStore::connect(&url, most + 2).await?;
    store.migrate().await?;
    crate::mysql::create_accounts(store.pool(), ACCOUNTS).await?;
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(store.pool())
        .await?;
    println!(
        "{version}: stored->done rows/s, batch {}, {} s per variant, {} rounds",
        args.batch, args.seconds, args.rounds
    );
    let variants = [
        Variant::WorkerLease,
        Variant::BareLease,
        Variant::WorkerLockHeld,
        Variant::BareLockHeld,
    ];
    let dur = Duration::from_secs_f64(args.seconds);
    let filled = (args.seconds * args.fill_rate as f64) as usize;
    let rates = crate::load::rounds(
        args.rounds,
        &args.workers,
        variants,
        async |variant, workers| {
            fill(&store, filled).await?;
            measure(&store, variant, workers, args.batch, dur).await
        },
        |round, workers, row| {
            println!(
                "round {round}, {workers} loops: lease worker {:.0}, bare lease {:.0}, \
                 lock-held worker {:.0}, bare lock-held {:.0} rows/s",
                row[0], row[1], row[2], row[3]
            );
        },
    )
    .await?;
    println!();
    println!(
        "| loops | lease worker rows/s | bare lease rows/s | lock-held worker rows/s | \
         bare lock-held rows/s | lease worker / bare | lock-held worker / bare |"
    );
    println!("|---|---|---|---|---|---|---|");
    for &workers in &args.workers {
        let of = |f: &dyn Fn(&[f64; 4]) -> f64| crate::median_at(&rates, workers, f);
        println!(
            "| {workers} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} |",
            of(&|r| r[0]),
            of(&|r| r[1]),
            of(&|r| r[2]),
            of(&|r| r[3]),
            of(&|r| r[0] / r[1]),
            of(&|r| r[2] / r[3]),
        );
    }
    admin.execute("DROP DATABASE inboxed_bench_inbox").await?;
    Ok(())
}

/// Rows moved to done per second by `variant` with `workers` loops.
async fn measure(
    store: &MySqlStore,
    variant: Variant,
    workers: usize,
    batch: u32,
    dur: Duration,
) -> anyhow::Result<f64> {
    let consumer = ConsumerName::new("bench")?;
    let mode = match variant {
        Variant::WorkerLockHeld | Variant::BareLockHeld => ClaimMode::LockHeld,
        _ => ClaimMode::Lease,
    };
    let config = WorkerConfig::default().batch_size(batch).claim_mode(mode);
    let worker = Worker::new(store.clone(), consumer.clone(), Credit, config);
    let started = Instant::now();
    let (store, consumer) = (store.clone(), consumer.clone());
    let (n, _) = crate::load::for_duration(workers, dur, move || {
        let (store, consumer, worker) = (store.clone(), consumer.clone(), worker.clone());
        async move {
            Ok(match variant {
                // A batch that failed as contention is retried by `Worker::run`; here it
                // moved no rows.
                Variant::WorkerLease | Variant::WorkerLockHeld => match worker.run_once().await {
                    Ok(report) => report.done,
                    Err(e) if e.is_transient() => 0,
                    Err(e) => return Err(e.into()),
                },
                Variant::BareLease => bare_lease(&store, &consumer, batch).await?,
                Variant::BareLockHeld => bare_lock_held(store.pool(), batch).await?,
            })
        }
    })
    .await?;
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

/// Claim ([`crate::inbox::bare_claim`], transaction 1), then mark the batch done by id
/// (transaction 2).
async fn bare_lease(
    store: &MySqlStore,
    consumer: &ConsumerName,
    batch: u32,
) -> anyhow::Result<u64> {
    let (token, rows) = crate::inbox::bare_claim(store, consumer, batch).await?;
    if rows.is_empty() {
        return Ok(0);
    }
    let ids: Vec<String> = rows.iter().map(|r| r.id.to_string()).collect();
    let mut tx = store.pool().begin().await?;
    let done = sqlx::query(
        "UPDATE JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j \
         STRAIGHT_JOIN inboxed_inbox_messages m ON m.id = j.id \
         SET m.status = 'done', m.done_at = FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000), \
             m.claim_token = NULL, m.lease_expires_at = NULL \
         WHERE m.claim_token = ?",
    )
    .bind(format!("[{}]", ids.join(",")))
    .bind(token.as_bytes().as_slice())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(done.rows_affected())
}

/// Lock a batch with `SKIP LOCKED` and mark it done, in one transaction.
async fn bare_lock_held(pool: &MySqlPool, batch: u32) -> anyhow::Result<u64> {
    let mut tx = pool.begin().await?;
    let ids: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM inboxed_inbox_messages \
         WHERE consumer_name = 'bench' AND status = 'pending' \
         ORDER BY available_at, id LIMIT ? FOR UPDATE SKIP LOCKED",
    )
    .bind(i64::from(batch))
    .fetch_all(&mut *tx)
    .await?;
    if ids.is_empty() {
        return Ok(0);
    }
    let list: Vec<String> = ids.iter().map(i64::to_string).collect();
    let done = sqlx::query(
        "UPDATE JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j \
         STRAIGHT_JOIN inboxed_inbox_messages m ON m.id = j.id \
         SET m.status = 'done', m.done_at = FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000)",
    )
    .bind(format!("[{}]", list.join(",")))
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(done.rows_affected())
}

/// Empties the inbox and stores `rows` fresh messages, a thousand to a receipt.
async fn fill(store: &MySqlStore, rows: usize) -> anyhow::Result<()> {
    store
        .pool()
        .execute("DELETE FROM inboxed_inbox_messages")
        .await?;
    let inbox = Inbox::new(store.clone(), ConsumerName::new("bench")?);
    let messages: Vec<Envelope> = (0..rows)
        .map(|_| {
            Ok(Envelope::new(
                MessageId::from_uuid(uuid::Uuid::now_v7()),
                b"{}".to_vec(),
            ))
        })
        .collect::<anyhow::Result<_>>()?;
    for chunk in messages.chunks(1_000) {
        inbox.store_many(chunk).await?;
    }
    store
        .pool()
        .execute("ANALYZE TABLE inboxed_inbox_messages")
        .await?;
    Ok(())
}
