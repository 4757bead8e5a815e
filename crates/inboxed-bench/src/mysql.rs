//! `inboxed-bench mysql`: the processor on MySQL or MariaDB against a hand-written consumer
//! issuing the same claim through sqlx, with the same concurrency, in interleaved rounds of
//! one run; and the processor's batches (100 messages to a transaction, counted by the broker)
//! against its single messages, without and with one outbox row per message (`write_many`).
//!
//! The hand-written consumer begins as the store does (the session bounds, READ COMMITTED),
//! inserts the key with the store's guard, credits the account, forgets the attempt counter and
//! commits. What it leaves out is what the library adds for safety, and so is charged to it:
//! the check after the claim's write (a dead letter of the key written meanwhile undoes the
//! claim) and the reset of the session bounds when a connection returns to the pool.

use std::str::FromStr;
use std::time::{Duration, Instant};

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{AssertSqlSafe, ConnectOptions, Executor, MySql, MySqlConnection, MySqlPool};

use inboxed_core::outbox::{Outbox, OutgoingMessage};
use inboxed_core::{
    ConsumerName, Envelope, Handler, HandlerError, MessageId, Processor, ProcessorConfig,
};
use inboxed_mysql::MySqlStore;

/// The processor on MySQL against the same claim through sqlx.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Server to create the benchmark database `inboxed_bench` on (dropped first).
    #[arg(
        long,
        env = "INBOXED_MYSQL_URL",
        default_value = "mysql://root@127.0.0.1:3306"
    )]
    mysql_url: String,
    /// Concurrent workers (comma-separated); each pool holds as many connections as the most.
    #[arg(long, value_delimiter = ',', default_value = "1,8")]
    workers: Vec<usize>,
    /// Seconds per variant per round.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Rounds; each runs every variant once, in rotating order.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Accounts the business update spreads over.
    #[arg(long, default_value_t = 10_000)]
    accounts: i64,
    /// CI smoke run: 4 workers, 1 s per variant, 3 rounds.
    #[arg(long)]
    quick: bool,
    /// Fail when the median ratio of the processor to the same claim through sqlx falls below
    /// this at any worker count: a gross regression, far below a shared machine's noise (a
    /// debug build measured 0.71 to 0.79). `--quick` sets 0.4 unless given.
    #[arg(long)]
    min_ratio: Option<f64>,
}

const UPDATE: &str = "UPDATE bench_accounts SET balance = balance + 1 WHERE id = ?";

/// The store's own begin with the processor's default bounds.
const BEGIN: &str = "ROLLBACK; SET SESSION innodb_lock_wait_timeout = 5, SESSION wait_timeout = 60; \
                     /*M! SET SESSION max_statement_time = 30.000 */; \
                     SET TRANSACTION ISOLATION LEVEL READ COMMITTED; BEGIN";

/// The claim's write with its guard, as the store's `claim.sql` has it.
const CLAIM: &str = "INSERT INTO inboxed_processed_messages \
                     (consumer_name, message_id, message_type, correlation_id, payload_hash) \
                     SELECT ?, ?, NULL, NULL, ? FROM DUAL WHERE NOT EXISTS ( \
                     SELECT 1 FROM inboxed_dead_letters d \
                     WHERE d.consumer_name = ? AND d.message_id = ? AND d.reason <> 'conflict')";

/// The settling statement, as the store's `clear_attempts.sql` has it.
const SETTLE: &str = "DELETE FROM inboxed_attempts WHERE consumer_name = ? AND message_id = ?";

#[derive(Clone, Copy)]
struct Credit {
    accounts: i64,
}

