//! `inboxed-bench recovery`: a backlog drained by two worker processes (`Worker::run` with
//! `WorkerConfig::default()` at batch 500, a handler with only `handle` crediting one of 10,000
//! accounts) and the reaper at its defaults, against the same drain where one of the two is
//! killed with SIGKILL three times, evenly spread over the time the drain without kills took,
//! and started again at once each time. Both measured in the same round; every drain's
//! balances are checked (each message credited exactly once). With `--per-row`, the workers
//! are `inboxed-bench peer`'s lease worker instead (one claim loop, batches of 50, a batch
//! handler updating its accounts a statement a row): that benchmark's own drain, killed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::postgres::PgPoolOptions;
use tokio::process::{Child, Command};

use inboxed_core::ConsumerName;
use inboxed_core::inbox::{Reaper, ReaperConfig, Worker, WorkerConfig};
use inboxed_postgres::PgStore;

use crate::defaults::{ACCOUNTS, Simple, backlog, credited_once, settled};
use crate::peer::PerRow;

/// Drain time with kills against without.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Messages per drain.
    #[arg(long, default_value_t = 30_000)]
    messages: usize,
    /// Rows per claim of the workers (500; 50 with `--per-row`).
    #[arg(long)]
    batch: Option<u32>,
    /// SIGKILLs of one worker per drain.
    #[arg(long, default_value_t = 3)]
    kills: u32,
    /// Rounds; each runs both drains.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// CI smoke run: 12,000 messages, one round.
    #[arg(long)]
    quick: bool,
    /// Fail when the median ratio (with kills / without) is above this: a gross regression
    /// (rows waiting out a 30 s lease made it 6 or more). `--quick` sets 4 unless given.
    #[arg(long)]
    max_ratio: Option<f64>,
    /// Workers without the liveness registration (`WorkerConfig::liveness(false)`): their
    /// dead rows wait for the lease, as every worker's did before it.
    #[arg(long)]
    no_liveness: bool,
    /// Workers of `inboxed-bench peer`'s shape: one claim loop, a per-row batch handler.
    #[arg(long)]
    per_row: bool,
}

/// The worker process: `inboxed-bench recovery-worker`, run by [`run`] only.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkerArgs {
    /// The benchmark database.
    #[arg(long)]
    url: String,
    /// Rows per claim.
    #[arg(long)]
    batch: u32,
    /// `WorkerConfig::liveness(false)`.
    #[arg(long)]
    no_liveness: bool,
    /// One claim loop and a per-row batch handler.
    #[arg(long)]
    per_row: bool,
}

pub(crate) async fn worker(args: WorkerArgs) -> anyhow::Result<()> {
    let pool = PgPoolOptions::new()
        .max_connections(5)
        .acquire_timeout(Duration::from_secs(60))
        .connect(&args.url)
        .await?;
    let (store, consumer) = (PgStore::new(pool), ConsumerName::new("bench")?);
    let config = WorkerConfig::default()
        .batch_size(args.batch)
        .liveness(!args.no_liveness);
    let forever = std::future::pending::<()>();
    if args.per_row {
        let handler = PerRow {
            calls: Arc::default(),
        };
        let config = config.concurrency(1);
        Worker::new(store, consumer, handler, config)
            .run(forever)
            .await?;
    } else {
        Worker::new(store, consumer, Simple::default(), config)
            .run(forever)
            .await?;
    }
    Ok(())
}

