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
//! - pgmq in the defaults' shape, its updates in arrival order: a `handle` sees one row and
//!   cannot sort its batch's locks, so this is the peer doing what the defaults do;
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

use crate::defaults::{ACCOUNTS, Credit as Job};
use inboxed_test::tap::Tap;

mod drain;
mod ladder;
mod peer_queue;
mod per_row;
mod receipt;
use drain::{drain, envelopes, into_inbox, jobs, rate};
use ladder::Rung;
use peer_queue::{QUEUE, into_pgmq, pgmq_client};
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
    /// pgmq with its updates in arrival order, as the defaults run a batch's rows.
    PgmqArrival,
    PerRow,
    Defaults,
    /// The per-row worker with the row lock as its lease: no claim transaction of its own.
    LockHeld,
    Ladder(Rung),
}

/// The configurations; the smoke run drains the first [`SMOKE`] only.
const CONFIGS: [(Config, &str); 8] = [
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
        Config::PgmqArrival,
        "pgmq, its updates in arrival order (the defaults' shape)",
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

impl Config {
    fn is_pgmq(self) -> bool {
        matches!(self, Self::Pgmq | Self::PgmqArrival)
    }
}

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
    if let Some(arrival) = configs.iter().position(|&(c, _)| c == Config::PgmqArrival) {
        let defaults = configs.iter().position(|&(c, _)| c == Config::Defaults);
        let defaults = defaults.ok_or_else(|| anyhow::anyhow!("the defaults are drained"))?;
        let shaped: Vec<String> = (0..args.workers.len())
            .map(|w| {
                let same_round = costs[defaults][w].iter().zip(&costs[arrival][w]);
                format!(
                    "{:.2}",
                    crate::median(same_round.map(|(a, b)| a.rate / b.rate).collect())
                )
            })
            .collect();
        println!();
        println!(
            "- the defaults against pgmq in their shape (updates in arrival order), same round, medians at {:?} workers: {}",
            args.workers,
            shaped.join(", ")
        );
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
