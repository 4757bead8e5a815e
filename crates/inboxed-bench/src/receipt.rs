//! `inboxed-bench receipt`: messages stored per second by `Inbox::store_many` at several batch
//! sizes, against `Inbox::store` (one transaction each, 32 tasks at once), measured in the same
//! run, interleaved round by round, each measurement on an emptied inbox table; on PostgreSQL,
//! or with `--mysql` on MySQL or MariaDB.

use std::str::FromStr as _;
use std::time::Instant;

use sqlx::postgres::PgPoolOptions;
use sqlx::{ConnectOptions as _, Executor as _};
use tokio::task::JoinSet;

use inboxed_core::inbox::store::InboxStore;
use inboxed_core::inbox::{Enqueued, Inbox};
use inboxed_core::{ConsumerName, Envelope, MessageId};
use inboxed_mysql::MySqlStore;
use inboxed_postgres::PgStore;

/// Single against batch receipt.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Messages stored per measurement.
    #[arg(long, default_value_t = 20_000)]
    messages: usize,
    /// Batch sizes of `store_many` (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "10,50,500")]
    batches: Vec<usize>,
    /// Rounds; each measures every variant once, in turn.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Tasks calling `store` at once (one database connection each).
    #[arg(long, default_value_t = 32)]
    single_tasks: usize,
    /// Tasks calling `store_many` at once.
    #[arg(long, default_value_t = 4)]
    batch_tasks: usize,
    /// CI smoke run: 4,000 messages, batches of 500, 2 rounds.
    #[arg(long)]
    quick: bool,
    /// Fail when the median ratio at the largest batch falls below this: a gross regression,
    /// far below the noise of a shared machine. `--quick` sets 3 unless given.
    #[arg(long)]
    min_ratio: Option<f64>,
    /// Measure on MySQL or MariaDB (`--mysql-url`) instead of PostgreSQL.
    #[arg(long)]
    mysql: bool,
    /// The MySQL server (the database `inboxed_bench` is created on it afresh).
    #[arg(
        long,
        env = "INBOXED_MYSQL_URL",
        default_value = "mysql://root@127.0.0.1:3306"
    )]
    mysql_url: String,
}

/// The inbox table of the engine measured, emptied before each measurement.
enum Table {
    Postgres(sqlx::PgPool),
    Mysql(sqlx::MySqlPool),
}

impl Table {
    async fn empty(&self) -> anyhow::Result<()> {
        const SQL: &str = "TRUNCATE inboxed_inbox_messages";
        match self {
            Self::Postgres(pool) => pool.execute(SQL).await.map(|_| ())?,
            Self::Mysql(pool) => pool.execute(SQL).await.map(|_| ())?,
        }
        Ok(())
    }
}

pub(crate) async fn run(server: &str, mut args: Args) -> anyhow::Result<()> {
    if args.quick {
        (args.messages, args.batches, args.rounds) = (4_000, vec![500], 2);
        args.min_ratio = args.min_ratio.or(Some(3.0));
    }
    let tasks = u32::try_from(args.single_tasks.max(args.batch_tasks))?;
    if args.mysql {
        let mut admin = sqlx::mysql::MySqlConnectOptions::from_str(&args.mysql_url)?
            .connect()
            .await?;
        admin
            .execute("DROP DATABASE IF EXISTS inboxed_bench; CREATE DATABASE inboxed_bench")
            .await?;
        let url = format!("{}/inboxed_bench", args.mysql_url.trim_end_matches('/'));
        let store = MySqlStore::connect(&url, tasks).await?;
        store.migrate().await?;
        let table = Table::Mysql(store.pool().clone());
        let inbox = Inbox::new(store, ConsumerName::new("bench")?);
        compare(&table, &inbox, &args).await?;
        admin.execute("DROP DATABASE inboxed_bench").await?;
        return Ok(());
    }
    let url = crate::fresh_database(server).await?;
    let pool = PgPoolOptions::new()
        .max_connections(tasks)
        .connect(&url)
        .await?;
    let store = PgStore::new(pool.clone());
    store.migrate().await?;
    let inbox = Inbox::new(store, ConsumerName::new("bench")?);
    compare(&Table::Postgres(pool), &inbox, &args).await
}

