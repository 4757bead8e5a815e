//! `inboxed-bench peer`: inboxed's store-then-process worker against pgmq, the fastest peer on
//! PostgreSQL, on the same server, workload and run. A job credits one of 10,000 accounts in the
//! transaction that completes it; 30,000 jobs a drain, at 1, 4 and 16 workers, each worker a
//! pool of its own:
//!
//! - pgmq (the `pgmq` crate, its SQL installed in the benchmark's database): in one
//!   transaction, `read` 50 (a visibility timeout of 30 s), the 50 updates in account order,
//!   `delete_batch`;
//! - inboxed, a lease worker with one claim loop and batches of 50, its handler updating the
//!   batch's accounts one statement a row in account order (pgmq's loop, in inboxed's shape);
//! - inboxed at its defaults (`WorkerConfig::default()`, a handler with only `handle`);
//! - the per-row worker with `ClaimMode::LockHeld`: no claim transaction of its own, so the
//!   difference to the lease worker is what that transaction costs;
//! - the [`ladder`]: the lease worker's own statements driven by hand, then giving up one
//!   guarantee a rung, to price each (not in the smoke run).
//!
//! Beside each drain, what a row cost: this process's CPU (the client side), the server's,
//! commits, WAL flushes and WAL bytes (from `pg_stat_database`, `pg_stat_wal` and
//! `pg_current_wal_lsn()`, read after the workers' connections closed, which flushes their
//! statistics). After the timed rounds, one more drain of each through the [`Tap`] counts its
//! statements and round trips, by command, and reads its WAL by record kind (`pg_walinspect`).
//! Receipt: pgmq's `send_batch` against `Inbox::store_many`, 1,000 jobs a call, and the
//! [`ladder`]'s receipt rungs (server time a job beside each rate). Every drain's
//! balances are checked: each job credited exactly once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::{Connection, PgPool};

use inboxed_core::inbox::{ClaimMode, Inbox, Worker, WorkerConfig};
use inboxed_core::{ConsumerName, Envelope, MessageId};
use inboxed_postgres::PgStore;

use crate::cpu::Cpu;
use crate::defaults::{ACCOUNTS, Credit as Job, Simple, credited_once, drained, end_probe};
use inboxed_test::tap::Tap;

mod ladder;
mod peer_queue;
mod per_row;
mod receipt;
use ladder::{Rung, Statements};
use peer_queue::{QUEUE, into_pgmq, pgmq_client, pgmq_worker};
pub(crate) use per_row::PerRow;
use receipt::Receipts;

const PROCESSES: &[&str] = &["inboxed-bench", "postgres"];

/// inboxed's worker against pgmq.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Jobs per drain.
    #[arg(long, default_value_t = 30_000)]
    jobs: usize,
    /// Worker counts (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    workers: Vec<usize>,
    /// Jobs a worker takes at once (pgmq's `qty`, inboxed's batch size).
    #[arg(long, default_value_t = 50)]
    batch: u32,
    /// Rounds; each drains every configuration once at every worker count.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// A smoke run for CI: 3,000 jobs, 1 and 4 workers, one round; fails only when inboxed's
    /// worker drains at under `--min-ratio` of pgmq's rate.
    #[arg(long)]
    quick: bool,
    /// The gross-regression floor of `--quick` (inboxed's per-row worker / pgmq): its debug
    /// build measured 0.41 to 0.89 in one-round runs, so the floor is well under noise.
    #[arg(long, default_value_t = 0.2)]
    min_ratio: f64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Config {
    Pgmq,
    PerRow,
    Defaults,
    /// The per-row worker with the row lock as its lease: no claim transaction of its own.
    LockHeld,
    Ladder(Rung),
}

/// The configurations; the smoke run drains the first [`SMOKE`] only.
const CONFIGS: [(Config, &str); 7] = [
    (
        Config::Pgmq,
        "pgmq: read, updates, delete_batch in one transaction",
    ),
    (
        Config::PerRow,
        "inboxed lease worker, one loop, a per-row handler",
    ),
    (Config::Defaults, "inboxed defaults (`handle` only)"),
    (
        Config::LockHeld,
        "inboxed lock-held worker, one loop, a per-row handler",
    ),
    (
        Config::Ladder(Rung::Apart),
        "ladder: the lease worker's statements by hand (claim committed apart)",
    ),
    (
        Config::Ladder(Rung::Inside),
        "ladder: the claim inside the batch's transaction",
    ),
    (
        Config::Ladder(Rung::Deleted),
        "ladder: the claim inside, rows deleted instead of kept done",
    ),
];
const SMOKE: usize = 4;

