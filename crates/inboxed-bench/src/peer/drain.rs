//! One drain of `inboxed-bench peer`: the queue filled, each worker's pool made before the
//! clock, the drain timed, its balances checked, and what it cost a job.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::{Connection, PgPool};

use inboxed_core::inbox::{ClaimMode, Inbox, Worker, WorkerConfig};
use inboxed_core::{ConsumerName, Envelope, MessageId};
use inboxed_postgres::PgStore;

use super::ladder::{self, Rung, Statements};
use super::peer_queue::{into_pgmq, pgmq_client, pgmq_worker};
use super::{Args, Config, Cost, Job, PROCESSES, PerRow};
use crate::cpu::Cpu;
use crate::defaults::{ACCOUNTS, Simple, credited_once, drained, end_probe};
use inboxed_test::tap::Tap;

/// `n` jobs of random accounts.
pub(super) fn jobs(n: usize) -> Vec<Job> {
    (0..n)
        .map(|_| Job {
            account: fastrand::i64(0..ACCOUNTS),
        })
        .collect()
}

/// `envelopes` into the inbox with `store_many`, 1,000 a call.
pub(super) async fn into_inbox(store: &PgStore, envelopes: &[Envelope]) -> anyhow::Result<()> {
    let inbox = Inbox::new(store.clone(), ConsumerName::new("bench")?);
    for chunk in envelopes.chunks(1_000) {
        inbox.store_many(chunk).await?;
    }
    Ok(())
}

#[allow(clippy::cast_precision_loss, reason = "job counts")]
pub(super) fn rate(jobs: usize, took: Duration) -> f64 {
    jobs as f64 / took.as_secs_f64()
}

/// `n` jobs of random accounts as inbox messages.
pub(super) fn envelopes(n: usize) -> anyhow::Result<Vec<Envelope>> {
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
pub(super) async fn drain(
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
    if config.is_pgmq() {
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
            Config::Pgmq | Config::PgmqArrival => Pools::Pgmq(
                pgmq_client(url.to_owned(), 1).await?,
                config == Config::Pgmq,
            ),
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
                Pools::Pgmq(queue, sorted) => {
                    pgmq_worker(queue, (batch, sorted), &done, total, shutdown).await
                }
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
        if handled && (config.is_pgmq() || drained(&mut probe).await?) {
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
    /// pgmq's client; whether its worker sorts its updates.
    Pgmq(pgmq::PGMQueueExt, bool),
    Ladder(Rung, sqlx::PgConnection, Statements),
    Inboxed(PgPool),
}