/// Every variant once a round, interleaved; the table of medians; the regression check.
async fn compare<S: InboxStore + Clone + Send + Sync + 'static>(
    table: &Table,
    inbox: &Inbox<S>,
    args: &Args,
) -> anyhow::Result<()> {
    let messages = envelopes(args.messages)?;
    println!(
        "- {} messages per measurement (UUID v7 ids, 40-byte JSON payloads), {} rounds, on an emptied inbox table each time",
        args.messages, args.rounds
    );
    println!(
        "- single: `Inbox::store`, {} tasks; batches: `Inbox::store_many`, {} tasks",
        args.single_tasks, args.batch_tasks
    );
    let mut ratios = vec![Vec::new(); args.batches.len()];
    let mut rates = vec![Vec::new(); args.batches.len() + 1];
    for round in 1..=args.rounds {
        let single = measure(table, inbox, &messages, 1, args.single_tasks).await?;
        rates[0].push(single);
        let mut line = format!("- round {round}: single {single:.0} msg/s");
        for (i, &batch) in args.batches.iter().enumerate() {
            let rate = measure(table, inbox, &messages, batch, args.batch_tasks).await?;
            rates[i + 1].push(rate);
            ratios[i].push(rate / single);
            line.push_str(&format!(", batches of {batch} {rate:.0} msg/s"));
        }
        println!("{line}");
    }
    println!();
    println!("| receipt | msg/s (median) | / single (median of rounds) |");
    println!("|---|---|---|");
    println!(
        "| `store`, one transaction each | {:.0} | 1.00 |",
        crate::median(rates[0].clone())
    );
    let mut last = 0.0;
    for (i, &batch) in args.batches.iter().enumerate() {
        last = crate::median(ratios[i].clone());
        println!(
            "| `store_many`, batches of {batch} | {:.0} | {last:.2} |",
            crate::median(rates[i + 1].clone())
        );
    }
    if let Some(min) = args.min_ratio
        && last < min
    {
        anyhow::bail!("batch / single receipt ratio {last:.2} is below {min}: a regression");
    }
    Ok(())
}

/// Distinct messages with time-ordered ids and small payloads.
fn envelopes(n: usize) -> anyhow::Result<Vec<Envelope>> {
    (0..n)
        .map(|i| {
            let id = MessageId::new(uuid::Uuid::now_v7().to_string())?;
            let body = format!(r#"{{"account": {}, "amount": 1}}"#, i % 10_000);
            Ok(Envelope::new(id, body.into_bytes()))
        })
        .collect()
}

/// Messages stored per second: `messages` split among `tasks`, each storing its share in
/// batches of `batch` (1: `store`).
async fn measure<S: InboxStore + Clone + Send + Sync + 'static>(
    table: &Table,
    inbox: &Inbox<S>,
    messages: &[Envelope],
    batch: usize,
    tasks: usize,
) -> anyhow::Result<f64> {
    table.empty().await?;
    let share = messages.len().div_ceil(tasks.max(1));
    let started = Instant::now();
    let mut set = JoinSet::new();
    for part in messages.chunks(share) {
        let (inbox, part) = (inbox.clone(), part.to_vec());
        set.spawn(async move {
            let mut stored = 0_usize;
            for chunk in part.chunks(batch) {
                let outcomes = if batch == 1 {
                    vec![inbox.store(&chunk[0]).await?]
                } else {
                    inbox.store_many(chunk).await?
                };
                stored += outcomes
                    .iter()
                    .filter(|o| matches!(o, Enqueued::Stored { .. }))
                    .count();
            }
            Ok::<_, inboxed_core::Error>(stored)
        });
    }
    let mut stored = 0;
    while let Some(done) = set.join_next().await {
        stored += done??;
    }
    let secs = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        stored == messages.len(),
        "{stored} of {} messages stored",
        messages.len()
    );
    #[allow(clippy::cast_precision_loss)]
    Ok(messages.len() as f64 / secs)
}