/// What one drain cost, per job.
#[derive(Clone, Copy, Default)]
struct Cost {
    rate: f64,
    client_us: f64,
    server_us: f64,
    commits: f64,
    /// Flushes of the WAL to disk (`pg_stat_wal.wal_sync`): what a durable commit waits for.
    flushes: f64,
    wal_bytes: f64,
    /// From a drain of its own through the [`Tap`], untimed.
    statements: f64,
    round_trips: f64,
}

pub(crate) async fn run(server: &str, mut args: Args) -> anyhow::Result<()> {
    if args.quick {
        (args.jobs, args.workers, args.rounds) = (3_000, vec![1, 4], 1);
    }
    let (url, store) = crate::variants::bench_database(server, 4, ACCOUNTS).await?;
    let pgmq = pgmq_client(url.clone(), 2).await?;
    pgmq.install_sql_from_embedded().await?;
    // The WAL of a counted drain by record kind (a contrib module of PostgreSQL 15).
    sqlx::raw_sql("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        .execute(store.pool())
        .await?;
    pgmq.create(QUEUE).await?;
    println!(
        "- {} jobs a drain, each crediting one of {ACCOUNTS} accounts (drawn at random) in the transaction that completes it; batches of {}; each worker a pool of its own; {} rounds",
        args.jobs, args.batch, args.rounds
    );
    let configs = &CONFIGS[..if args.quick { SMOKE } else { CONFIGS.len() }];
    let mut costs = vec![vec![Vec::new(); args.workers.len()]; configs.len()];
    let mut receipts = Receipts::new(store.pool(), !args.quick).await?;
    for round in 1..=args.rounds {
        receipts.round(round, &url, &store, args.jobs).await?;
        for (w, &workers) in args.workers.iter().enumerate() {
            for (c, &(config, name)) in configs.iter().enumerate() {
                let (cost, _) = drain(&url, &store, &args, (config, workers), None).await?;
                println!(
                    "- round {round}, {name}, {workers} workers: {:.0} jobs/s; a job: client {:.0} µs, server {:.0} µs, {:.3} commits, {:.3} WAL flushes, {:.0} WAL bytes",
                    cost.rate,
                    cost.client_us,
                    cost.server_us,
                    cost.commits,
                    cost.flushes,
                    cost.wal_bytes
                );
                costs[c][w].push(cost);
            }
        }
    }
    // Statements and round trips, from one more drain of each through the tap (the smoke
    // run's at its first worker count only: CI's time is short).
    let tap = Tap::start(&url).await?;
    let mut wire = vec![vec![None; args.workers.len()]; configs.len()];
    let counted = if args.quick { 1 } else { args.workers.len() };
    for (w, &workers) in args.workers.iter().enumerate().take(counted) {
        for (c, &(config, name)) in configs.iter().enumerate() {
            let (cost, detail) = drain(&url, &store, &args, (config, workers), Some(&tap)).await?;
            println!(
                "- through the tap (untimed), {name}, {workers} workers: a job {:.3} statements, {:.3} round trips",
                cost.statements, cost.round_trips
            );
            for line in detail {
                println!("  - {line}");
            }
            wire[c][w] = Some(cost);
        }
    }
    let median = |c: usize, w: usize, f: fn(&Cost) -> f64| {
        crate::median(costs[c][w].iter().map(f).collect())
    };
    // Same-round ratios against pgmq, their median.
    let ratio = |c: usize, w: usize| {
        crate::median(
            costs[c][w]
                .iter()
                .zip(&costs[0][w])
                .map(|(a, b)| a.rate / b.rate)
                .collect(),
        )
    };
    println!();
    println!(
        "| medians of {} rounds | workers | jobs/s | / pgmq (same round) | client µs a job | server µs a job | commits a job | WAL flushes a job | WAL bytes a job | statements a job | round trips a job |",
        args.rounds
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (c, &(_, name)) in configs.iter().enumerate() {
        for (w, &workers) in args.workers.iter().enumerate() {
            println!(
                "| {name} | {workers} | {:.0} | {:.2} | {:.0} | {:.0} | {:.3} | {:.3} | {:.0} | {} | {} |",
                median(c, w, |k| k.rate),
                ratio(c, w),
                median(c, w, |k| k.client_us),
                median(c, w, |k| k.server_us),
                median(c, w, |k| k.commits),
                median(c, w, |k| k.flushes),
                median(c, w, |k| k.wal_bytes),
                wire[c][w].map_or("-".into(), |k| format!("{:.3}", k.statements)),
                wire[c][w].map_or("-".into(), |k| format!("{:.3}", k.round_trips)),
            );
        }
    }
    receipts.print();
    if args.quick {
        let worst = (0..args.workers.len())
            .map(|w| ratio(1, w))
            .fold(f64::INFINITY, f64::min);
        anyhow::ensure!(
            worst >= args.min_ratio,
            "inboxed's per-row worker drained at {worst:.2} of pgmq's rate, under the smoke run's floor of {}",
            args.min_ratio
        );
    }
    Ok(())
}

/// `n` jobs of random accounts.
fn jobs(n: usize) -> Vec<Job> {
    (0..n)
        .map(|_| Job {
            account: fastrand::i64(0..ACCOUNTS),
        })
        .collect()
}

/// `envelopes` into the inbox with `store_many`, 1,000 a call.
async fn into_inbox(store: &PgStore, envelopes: &[Envelope]) -> anyhow::Result<()> {
    let inbox = Inbox::new(store.clone(), ConsumerName::new("bench")?);
    for chunk in envelopes.chunks(1_000) {
        inbox.store_many(chunk).await?;
    }
    Ok(())
}

#[allow(clippy::cast_precision_loss, reason = "job counts")]
fn rate(jobs: usize, took: Duration) -> f64 {
    jobs as f64 / took.as_secs_f64()
}

/// `n` jobs of random accounts as inbox messages.
fn envelopes(n: usize) -> anyhow::Result<Vec<Envelope>> {
    jobs(n)
        .iter()
        .map(|job| {
            let id = MessageId::new(uuid::Uuid::now_v7().to_string())?;
            Ok(Envelope::new(id, serde_json::to_vec(job)?))
        })
        .collect()
}

async fn truncate_inbox(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::raw_sql("TRUNCATE inboxed_inbox_messages")
        .execute(pool)
        .await?;
    Ok(())
}

/// The server's commits and WAL position, its statistics flushed by the connections that
/// closed before.
async fn server_counters(pool: &PgPool) -> anyhow::Result<(i64, i64, i64)> {
    let mut conn = pool.acquire().await?;
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(&mut *conn)
        .await?;
    Ok(sqlx::query_as(
        "SELECT xact_commit::bigint, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, \
                (SELECT wal_sync FROM pg_stat_wal) \
         FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(&mut *conn)
    .await?)
}

/// One drain of `args.jobs` jobs by `workers` workers of `config`: its rate and its cost a job;
/// through `tap`, its statements and round trips a job too (and a rate that is not its own).
async fn drain(
    url: &str,
    store: &PgStore,
    args: &Args,
    (config, workers): (Config, usize),
    tap: Option<&Tap>,
) -> anyhow::Result<(Cost, Vec<String>)> {
    let pool = store.pool();
    sqlx::raw_sql("UPDATE bench_accounts SET balance = 0")
        .execute(pool)
        .await?;
    truncate_inbox(pool).await?;
    let total = i64::try_from(args.jobs)?;
    if config == Config::Pgmq {
        into_pgmq(url, &jobs(args.jobs)).await?;
    } else {
        into_inbox(store, &envelopes(args.jobs)?).await?;
    }
    sqlx::raw_sql("VACUUM ANALYZE bench_accounts")
        .execute(pool)
        .await?;
    // Each worker's pool, made before the clock.
    let through = match tap {
        Some(tap) => tap.url(url)?,
        None => url.to_owned(),
    };
    let url = through.as_str();
    let mut pools = Vec::new();
    for _ in 0..workers {
        pools.push(match config {
            Config::Pgmq => Pools::Pgmq(pgmq_client(url.to_owned(), 1).await?),
            Config::Ladder(rung) => Pools::Ladder(
                rung,
                sqlx::PgConnection::connect(url).await?,
                Statements::new(store),
            ),
            Config::PerRow | Config::Defaults | Config::LockHeld => Pools::Inboxed(
                PgStore::pool_options()
                    .max_connections(match config {
                        Config::Defaults => 5,
                        // Its batch's transaction, the claims it counts, its liveness.
                        Config::LockHeld => 3,
                        _ => 2,
                    })
                    .acquire_timeout(Duration::from_secs(60))
                    .connect(url)
                    .await?,
            ),
        });
    }
    let (commits_before, wal_before, flushes_before) = server_counters(pool).await?;
    let counted = tap.map(Tap::counted).unwrap_or_default();
    if let Some(tap) = tap {
        tap.take_commands();
    }
    let lsn_before: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
        .fetch_one(pool)
        .await?;
    let cpu = Cpu::read(PROCESSES);
    let done = Arc::new(AtomicU64::new(0));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for own in pools {
        let (done, mut stopped) = (Arc::clone(&done), stopped.clone());
        let batch = args.batch;
        tasks.push(tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            match own {
                Pools::Pgmq(queue) => pgmq_worker(queue, batch, &done, total, shutdown).await,
                Pools::Ladder(rung, conn, sql) => {
                    ladder::worker(conn, &sql, rung, batch, &done, u64::try_from(total)?).await
                }
                Pools::Inboxed(pool) => {
                    let consumer = ConsumerName::new("bench")?;
                    let store = PgStore::new(pool.clone());
                    let run = if config == Config::Defaults {
                        let handler = Simple { calls: done };
                        Worker::new(store, consumer, handler, WorkerConfig::default())
                            .run(shutdown)
                            .await
                    } else {
                        let mode = if config == Config::LockHeld {
                            ClaimMode::LockHeld
                        } else {
                            ClaimMode::Lease
                        };
                        let config = WorkerConfig::default()
                            .batch_size(batch)
                            .concurrency(1)
                            .claim_mode(mode);
                        Worker::new(store, consumer, PerRow { calls: done }, config)
                            .run(shutdown)
                            .await
                    };
                    pool.close().await;
                    Ok(run?)
                }
            }
        }));
    }
    // pgmq's count is of committed jobs; inboxed's of handled ones (a batch redone counts
    // twice), so its end is also asked of the inbox table, through its partial indexes.
    let mut probe = end_probe(pool).await?;
    loop {
        let handled = done.load(Ordering::Relaxed) >= u64::try_from(total)?;
        if handled && (config == Config::Pgmq || drained(&mut probe).await?) {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "the drain did not finish in 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(if handled { 10 } else { 2 })).await;
    }
    let took = started.elapsed();
    let after = Cpu::read(PROCESSES);
    drop(probe);
    stop.send(true)?;
    for t in tasks {
        t.await??;
    }
    let (commits_after, wal_after, flushes_after) = server_counters(pool).await?;
    let counted = tap.map(Tap::counted).unwrap_or_default() - counted;
    credited_once(pool, total).await?;
    #[allow(clippy::cast_precision_loss, reason = "job and byte counts")]
    let per = |n: i64| n as f64 / total as f64;
    let mut detail = Vec::new();
    if let Some(tap) = tap {
        detail.push(format!("statements by command: {:?}", tap.take_commands()));
        // The WAL by record kind (pg_walinspect), its ten largest, a job's share. It reads
        // only WAL already on disk: the drain's end waits for the WAL writer.
        let end: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
            .fetch_one(pool)
            .await?;
        for _ in 0..100 {
            let flushed: bool =
                sqlx::query_scalar("SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn")
                    .bind(&end)
                    .fetch_one(pool)
                    .await?;
            if flushed {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT \"resource_manager/record_type\", count, combined_size \
             FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, true) WHERE count > 0 \
             ORDER BY combined_size DESC LIMIT 10",
        )
        .bind(&lsn_before)
        .bind(&end)
        .fetch_all(pool)
        .await?;
        for (kind, count, bytes) in rows {
            detail.push(format!(
                "WAL {kind}: {:.2} records, {:.0} bytes a job",
                per(count),
                per(bytes)
            ));
        }
    }
    let cost = Cost {
        rate: rate(args.jobs, took),
        client_us: cpu.used(&after, "inboxed-bench") / total as f64 * 1e6,
        server_us: cpu.used(&after, "postgres") / total as f64 * 1e6,
        commits: per(commits_after - commits_before),
        flushes: per(flushes_after - flushes_before),
        wal_bytes: per(wal_after - wal_before),
        statements: per(i64::try_from(counted.statements)?),
        round_trips: per(i64::try_from(counted.round_trips)?),
    };
    Ok((cost, detail))
}

enum Pools {
    Pgmq(pgmq::PGMQueueExt),
    Ladder(Rung, sqlx::PgConnection, Statements),
    Inboxed(PgPool),
}