impl Handler<MySql> for Credit {
    async fn handle(
        &self,
        _msg: &Envelope,
        conn: &mut MySqlConnection,
    ) -> Result<(), HandlerError> {
        sqlx::query(UPDATE)
            .bind(fastrand::i64(0..self.accounts))
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

/// [`Credit`] plus one outbox row per message, in the same transaction: a batch writes its
/// rows with one `write_many`.
#[derive(Clone)]
struct CreditAndWrite {
    credit: Credit,
    outbox: Outbox<MySqlStore>,
}

impl Handler<MySql> for CreditAndWrite {
    const BATCHES: bool = true;

    async fn handle(&self, msg: &Envelope, conn: &mut MySqlConnection) -> Result<(), HandlerError> {
        self.handle_batch(&[msg], conn).await
    }

    async fn handle_batch(
        &self,
        msgs: &[&Envelope],
        conn: &mut MySqlConnection,
    ) -> Result<(), HandlerError> {
        for msg in msgs {
            self.credit.handle(msg, conn).await?;
        }
        let out: Vec<OutgoingMessage> = msgs
            .iter()
            .map(|m| OutgoingMessage::new("billing.credited", m.payload().to_vec()).caused_by(m))
            .collect();
        self.outbox.write_many(conn, &out).await?;
        Ok(())
    }
}

/// The two processors the variants run.
#[derive(Clone)]
struct Processors {
    credit: Processor<MySqlStore, Credit>,
    write: Processor<MySqlStore, CreditAndWrite>,
}

#[derive(Clone, Copy)]
enum Variant {
    Processor,
    RawSqlx,
    BusinessOnly,
    /// `Processor::process_batch_with_counts` of [`BATCH`] first deliveries.
    Batch,
    /// The same, the handler also writing one outbox row per message.
    BatchWrite,
}

/// Messages to a transaction in the batched variant, as the `batch` benchmark's smoke run.
const BATCH: usize = 100;

pub(crate) async fn run(mut args: Args) -> anyhow::Result<()> {
    if args.quick {
        (args.workers, args.seconds, args.rounds) = (vec![4], 1.0, 3);
        args.min_ratio = args.min_ratio.or(Some(0.4));
    }
    let most = u32::try_from(args.workers.iter().copied().max().unwrap_or(8)).unwrap_or(8);
    let server = MySqlConnectOptions::from_str(&args.mysql_url)?;
    let mut admin = server.connect().await?;
    admin
        .execute("DROP DATABASE IF EXISTS inboxed_bench; CREATE DATABASE inboxed_bench")
        .await?;
    let url = format!("{}/inboxed_bench", args.mysql_url.trim_end_matches('/'));
    let store = MySqlStore::connect(&url, most).await?;
    store.migrate().await?;
    let raw = MySqlPoolOptions::new()
        .max_connections(most)
        .after_connect(|conn, _| {
            Box::pin(async move {
                conn.execute(
                    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; \
                     SET time_zone = '+00:00'",
                )
                .await
                .map(drop)
            })
        })
        .connect(&url)
        .await?;
    create_accounts(&raw, args.accounts).await?;
    let credit = Credit {
        accounts: args.accounts,
    };
    let processor = Processor::with_config(
        store.clone(),
        ConsumerName::new("bench")?,
        credit,
        ProcessorConfig::default(),
    );
    processor.ensure_ready().await?;
    let write = Processor::with_config(
        store.clone(),
        ConsumerName::new("bench-outbox")?,
        CreditAndWrite {
            credit,
            outbox: Outbox::new(store.clone()),
        },
        ProcessorConfig::default(),
    );
    let processors = Processors {
        credit: processor,
        write,
    };
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&raw)
        .await?;
    println!(
        "{version}: {} s per variant, {} rounds, {} accounts",
        args.seconds, args.rounds, args.accounts
    );
    let variants = [
        Variant::Processor,
        Variant::RawSqlx,
        Variant::BusinessOnly,
        Variant::Batch,
        Variant::BatchWrite,
    ];
    let dur = Duration::from_secs_f64(args.seconds);
    let accounts = args.accounts;
    let rates = crate::load::rounds(
        args.rounds,
        &args.workers,
        variants,
        async |variant, workers| {
            let started = Instant::now();
            let (processors, raw) = (processors.clone(), raw.clone());
            let (n, _) = crate::load::for_duration(workers, dur, move || {
                let (processors, raw) = (processors.clone(), raw.clone());
                async move { one(variant, &processors, &raw, accounts).await }
            })
            .await?;
            Ok(n as f64 / started.elapsed().as_secs_f64())
        },
        |round, workers, row| {
            println!(
                "round {round}, {workers} workers: processor {:.0} msg/s, same claim through \
                 sqlx {:.0} msg/s, business only {:.0} tx/s, processor batches of {BATCH} \
                 {:.0} msg/s, with an outbox row each {:.0} msg/s",
                row[0], row[1], row[2], row[3], row[4]
            );
        },
    )
    .await?;
    println!();
    println!(
        "| workers | processor msg/s | same claim through sqlx msg/s | business update alone tx/s | \
         processor / sqlx (library overhead) | sqlx with claim / business alone (cost of dedup) | \
         processor, batches of {BATCH}, msg/s | batches / single | batches with an outbox row \
         each, msg/s | with outbox / without |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for &workers in &args.workers {
        let of = |f: &dyn Fn(&[f64; 5]) -> f64| crate::median_at(&rates, workers, f);
        println!(
            "| {workers} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.0} | {:.2} | {:.0} | {:.2} |",
            of(&|r| r[0]),
            of(&|r| r[1]),
            of(&|r| r[2]),
            of(&|r| r[0] / r[1]),
            of(&|r| r[1] / r[2]),
            of(&|r| r[3]),
            of(&|r| r[3] / r[0]),
            of(&|r| r[4]),
            of(&|r| r[4] / r[3]),
        );
    }
    admin.execute("DROP DATABASE inboxed_bench").await?;
    if let Some(min) = args.min_ratio {
        for &workers in &args.workers {
            let ratio = crate::median_at(&rates, workers, |r| r[0] / r[1]);
            anyhow::ensure!(
                ratio >= min,
                "processor / sqlx on MySQL at {workers} workers is {ratio:.2}, below {min}"
            );
        }
    }
    Ok(())
}

/// One message (or, for the business alone, one transaction) of `variant`.
async fn one(
    variant: Variant,
    processors: &Processors,
    raw: &MySqlPool,
    accounts: i64,
) -> anyhow::Result<u64> {
    let fresh = || {
        Envelope::new(
            MessageId::from_uuid(uuid::Uuid::now_v7()),
            b"{\"credit\":1}".to_vec(),
        )
    };
    let env = fresh();
    match variant {
        Variant::Batch | Variant::BatchWrite => {
            let batch: Vec<Envelope> = (0..BATCH).map(|_| fresh()).collect();
            let counts = vec![Some(1); BATCH];
            let results = if matches!(variant, Variant::Batch) {
                processors
                    .credit
                    .process_batch_with_counts(&batch, &counts)
                    .await
            } else {
                processors
                    .write
                    .process_batch_with_counts(&batch, &counts)
                    .await
            };
            for r in results {
                anyhow::ensure!(r? == inboxed_core::Outcome::Processed);
            }
            return Ok(BATCH as u64);
        }
        Variant::Processor => {
            processors.credit.process(&env, Some(1)).await?;
        }
        Variant::RawSqlx => {
            let mut tx = raw.begin_with(BEGIN).await?;
            let id = env.id().as_str();
            sqlx::query(CLAIM)
                .bind("bench")
                .bind(id)
                .bind(env.hash().as_bytes().as_slice())
                .bind("bench")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            sqlx::query(UPDATE)
                .bind(fastrand::i64(0..accounts))
                .execute(&mut *tx)
                .await?;
            sqlx::query(SETTLE)
                .bind("bench")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        }
        Variant::BusinessOnly => {
            let mut tx = raw.begin().await?;
            sqlx::query(UPDATE)
                .bind(fastrand::i64(0..accounts))
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        }
    }
    Ok(1)
}

/// `bench_accounts` with `accounts` rows at balance 0, inserted a thousand at a time.
pub(crate) async fn create_accounts(pool: &MySqlPool, accounts: i64) -> anyhow::Result<()> {
    pool.execute(
        "CREATE TABLE bench_accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL) \
         ENGINE = InnoDB",
    )
    .await?;
    let mut start = 0;
    while start < accounts {
        let end = (start + 1000).min(accounts);
        let values: Vec<String> = (start..end).map(|i| format!("({i}, 0)")).collect();
        pool.execute(AssertSqlSafe(format!(
            "INSERT INTO bench_accounts (id, balance) VALUES {}",
            values.join(", ")
        )))
        .await?;
        start = end;
    }
    Ok(())
}