pub(crate) async fn run(server: &str, mut args: Args) -> anyhow::Result<()> {
    let batch = args.batch.unwrap_or(if args.per_row { 50 } else { 500 });
    args.batch = Some(batch);
    if args.quick {
        (args.messages, args.rounds) = (12_000, 1);
        args.max_ratio = args.max_ratio.or(Some(4.0));
    }
    let (url, store) = crate::variants::bench_database(server, 4, ACCOUNTS).await?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let reaper = {
        let (reaper, mut stopped) = (
            Reaper::new(store.clone(), ReaperConfig::default()),
            stopped.clone(),
        );
        tokio::spawn(async move {
            reaper
                .run(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })
                .await;
        })
    };
    drop(stopped);
    println!(
        "- {} messages per drain, two worker processes (`WorkerConfig::default()` at batch {batch}: {}, lease 30 s, liveness {}), the reaper at its defaults (a pass every 2 s); {} SIGKILLs of one worker per drain, evenly spread over the drain without kills, each followed by a new worker process at once; {} rounds",
        args.messages,
        if args.per_row {
            "one claim loop, a per-row batch handler"
        } else {
            "up to 4 claim loops, paced, `handle` only"
        },
        if args.no_liveness { "off" } else { "on" },
        args.kills,
        args.rounds
    );
    let mut ratios = Vec::new();
    let (mut calm, mut killed) = (Vec::new(), Vec::new());
    for round in 1..=args.rounds {
        let base = drain(&url, &store, &args, None).await?;
        let with = drain(&url, &store, &args, Some(base)).await?;
        println!(
            "- round {round}: without kills {:.2} s, with {} kills {:.2} s",
            base.as_secs_f64(),
            args.kills,
            with.as_secs_f64()
        );
        calm.push(base.as_secs_f64());
        killed.push(with.as_secs_f64());
        ratios.push(with.as_secs_f64() / base.as_secs_f64());
    }
    let _ = stop.send(true);
    reaper.await?;
    let ratio = crate::median(ratios);
    println!();
    println!("| drain | seconds (median) | / without kills (median of rounds) |");
    println!("|---|---|---|");
    println!("| without kills | {:.2} | 1.00 |", crate::median(calm));
    println!(
        "| {} SIGKILLs of one worker | {:.2} | {ratio:.2} |",
        args.kills,
        crate::median(killed)
    );
    if let Some(max) = args.max_ratio {
        anyhow::ensure!(
            ratio <= max,
            "the drain with {} kills took {ratio:.2} times as long as without: above {max}",
            args.kills
        );
    }
    Ok(())
}

/// One drain of a fresh backlog; with `kills_over`, one worker is killed `kills` times spread
/// over that span.
async fn drain(
    url: &str,
    store: &PgStore,
    args: &Args,
    kills_over: Option<Duration>,
) -> anyhow::Result<Duration> {
    let pool = store.pool();
    backlog(store, &ConsumerName::new("bench")?, args.messages).await?;
    let total = i64::try_from(args.messages)?;
    let started = Instant::now();
    let mut steady = spawn(url, args)?;
    let mut victim = spawn(url, args)?;
    let kill_at: Vec<Duration> = kills_over.map_or_else(Vec::new, |span| {
        (1..=args.kills)
            .map(|k| span.mul_f64(f64::from(k) / f64::from(args.kills + 1)))
            .collect()
    });
    let mut next_kill = 0;
    loop {
        // Counting settled rows scans the churning table (tens of ms): polled at most a tenth
        // of the time, so the count does not take the drain's cores.
        let counting = Instant::now();
        let done = settled(pool).await?;
        let pause = Duration::from_millis(10).max(counting.elapsed() * 9);
        if done >= total {
            break;
        }
        if kill_at
            .get(next_kill)
            .is_some_and(|t| started.elapsed() >= *t)
        {
            victim.kill().await?;
            victim = spawn(url, args)?;
            next_kill += 1;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "the drain did not finish in 10 minutes ({done} of {total})"
        );
        tokio::time::sleep(pause).await;
    }
    let took = started.elapsed();
    steady.kill().await?;
    victim.kill().await?;
    credited_once(pool, total).await?;
    let dead: i64 =
        sqlx::query_scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE status = 'dead'")
            .fetch_one(pool)
            .await?;
    anyhow::ensure!(dead == 0, "{dead} rows went dead");
    Ok(took)
}

fn spawn(url: &str, args: &Args) -> anyhow::Result<Child> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["recovery-worker", "--url", url, "--batch"])
        .arg(args.batch.unwrap_or(500).to_string());
    if args.no_liveness {
        cmd.arg("--no-liveness");
    }
    if args.per_row {
        cmd.arg("--per-row");
    }
    Ok(cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?)
}
